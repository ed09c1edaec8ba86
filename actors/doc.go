// Package actors is the rate limiter you embed: shards, each a bucket table
// served by one goroutine at a time (a caller, or the shard's owner actor,
// github.com/asynkron/protoactor-go), behind a synchronous facade.
//
//	sys, err := actors.Start(ctx, actors.Config{})
//	d, err := sys.Check(ctx, table.Request{ID: "alice", Policy: table.Policy{Scale: time.Minute, Limit: 100}, Hits: 1})
//	err = sys.Stop(ctx)
//
// With a limit known in advance, a Limiter of it (System.Limiter) checks
// by id alone, in the same buckets, and costs a caller less (see Limiter).
//
// # How a check flows
//
// Check validates the request and hashes the id (FNV-1a, stable across
// processes) to one of Config.Shards shards. Whoever holds a shard's lock
// serves it: decides a batch of checks on its table with one reading of the
// clock, appends the batch's changes to the shard's journal as one record
// (a bucket whose journal record has a tail, most of them, has its new
// state written into that tail in place instead, and a bucket the journal
// holds without one gets a record of its own with a tail: table.ChangesTo),
// and only then answers. A caller that finds the lock free serves its own
// check, with any checks queued meanwhile, on its own goroutine: no
// hand-off, no allocation, no pooled call and no channel; alone, its check
// is decided at the time the caller read before taking the lock (a table
// treats a time earlier than one it has seen as that later time). A
// caller that finds it taken looks again for a short while; then it waits
// for the lock if its ctx can never end, and else queues its check in the
// shard's inbox and waits for the answer (or its ctx); the first check
// queued into an idle inbox sends the owner actor one mailbox message, and
// the owner takes everything queued at once (at most 4096 checks per
// message, so that its other messages get their turn) and takes again
// until the inbox stays empty.
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
// in slices it sends to the shard's owner one at a time. A slice holds the
// shard to serve the checks queued before it, delete at most 512 expired
// buckets or for at most 25µs on Config.Clock, and serve the checks queued
// meanwhile; being a message, the next slice queues behind the checks sent
// to the owner in between. Every slice owes a pause of three times its
// hold, which the loop sleeps once the debt reaches a millisecond, so a
// mass expiry takes at most a quarter of one core, spread out in time
// rather than in one burst. Deleting an expired
// bucket later is safe, since it changes no decision; memory stays bounded
// meanwhile because a full shard reclaims an expired bucket before it
// refuses or evicts, looking at no more than a few limits for one per new
// bucket (see package table). System.SweepStats reports the slices and the
// shards still behind.
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
//     again; the other shards are not touched. The hits the batch counted
//     before the panic on buckets whose journal record has a tail may stay
//     counted in the rebuilt table (such a change is written into the tail
//     as it is made), as a check's hits may when the process dies before
//     it is answered: a crash never admits more than the limit, it may
//     count a hit that got no answer. Stats.Restarts counts each
//     crash. A panic in the owner is also the owner's failure: its
//     supervisor restarts it (one for one), and it serves its inbox on.
//   - Stop answers every check queued before it; later checks get ErrStopped.
//
// # Non-guarantees
//
// Without Config.DataDir state is in memory: a restarted process, or a
// shard rebuilt after a crash, starts its buckets afresh. With it, see
// SyncMode for what each sync mode survives.
//
// # Cluster mode
//
// With Config.Cluster, Systems on several machines are one limiter: any
// member answers any check, with the same Check. Ids hash (FNV-1a) to a
// fixed number of virtual shards (ClusterConfig.VShards, kept in etcd);
// each vshard has one owner at a time, recorded in etcd, and only its
// owner decides its checks. Placement is rendezvous hashing over the live
// members, so a join moves about 1/N of the vshards and a leave only the
// leaver's. Each member holds an etcd lease and renews it every third of
// its TTL; an epoch is an etcd revision, and a vshard changes hands only in
// an etcd transaction that compares its epoch and the members' leases.
//
// A check for a vshard owned elsewhere is queued for its owner and sent
// with everything queued for that member in one batch, on one long-lived
// gRPC stream per member (the member transport), which carries each check's vshard and the epoch it was
// routed at. A member opens that stream in the background as soon as it
// sees the member, and again when one breaks, so a check does not wait for
// a connection. The owner decides it only if, holding the shard's lock, it
// serves the vshard at that epoch or a later one and its lease has not
// lapsed by its own monotonic clock (it stops a tenth of the TTL, at least
// 100ms, before etcd could expire it); otherwise the check is answered
// "moved", not counted, and routed again once the sender's view changes.
// A batch that could not be sent is tried again, on a new stream, within
// ClusterConfig.ForwardTimeout; one that was sent is never sent again, so
// a check is never decided twice: if its answer does not come within
// ForwardTimeout (or its stream breaks first), its checks are answered
// ErrClusterUnavailable, and may or may not have been counted. A batch
// has an id, and its receiver answers a batch it has seen with the reply
// it kept.
//
// When the members change, a vshard moves with its buckets: its owner
// fences it, freezes its shard's table (copy-on-write), ships its buckets
// in the table's record format, the new owner restores and journals them,
// and one etcd transaction makes the new owner current. The vshard is
// paused for that time, its other vshards are not. Stop hands every vshard
// off before it stops.
//
// Guarantees in cluster mode:
//
//   - Exact across members: at any moment at most one member decides a
//     vshard's checks, so for one bucket no more than its limit is
//     admitted per window, through joins, graceful leaves and pauses.
//   - CheckAll whose requests have one owner is that owner's
//     all-or-nothing unit, as on one node. Across owners, every owner
//     decides its part all or nothing; if any part is denied, the admitted
//     parts are refunded, each hit in the window it was counted in
//     (nothing once that window is over), so a denied CheckAll counts
//     nothing that is still open; between the two, a concurrent check of
//     those buckets may see the hits and be denied (never admitted
//     because of them).
//   - A member that restarts with its id and data directory before its
//     lease expired resumes its vshards from its journal, losing nothing.
//
// Non-guarantees in cluster mode:
//
//   - A crashed member's vshards are taken over, after its lease expires,
//     by the member placement puts them on, from nothing: a bucket whose
//     window was open at the crash may admit up to one more limit.
//   - With etcd unreachable, a member serves the vshards it holds until
//     its lease deadline, then answers ErrClusterUnavailable (or, with
//     OnError FailOpen, admits uncounted) until etcd answers again.
//   - A check whose batch got no answer within ForwardTimeout may or may
//     not have been counted; it is answered ErrClusterUnavailable.
//   - Without ClusterConfig.TLS the member transport has no encryption
//     and no authentication: keep ClusterConfig.Listen on a private
//     network, or set TLS (mutual TLS 1.3 between the members) and
//     EtcdTLS (TLS to etcd).
//   - A hot id's checks are all decided by its owner: its global
//     throughput is one member's.
package actors
