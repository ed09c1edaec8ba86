// Package sweeper is the policy of sweeping expired buckets: when a round
// starts, what it asks of each target (a shard), when it is over, and what
// it reports. It reads no clock and starts no goroutine: like package
// table, it takes now; the sweeping loop of package actors drives it.
//
// At every tick the Policy starts a round: a Sweep of every target (the
// round's time and a bound, Batch), each answered with a Swept saying how
// many buckets it deleted and whether more may be left. The Policy asks
// again while a target reports more, so a large expiry is deleted in
// bounded batches. Whoever carries a Sweep out does it in shorter slices
// and paces them (package actors: slices of at most 512 buckets or 25µs,
// the checks queued meanwhile served between them, pauses of three times
// the slices' holds), so a sweep never stalls checks for long. Deletion
// itself costs what expires, not the size of the table (see package table).
//
// # Guarantees
//
//   - Every Sweep of a round deletes at the round's time, so only buckets
//     expired then are deleted: the target's table decides what has
//     expired, and a table never lets its clock go back.
//   - Every round is reported (buckets deleted, Sweeps, duration). A round
//     still running at the next tick is reported incomplete and replaced,
//     so a target that never answers cannot stop the sweeping; what a late
//     answer deleted goes in the next Report.
package sweeper
