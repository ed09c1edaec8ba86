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
	all := make([]int, len(reqs))
	for i := range all {
		all[i] = i
	}
	var next atomic.Uint64
	from := func(s *System) func(w int) func(n int) bool {
		return func(int) func(n int) bool { return walk(tb, s, reqs, all, int(next.Add(7))) }
	}
	return alternating(tb, g, from(a), from(b))
}

// walk returns a worker's loop for alternating: each call checks the next
// n requests of reqs named by keys (indices, from start on, round and
// round) on s. The position is a local during a call: as a variable of
// the closure, two workers' positions may share a line, and writing them
// at every check would move it between the cores.
func walk(tb testing.TB, s *System, reqs []table.Request, keys []int, start int) func(n int) bool {
	at := start
	return func(n int) bool {
		i := at
		defer func() { at = i }()
		for range n {
			i++
			if !checkOK(tb, s, &reqs[keys[i%len(keys)]]) {
				return false
			}
		}
		return true
	}
}

// checkOK checks req on s and reports whether it was admitted, failing
// tb if not.
func checkOK(tb testing.TB, s *System, req *table.Request) bool {
	d, err := s.Check(context.Background(), *req)
	if err != nil || !d.Allowed {
		tb.Errorf("Check: %+v, %v", d, err)
		return false
	}
	return true
}

// alternating runs two workloads, a and b, in alternating rounds of
// pairedRound checks (b.N each) from g goroutines, as pairedChecks
// describes. a(w) and b(w) make worker w's loop: a call checks n times
// and returns false to stop (a failure already reported).
func alternating(tb *testing.B, g int, a, b func(w int) func(n int) bool) (x, rateB, rateA float64) {
	size := pairedRound
	rounds := max(1, tb.N/size) // b.N < size takes one round all the same
	var done sync.WaitGroup
	starts := make([]chan bool, g) // true: a round of b
	for w := range starts {
		n := size / g
		if w < size%g {
			n++
		}
		starts[w] = make(chan bool, 1)
		go func(start <-chan bool, runA, runB func(n int) bool) {
			failed := false
			for isB := range start {
				if !failed {
					run := runA
					if isB {
						run = runB
					}
					failed = !run(n)
				}
				done.Done()
			}
		}(starts[w], a(w), b(w))
	}
	defer func() {
		for _, c := range starts {
			close(c)
		}
	}()
	phase := func(isB bool) time.Duration {
		begin := time.Now()
		done.Add(g)
		for _, c := range starts {
			c <- isB
		}
		done.Wait()
		return time.Since(begin)
	}
	phase(false) // each creates its buckets, untimed
	phase(true)
	tb.ResetTimer()
	ratios := make([]float64, 0, rounds)
	var totalA, totalB time.Duration
	for r := range rounds {
		var ta, tbb time.Duration
		if r%2 == 0 {
			ta = phase(false)
			tbb = phase(true)
		} else {
			tbb = phase(true)
			ta = phase(false)
		}
		ratios = append(ratios, ta.Seconds()/tbb.Seconds())
		totalA, totalB = totalA+ta, totalB+tbb
	}
	slices.Sort(ratios)
	n := float64(rounds * size)
	return ratios[len(ratios)/2], n / totalB.Seconds(), n / totalA.Seconds()
}

// BenchmarkShardSharing measures what it costs that every core checks ids
// of every shard: GOMAXPROCS goroutines check the 1k keys, in alternating
// rounds, either each only the keys of its own shards (shard index mod
// GOMAXPROCS) or all of them. x-own is the shared rounds' checks/s ÷ the
// own rounds' (1 with one proc). Below 1, a check pays for the lines of
// its shard that the other core wrote last: its lock's and its bucket's
// cell's (measured by taking the cell's write out: about a fifth of the
// gap), and with a journal (sync=interval, in a temporary directory) the
// journal's and the change list's. The shared rounds are sharing's worst
// case, as in BenchmarkCheck: both goroutines walk all keys in one order,
// so the other core wrote last nearly every line a check takes (with keys
// drawn at random, about half of them).
func BenchmarkShardSharing(b *testing.B) {
	reqs := benchRequests()
	for _, mode := range []string{"memory", "interval"} {
		b.Run("sync="+mode, func(b *testing.B) {
			s, _ := benchSystem(b, mode)
			g := runtime.GOMAXPROCS(0)
			own := make([][]int, g)
			all := make([]int, len(reqs))
			for i := range reqs {
				w := s.shardIndexOf(reqs[i].ID) % g
				own[w] = append(own[w], i)
				all[i] = i
			}
			for w := range own {
				if len(own[w]) == 0 {
					b.Skipf("no key of proc %d's shards among %d keys over %d shards", w, len(reqs), len(s.shards))
				}
			}
			from := func(keys func(w int) []int) func(w int) func(n int) bool {
				return func(w int) func(n int) bool { return walk(b, s, reqs, keys(w), w*7) }
			}
			b.ReportAllocs()
			x, shared, owned := alternating(b, g,
				from(func(w int) []int { return own[w] }),
				from(func(int) []int { return all }))
			b.ReportMetric(shared, "checks/s")
			b.ReportMetric(owned, "own-checks/s")
			b.ReportMetric(x, "x-own")
		})
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
