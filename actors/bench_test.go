package actors

import (
	"context"
	"log/slog"
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
// against the map+mutex floor, in one run, without and with top-keys
// tracking (system+topkeys: Config.TopKeys; 1k keys over the default
// shards are more than each shard's summaries hold, most of them within
// its front). p=1 runs GOMAXPROCS goroutines;
// p=64 runs 64 per proc, as a loaded HTTP server would.
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
		for _, sys := range []struct {
			name string
			cfg  Config
		}{{"system", Config{}}, {"system+topkeys", Config{TopKeys: true}}} {
			b.Run(sys.name+"/p="+strconv.Itoa(p), func(b *testing.B) {
				s := startSystem(b, sys.cfg)
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
		}
	}
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
