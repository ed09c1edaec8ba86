// Package actors is the rate limiter you embed: shard-owner actors
// (github.com/asynkron/protoactor-go), each the single writer of its own
// bucket table, behind a synchronous facade.
//
//	sys, err := actors.Start(ctx, actors.Config{})
//	d, err := sys.Check(ctx, table.Request{ID: "alice", Scale: time.Minute, Limit: 100, Hits: 1})
//	err = sys.Stop(ctx)
//
// # How a check flows
//
// Check validates the request, hashes the id (FNV-1a, stable across
// processes) to one of Config.Shards shards, and queues the check in that
// shard's inbox. The first check queued into an idle inbox sends the owner
// one mailbox message; the owner then takes everything queued at once,
// applies it to its table with one reading of the clock, answers each
// caller through a channel the caller waits on, and takes again until the
// inbox stays empty (at most 4096 checks per message, so sweeps get their
// turn). There is no future and no allocation per check, and under load one
// mailbox message carries many batches. Each owner's mailbox runs on a
// goroutine of its own.
//
// A sweeper actor asks every owner, every Config.SweepInterval, to delete
// the buckets that expired, at most Config.SweepBatch per message, so checks
// queued meanwhile are served between batches.
//
// # Guarantees
//
//   - Exact: one owner decides each bucket, serially; for one bucket no more
//     than its limit is admitted per window, whatever the concurrency.
//   - A check whose ctx ends before its owner takes it is not counted and
//     returns ctx.Err(); once taken, its decision is always returned.
//   - One-for-one supervision: an owner that panics answers the checks of
//     its batch with ErrUnavailable and is restarted; the other shards are
//     not touched and the restarted owner serves its inbox on.
//   - Stop answers every check queued before it; later checks get ErrStopped.
//
// # Non-guarantees
//
// State is in memory: a restarted owner, or a restarted process, starts its
// buckets afresh. Durable counters come with the journal (package
// table/journal, not yet built).
package actors
