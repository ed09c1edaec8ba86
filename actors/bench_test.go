package actors

import (
	"context"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ratelimitd/ratelimitd/table"
)

const benchKeys = 1000

func benchRequests() []table.Request {
	reqs := make([]table.Request, benchKeys)
	for i := range reqs {
		reqs[i] = table.Request{ID: "user-" + strconv.Itoa(i*7919), Policy: table.Policy{Scale: time.Hour, Limit: 1 << 50}, Hits: 1}
	}
	return reqs
}

// mutexFloor is the floor every in-process limiter is measured against: one
// map of fixed-window counters behind one mutex.
type mutexFloor struct {
	mu sync.Mutex
	m  map[string]int64
}

func (f *mutexFloor) allow(r *table.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.m[r.ID]
	if n+r.Hits > r.Limit {
		return false
	}
	f.m[r.ID] = n + r.Hits
	return true
}

// BenchmarkCheck measures System.Check from many goroutines at 1k keys
// against the map+mutex floor, in one run. system+topkeys is the same
// with top-keys tracking (Config.TopKeys at its defaults: at millions of
// checks a second per shard, each samples its admitted checks, one in
// DefaultTopKeysSample; 1k keys over the default shards are more than
// each shard's summaries hold, most of them within its front), paired
// with a System without it in alternating rounds: its
// x-system is its checks/s ÷ the other's, a ratio that the swings of a
// shared machine between two runs do not blur. p=1 runs GOMAXPROCS
// goroutines; p=64 runs 64 per proc, as a loaded HTTP server would.
func BenchmarkCheck(b *testing.B) {
	reqs := benchRequests()
	for _, p := range []int{1, 64} {
		b.Run("floor=map+mutex/p="+strconv.Itoa(p), func(b *testing.B) {
			f := &mutexFloor{m: make(map[string]int64)}
			var next atomic.Uint64
			b.SetParallelism(p)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := next.Add(7)
				for pb.Next() {
					i++
					if !f.allow(&reqs[i%benchKeys]) {
						b.Error("denied")
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
		})
		b.Run("system/p="+strconv.Itoa(p), func(b *testing.B) {
			s := startSystem(b, Config{})
			ctx := context.Background()
			var next atomic.Uint64
			b.SetParallelism(p)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := next.Add(7)
				for pb.Next() {
					i++
					if d, err := s.Check(ctx, reqs[i%benchKeys]); err != nil || !d.Allowed {
						b.Errorf("Check: %+v, %v", d, err)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
		})
		b.Run("system+topkeys/p="+strconv.Itoa(p), func(b *testing.B) {
			without, with := startSystem(b, Config{}), startSystem(b, Config{TopKeys: true})
			b.ReportAllocs()
			x, rate, base := pairedChecks(b, without, with, reqs, p*runtime.GOMAXPROCS(0))
			b.ReportMetric(rate, "checks/s")
			b.ReportMetric(base, "without-checks/s")
			b.ReportMetric(x, "x-system")
		})
	}
}

// BenchmarkShardWait measures how a caller that may wait (a context that
// is never done) takes a busy shard: looking again spinTries times before
// sync.Mutex.Lock, against going to Lock at once (Config.waitUnspun), in
// alternating rounds at 1k keys. x-spin is the first's checks/s ÷ the
// second's.
func BenchmarkShardWait(b *testing.B) {
	reqs := benchRequests()
	for _, p := range []int{1, 64} {
		b.Run("p="+strconv.Itoa(p), func(b *testing.B) {
			unspun, spun := startSystem(b, Config{waitUnspun: true}), startSystem(b, Config{})
			b.ReportAllocs()
			x, rate, base := pairedChecks(b, unspun, spun, reqs, p*runtime.GOMAXPROCS(0))
			b.ReportMetric(rate, "checks/s")
			b.ReportMetric(base, "unspun-checks/s")
			b.ReportMetric(x, "x-spin")
		})
	}
}

// pairedRound is how many checks each system takes in one round of
// pairedChecks: a few milliseconds, shorter than most swings of a shared
// machine's speed.
const pairedRound = 1 << 14

// pairedChecks checks reqs (b.N checks each) on a and b in alternating
// rounds of pairedRound checks from g goroutines, a first in even rounds
// and b first in odd ones, so that both run on the same machine at the
// same moments; the timer starts after a first, untimed round of each.
// It returns the median over the rounds of b's checks/s ÷
// a's in the same round, and b's and a's checks/s over all of them.
func pairedChecks(tb *testing.B, a, b *System, reqs []table.Request, g int) (x, rateB, rateA float64) {
	size := pairedRound
	rounds := max(1, tb.N/size) // b.N < size takes one round all the same
	ctx := context.Background()
	var next atomic.Uint64
	var done sync.WaitGroup
	starts := make([]chan *System, g)
	for w := range starts {
		n := size / g
		if w < size%g {
			n++
		}
		starts[w] = make(chan *System, 1)
		go func(start <-chan *System) {
			i := next.Add(7)
			for s := range start {
				for range n {
					i++
					if d, err := s.Check(ctx, reqs[i%benchKeys]); err != nil || !d.Allowed {
						tb.Errorf("Check: %+v, %v", d, err)
						break
					}
				}
				done.Done()
			}
		}(starts[w])
	}
	defer func() {
		for _, c := range starts {
			close(c)
		}
	}()
	phase := func(s *System) time.Duration {
		begin := time.Now()
		done.Add(g)
		for _, c := range starts {
			c <- s
		}
		done.Wait()
		return time.Since(begin)
	}
	phase(a) // each creates its buckets, untimed
	phase(b)
	tb.ResetTimer()
	ratios := make([]float64, 0, rounds)
	var totalA, totalB time.Duration
	for r := range rounds {
		var ta, tbb time.Duration
		if r%2 == 0 {
			ta = phase(a)
			tbb = phase(b)
		} else {
			tbb = phase(b)
			ta = phase(a)
		}
		ratios = append(ratios, ta.Seconds()/tbb.Seconds())
		totalA, totalB = totalA+ta, totalB+tbb
	}
	slices.Sort(ratios)
	n := float64(rounds * size)
	return ratios[len(ratios)/2], n / totalB.Seconds(), n / totalA.Seconds()
}

// The reply paths an owner could answer a check by, measured side by side:
// a protoactor future per check, a reply channel carried in a message per
// check, and the System's inbox, which drains a whole batch per message.

type futureCheck struct{ req table.Request }

type chanCheck struct {
	req   table.Request
	reply chan table.Decision
}

type plainOwner struct{ t *table.Table }

func (o *plainOwner) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *futureCheck:
		c.Respond(o.t.Apply(m.req, time.Now()))
	case *chanCheck:
		m.reply <- o.t.Apply(m.req, time.Now())
	}
}

func BenchmarkReplyPath(b *testing.B) {
	reqs := benchRequests()
	spawn := func(b *testing.B) (*actor.ActorSystem, *actor.PID) {
		as := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(slog.DiscardHandler)
		}))
		pid := as.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &plainOwner{t: table.New(table.Config{})} }))
		b.Cleanup(as.Shutdown)
		return as, pid
	}
	b.Run("future-per-check", func(b *testing.B) {
		as, pid := spawn(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				if _, err := as.Root.RequestFuture(pid, &futureCheck{req: reqs[i%benchKeys]}, time.Second).Result(); err != nil {
					b.Error(err)
				}
			}
		})
	})
	b.Run("channel-per-check", func(b *testing.B) {
		as, pid := spawn(b)
		pool := sync.Pool{New: func() any { return &chanCheck{reply: make(chan table.Decision, 1)} }}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				m := pool.Get().(*chanCheck)
				m.req = reqs[i%benchKeys]
				as.Root.Send(pid, m)
				<-m.reply
				pool.Put(m)
			}
		})
	})
	b.Run("inbox-batch", func(b *testing.B) {
		s := startSystem(b, Config{Shards: 1})
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				if _, err := s.Check(ctx, reqs[i%benchKeys]); err != nil {
					b.Error(err)
				}
			}
		})
	})
}
