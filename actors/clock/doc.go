// Package clock is the time source of a System: every batch of checks reads
// it once, and the sweeping loop arms its timer on it. System is the
// production clock; clocktest.Manual is the one tests move by hand.
//
// # Guarantees
//
//   - System never steps: its readings follow the monotonic clock and
//     approach the wall clock by a slew of at most 1 ms per 20 ms, so a step
//     of the wall clock (logged with WithLogger) neither ends every window
//     at once nor, when it is put right, freezes windows until the wall
//     clock catches up. Its readings never go back and never pause.
//
// # Non-guarantees
//
// While System slews a step away, for 20 times the step, its readings are
// off the wall clock by what is left of it and windows run up to 1/20 fast
// or slow. A new clock (a restarted process) starts on the wall clock; the
// table's guard (it never goes back to a time it has seen, journalled ones
// included) is what holds across restarts.
package clock
