package gobench

import "time"

// Family titles of the plan, for looking rows up.
const (
	FamApply           = "BenchmarkApply"
	FamApplyAlgorithms = "BenchmarkApplyAlgorithms"
	FamDeleteExpired   = "BenchmarkDeleteExpired"
	FamCheck           = "BenchmarkCheck"
	FamCheckJournal    = "BenchmarkCheckJournal"
	FamLimiter         = "BenchmarkLimiter"
	FamShardSharing    = "BenchmarkShardSharing"
	FamBatchJournal    = "BenchmarkBatchJournal"
	FamRecovery        = "BenchmarkRecovery"
	FamJournalGrowth   = "BenchmarkJournalGrowth"
	FamMiddleware      = "BenchmarkMiddlewareOverhead"
	FamProxy           = "BenchmarkProxy"
	FamMatch           = "BenchmarkMatch*"
	FamKey             = "BenchmarkKey"
	FamClientIP        = "BenchmarkClientIP"
	FamRLS             = "BenchmarkShouldRateLimit"
)

// Plan returns the invocations of the comparison's in-package section, in
// the order they run: the full mode's settings, or, with short, a smoke
// test (-short, a few iterations) that only shows the runs and the parsing
// work. The settings keep the full mode's in-package section to about 10
// minutes of wall time on 2 cores (bench/README.md has the measured times).
func Plan(short bool) []Invocation {
	type mode struct {
		benchtime string
		count     int
	}
	// pick returns the full mode's settings, or the short mode's.
	pick := func(full, smoke mode) mode {
		if short {
			return smoke
		}
		return full
	}
	inv := func(pkg, bench string, m mode, timeout time.Duration, fams ...Family) Invocation {
		return Invocation{Pkg: pkg, Bench: bench, Benchtime: m.benchtime, Count: m.count, Short: short, Timeout: timeout, Families: fams}
	}
	growth := inv("./actors/", "^BenchmarkJournalGrowth$", pick(mode{"1x", 1}, mode{"1x", 1}), 5*time.Minute, Family{
		Title: FamJournalGrowth, Top: []string{"BenchmarkJournalGrowth"},
		What: "A steady 10k checks/s on 100k keys for 10 s (1 s in short mode) with the default journal: journal bytes per check, the growth per hour until compaction bounds it, and the data directory's size.",
	})
	if short {
		growth.Env = []string{"RATELIMITD_GROWTH_SECONDS=1"}
	}
	return []Invocation{
		inv("./table/", "^BenchmarkApply$", pick(mode{"1s", 3}, mode{"100x", 1}), 10*time.Minute, Family{
			Title: FamApply, Top: []string{"BenchmarkApply"}, Primary: "ns/op",
			Baseline: Baseline{Level: 2, Value: "baseline=map+mutex"},
			What:     "`table.Table.Apply` (one fixed-window check on a bare table, no actors) against a fixed-window counter in a map behind a mutex, at 1k and 1M keys hit in a seeded random order; `table+changes` also tracks changes, as a journaled shard owner does.",
		}),
		// One run: it is not in README.md, and each of its 1M-key runs
		// fills a table of 1M buckets again for every b.N it tries.
		inv("./table/", "^BenchmarkApplyAlgorithms$", pick(mode{"1s", 1}, mode{"100x", 1}), 10*time.Minute, Family{
			Title: FamApplyAlgorithms, Top: []string{"BenchmarkApplyAlgorithms"}, Primary: "ns/op",
			Baseline: Baseline{Level: 2, Value: "fixed_window"},
			What:     "`table.Table.Apply` with each algorithm against `fixed_window`, every hit allowed, the clock moving 1 µs per check.",
		}),
		inv("./table/", "^BenchmarkDeleteExpired$", pick(mode{"200x", 3}, mode{"10x", 1}), 10*time.Minute, Family{
			Title: FamDeleteExpired, Top: []string{"BenchmarkDeleteExpired"}, Primary: "ns/deleted",
			Baseline: Baseline{Level: 1, Value: "live=10000"},
			What:     "`table.Table.DeleteExpired` of 10k expired buckets beside 10k or 1M live ones, the heap collected before each sweep: the cost per deleted bucket, and its ratio to the one beside 10k live buckets.",
		}),
		inv("./actors/", "^Benchmark(Check|CheckJournal|Limiter)$", pick(mode{"1s", 3}, mode{"100x", 1}), 10*time.Minute,
			Family{
				Title: FamCheck, Top: []string{"BenchmarkCheck"}, Primary: "checks/s",
				Baseline: Baseline{Level: 1, Value: "floor=map+mutex"},
				What:     "`actors.System.Check` at 1k keys against one map of counters behind one mutex (the floor), from GOMAXPROCS goroutines (`p=1`) or 64 per proc (`p=64`); `system+topkeys` is the same with top-keys tracking (`Config.TopKeys` at its defaults: at these rates, millions of checks a second per shard, each shard samples its admitted checks, one in 32), run in alternating rounds with a System without it: its cost is its `x-system`, the median of the rounds' ratios of its checks/s to the other's (`without-checks/s`).",
			},
			Family{
				Title: FamCheckJournal, Top: []string{"BenchmarkCheckJournal"}, Primary: "checks/s",
				Baseline: Baseline{Level: 1, Value: "sync=memory"},
				What:     "`actors.System.Check` at 1k keys, 64 goroutines per proc, each check timed, without a journal (`sync=memory`) and with each `JournalSync` mode; the benchmark's own `x-memory` is its last run's ratio.",
			},
			Family{
				Title: FamLimiter, Top: []string{"BenchmarkLimiter"}, Primary: "checks/s",
				What: "`actors.Limiter.Allow` (a policy made once, a check by id) against `System.Check` with a request literal written for each call, on one System at 1k keys, in alternating rounds of 16,384 checks from GOMAXPROCS goroutines (`p=1`) or 64 per proc (`p=64`): `x-check` is the median over the rounds of the Limiter's checks/s ÷ Check's (`check-checks/s`).",
			}),
		inv("./actors/", "^BenchmarkShardSharing$", pick(mode{"1s", 3}, mode{"100x", 1}), 10*time.Minute, Family{
			Title: FamShardSharing, Top: []string{"BenchmarkShardSharing"}, Primary: "checks/s",
			What: "`actors.System.Check` at 1k keys from GOMAXPROCS goroutines, without a journal and with the default one, in alternating rounds of 16,384 checks: each goroutine checking only the keys of its own shards (`own-checks/s`), or all of them (`checks/s`, in one order from nearby points: the worst case, where the other core wrote last nearly every line a check takes); `x-own` is the median over the rounds of the second's checks/s ÷ the first's, what a check pays for the lines of its shard that another core wrote last.",
		}),
		inv("./actors/", "^BenchmarkBatchJournal$", pick(mode{"1s", 3}, mode{"100x", 1}), 10*time.Minute, Family{
			Title: FamBatchJournal, Top: []string{"BenchmarkBatchJournal"}, Primary: "checks/s",
			What: "`actors.System.CheckEach` of batches of 10 requests (an HTTP batch's, a pipeline's) over 1k keys, 64 goroutines per proc, journaling with `sync=interval`: checks/s and the journal bytes written per check, every key hit again and again (a bucket the journal holds gets a record with a tail in a batch as when checked alone, and its later hits rewrite that tail).",
		}),
		inv("./actors/", "^BenchmarkRecovery$", pick(mode{"1x", 3}, mode{"1x", 1}), 10*time.Minute, Family{
			Title: FamRecovery, Top: []string{"BenchmarkRecovery"}, Primary: "buckets/s",
			What: "`actors.Start` on a data directory of 1M live buckets (100k in short mode) in 8 shards, a snapshot of 90% and segments of the rest, replayed in parallel; time/op is one start.",
		}),
		growth,
		inv("./api/middleware/", "^BenchmarkMiddlewareOverhead$", pick(mode{"1s", 3}, mode{"100x", 1}), 10*time.Minute, Family{
			Title: FamMiddleware, Top: []string{"BenchmarkMiddlewareOverhead"}, Primary: "ns/op",
			Baseline: Baseline{Level: 1, Value: "bare"}, Overhead: true,
			What: "A bare handler, and the same handler behind `middleware.New` (a real System, 1k keys), called in process one request at a time and with 64 in flight per proc (`/parallel`): the difference is the middleware's cost per request.",
		}),
		inv("./api/proxy/", "^BenchmarkProxy$", pick(mode{"1x", 3}, mode{"1x", 1}), 10*time.Minute, Family{
			Title: FamProxy, Top: []string{"BenchmarkProxy"}, Primary: "ratelimitd-req/s",
			What: "The limiting reverse proxy (per-client and global layers, metrics) against `httputil.ReverseProxy` alone, to the same trivial upstream over 64 connections, in alternating rounds within one run (2 s; 0.2 s in short mode); the benchmark reports the ratio itself.",
		}),
		inv("./api/rules/", "^BenchmarkMatch", pick(mode{"1s", 3}, mode{"100x", 1}), 10*time.Minute, Family{
			Title: FamMatch, Top: []string{"BenchmarkMatchCached", "BenchmarkMatchUncached", "BenchmarkMatchMiss"}, Primary: "ns/op",
			Baseline: Baseline{Name: "BenchmarkMatchUncached"},
			What:     "Matching a request against 1,000 URL rules: through the store's cache (serially and in parallel), the rule set's uncached longest-prefix match (the baseline), and distinct paths that each miss the cache.",
		}),
		inv("./api/rls/", "^BenchmarkShouldRateLimit$", pick(mode{"1s", 3}, mode{"100x", 1}), 10*time.Minute, Family{
			Title: FamRLS, Top: []string{"BenchmarkShouldRateLimit"}, Primary: "ns/op",
			Baseline: Baseline{Level: 1, Value: "service"},
			What:     "Envoy RLS `ShouldRateLimit`, one descriptor per request over 1,000 values, on an in-memory System: the `rls.Service` called in process (`service`, the baseline) and through a loopback gRPC server and client (`grpc`), 64 goroutines per proc; allocations per request.",
		}),
		inv("./api/clientip/", "^Benchmark", pick(mode{"500ms", 3}, mode{"100x", 1}), 10*time.Minute,
			Family{
				Title: FamClientIP, Top: []string{"BenchmarkClientIP"},
				What: "`Resolver.ClientIP` for untrusted and trusted peers, with X-Forwarded-For or Forwarded chains.",
			},
			Family{
				Title: FamKey, Top: []string{"BenchmarkKey"},
				What: "`Resolver.Key` (the client IP as a rate-limit key string) for the same requests.",
			}),
	}
}
