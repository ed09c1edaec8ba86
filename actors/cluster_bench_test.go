package actors

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// BenchmarkClusterForward: checks through one member of two, each for an
// id the other owns (every check forwarded), from many goroutines;
// reports the checks per forwarded batch and the CPU of both members per
// check.
func BenchmarkClusterForward(b *testing.B) { benchCluster(b, false) }

// BenchmarkClusterLocal: the same checks, each for an id the member they
// go through owns (none forwarded): the reference of
// BenchmarkClusterForward's CPU per check.
func BenchmarkClusterLocal(b *testing.B) { benchCluster(b, true) }

func benchCluster(b *testing.B, local bool) {
	tc := newTestCluster(b)
	a := tc.start(tc.config("a"))
	o := tc.start(tc.config("b"))
	tc.settle(a, o)
	owner := o
	if local {
		owner = a
	}
	var reqs []table.Request
	for i := 0; len(reqs) < 1000; i++ {
		if id := fmt.Sprint("user-", i); servedHere(owner, id) {
			reqs = append(reqs, table.Request{ID: id, Policy: table.Policy{Scale: time.Hour, Limit: 1 << 50}, Hits: 1})
		}
	}
	before, _ := a.ClusterStatus()
	b.ReportAllocs()
	b.SetParallelism(32)
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := a.Check(context.Background(), reqs[i%len(reqs)]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	after, _ := a.ClusterStatus()
	if n := after.Stats.ForwardedBatches - before.Stats.ForwardedBatches; n > 0 {
		b.ReportMetric(float64(after.Stats.ForwardedChecks-before.Stats.ForwardedChecks)/float64(n), "checks/batch")
	}
}

// processCPU is the CPU time (user and system) the process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
