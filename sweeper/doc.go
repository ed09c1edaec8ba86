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
//   - SystemClock never steps: its readings follow the monotonic clock and
//     approach the wall clock by a slew of at most 1 ms per 20 ms, so a step
//     of the wall clock (logged) neither ends every window at once nor, when
//     it is put right, freezes windows until the wall clock catches up.
//
// # Non-guarantees
//
// While SystemClock slews a step away, for 20 times the step, its readings
// are off the wall clock by what is left of it and windows run up to 1/20
// fast or slow. A new clock (a restarted process) starts on the wall clock;
// the table's guard (it never goes back to a time it has seen, journalled
// ones included) is what holds across restarts.
//
// Time comes from a Clock: SystemClock in production, clocktest.Manual in tests.
package sweeper
