// Package actors is the rate limiter you embed: shards, each a bucket table
// served by one goroutine at a time (a caller, or the shard's owner actor,
// github.com/asynkron/protoactor-go), behind a synchronous facade.
//
//	sys, err := actors.Start(ctx, actors.Config{})
//	d, err := sys.Check(ctx, table.Request{ID: "alice", Policy: table.Policy{Scale: time.Minute, Limit: 100}, Hits: 1})
//	err = sys.Stop(ctx)
//
// # How a check flows
//
// Check validates the request and hashes the id (FNV-1a, stable across
// processes) to one of Config.Shards shards. Whoever holds a shard's lock
// serves it: decides a batch of checks on its table with one reading of the
// clock, appends the batch's changes to the shard's journal as one record,
// and only then answers. A caller that finds the lock free serves its own
// check, with any checks queued meanwhile, on its own goroutine: no
// hand-off and no allocation. A caller that finds it taken queues its check
// in the shard's inbox and waits; the first check queued into an idle inbox
// sends the owner actor one mailbox message, and the owner takes everything
// queued at once (at most 4096 checks per message, so that its other
// messages get their turn) and takes again until the inbox stays empty.
// Under load one mailbox message carries many checks, and one journal
// record many changes. With SyncAlways the owner serves every check, so
// that each batch is one group commit. Each owner's mailbox runs on a
// goroutine of its own; the owner is the shard's address for messages.
//
// CheckAll holds every shard of its checks at once, taken in ascending
// order, decides them all with one reading of the clock, and keeps the
// changes only if every check is admitted; otherwise the shards' tables
// roll them back before anyone else can see them.
//
// CheckEach decides independent checks in one pass: it sorts them by
// shard and serves each shard's run as one batch of that shard (on the
// caller's goroutine when the shard is free, else queued for its owner in
// one push), one shard at a time, so that a pipeline of checks costs one
// journal record per shard, not one per check; a failing shard fails its
// own run only.
//
// A sweeping loop, one goroutine, runs a round every Config.SweepInterval
// (the policy is package sweeper's): each shard deletes the buckets that
// expired, at most Config.SweepBatch per turn, round-robin over the shards,
// holding the shard for 1,000 deletions at a time and serving the checks
// queued meanwhile before it lets go.
//
// # Guarantees
//
//   - Exact: one goroutine at a time serves a shard, so each bucket is
//     decided serially; for one bucket no more than its limit is admitted
//     per window, whatever the concurrency.
//   - A check whose ctx ends before its batch takes it is not counted and
//     returns ctx.Err(); once taken, its decision is always returned.
//   - A panic while a shard is served (a batch, by a caller, CheckAll or the
//     owner; a slice of a sweep) answers the batch's checks with
//     ErrUnavailable, and whoever held the shard rebuilds its table from
//     the journal (or empty, without one) before anyone serves the shard
//     again; the other shards are not touched. Stats.Restarts counts each
//     crash. A panic in the owner is also the owner's failure: its
//     supervisor restarts it (one for one), and it serves its inbox on.
//   - Stop answers every check queued before it; later checks get ErrStopped.
//
// # Non-guarantees
//
// Without Config.DataDir state is in memory: a restarted process, or a
// shard rebuilt after a crash, starts its buckets afresh. With it, see
// SyncMode for what each sync mode survives.
package actors
