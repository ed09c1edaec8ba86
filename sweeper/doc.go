// Package sweeper is the actor that deletes expired buckets, and its policy.
//
// Every Interval the sweeper starts a round: it sends each shard owner a
// Sweep (the round's time and a bound, Batch) and the owner answers with a
// Swept saying how many buckets it deleted and whether more may be left. The
// sweeper asks again while an owner reports more, so a large expiry is
// deleted in bounded slices with the owner's queued checks served between
// them: a sweep never stalls checks for long. Deletion itself costs what
// expires, not the size of the table (see package table).
//
// # Guarantees
//
//   - Only expired buckets are deleted: the owner's table decides what has
//     expired at the round's time, and a table never lets its clock go back.
//   - A round is reported to the Observer (buckets deleted, Sweep messages,
//     duration). A round still running at the next tick is reported
//     incomplete and replaced, so an owner that restarted and lost a Sweep
//     cannot stop the sweeping.
//
// Time comes from a clock.Clock (package actors/clock).
package sweeper
