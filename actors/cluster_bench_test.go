package actors

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// BenchmarkClusterForward: checks through one member of two, each for an
// id the other owns (every check forwarded), from many goroutines;
// reports the checks per forwarded batch.
func BenchmarkClusterForward(b *testing.B) {
	tc := newTestCluster(b)
	a := tc.start(tc.config("a"))
	o := tc.start(tc.config("b"))
	tc.settle(a, o)
	var reqs []table.Request
	for i := 0; len(reqs) < 1000; i++ {
		if id := fmt.Sprint("user-", i); servedHere(o, id) {
			reqs = append(reqs, table.Request{ID: id, Policy: table.Policy{Scale: time.Hour, Limit: 1 << 50}, Hits: 1})
		}
	}
	before, _ := a.ClusterStatus()
	b.ReportAllocs()
	b.SetParallelism(32)
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
	after, _ := a.ClusterStatus()
	if n := after.Stats.ForwardedBatches - before.Stats.ForwardedBatches; n > 0 {
		b.ReportMetric(float64(after.Stats.ForwardedChecks-before.Stats.ForwardedChecks)/float64(n), "checks/batch")
	}
}
