// Package table is the bucket table and the limit algorithms of ratelimitd:
// the Erlang ETS ordered_set keyed {BucketNum, Id} of its heritage, reborn
// as lists of buckets per window, in window order, each window with a hash
// index that finds a bucket by id.
//
// # Algorithms
//
//   - fixed_window: at most Limit hits in each epoch-aligned window of
//     length Scale (window number floor(now_ms / scale_ms), the seed's
//     BucketNum).
//   - sliding_window: the weighted two-window counter: the previous
//     window's count times the share of it still inside the rolling window,
//     plus the current window's count, must stay within Limit. The previous
//     window is the (window−1, id) entry of the table; its final count is
//     copied beside the current one when that is created, so a hit costs
//     one lookup.
//   - token_bucket: GCRA, one timestamp per key (the time the bucket is full
//     again): a bucket of Burst tokens (default Limit) refilled at Limit per
//     Scale. In any interval [t1, t2] it admits at most Burst +
//     Limit·(t2−t1)/Scale.
//   - leaky_bucket: the same meter with a bucket of Burst (default 1), used
//     as a pacer: hits are spaced Scale/Limit apart, and a denial's
//     RetryAfter is exactly when the caller's turn comes, so a worker that
//     waits it out sends at a steady rate and loses nothing.
//
// Every algorithm supports a cost (Hits), a peek (Hits == 0), refunds, an
// exact RetryAfter, ResetAfter and Remaining. Comparisons are exact (128-bit
// integer arithmetic for the sliding window; the GCRA emission interval is
// rounded up, so a token bucket never exceeds its rate).
//
// # Layout
//
// A bucket's key is (group, window, id). A group is one limit:
// (namespace, algorithm, scale) for a rule's buckets, whose limit may change
// without resetting them, or (algorithm, scale, limit, burst) for an ad-hoc
// limit; the same id under two different limits never shares a counter.
// Each group lists its windows in order, and each window the buckets in
// it: a list linked through the buckets' cells, and an open-addressing
// hash index (a 32-bit fingerprint of the key and the slot) that finds a
// bucket by id in about one memory access, the key then compared in full.
// A bucket's state is a 56-byte cell in a paged slab, without a pointer:
// count, aux, its stamps in ms after its window's start, its window, the
// links of its window's list and its id, if it is of at most 16 bytes (an
// IPv4 address, most user ids), so that finding a bucket touches its
// index entry and its cell only; a longer id lives in an arena of 64 KiB
// chunks per id length (no string header, no allocation per id; a deleted
// id's room goes to the next id of its length), the cell holding its
// handle. A hit on an existing bucket is one lookup and an in-place
// update, with no allocation; creating a bucket adds a cell, an index
// entry and, for a long id, its room in the arena. A token or leaky bucket lives in the window of its last
// change, whose width is the scale or, if longer, the bucket's refill time.
// Footprint reports the memory by part.
//
// # Expiry
//
// A bucket is expired when it can no longer change a decision: a fixed
// window when it has ended, a sliding window when the next window has ended
// too, a token or leaky bucket when it has refilled (at the latest two
// widths after its window's start). Within a group, windows expire in
// order, so the expired buckets of a group are its oldest windows. An
// ordered index holds one entry per group, keyed by the time its oldest
// window expires; DeleteExpired pops due groups and deletes their expired
// windows' lists, each bucket at the cost of freeing its cell and its id,
// a window's index with its last bucket: a cost proportional to what it
// deletes, and the same per bucket however large the table.
// DeleteExpiredSlice bounds one call by count, by the limits it looks at
// and by the caller's time (asked every SliceCheck deletions), so that a
// sweep holds the table a bounded while. Config.BucketTTL keeps
// buckets longer, never shorter. Config.MaxBuckets bounds the table:
// expired buckets make room first (a check looks at a few limits for one),
// then the policy (deny-new, or evict the bucket closest to expiring)
// applies.
//
// # Durability
//
// With Config.TrackChanges the table remembers what each call changed;
// Changes hands out records holding each changed bucket's state (and
// deletions): the full state the first time a bucket is written, binding a
// reference to it, and then only its new count (and TAT) under that
// reference, a few bytes. ChangesTo writes to a journal whose records may
// carry a tail (a TailLog, journal.Journal's format 3): a bucket the
// journal holds (a repeat hit), alone in its batch or with others, has its
// count appended in a record of its own with a tail, its home, and later
// changes of the bucket are written into the home in place, two slots
// taken in turn with a generation and a check each, so that a process
// killed in the middle of a rewrite leaves the previous state whole; no
// record at all, until the journal moves to a new segment. RestoreTail applies a record with its tail. Every entry
// sets a state rather than adding to one, so a journal replaying them in
// order is idempotent; record.go
// specifies both formats, the one written before references included,
// which Restore reads too. Freeze takes a consistent copy (the windows'
// lists, page-level copy-on-write of the slab, and no reuse of an id's
// room until the thaw) that another goroutine can write out as a snapshot
// while the owner goes on; Restore applies records and never resurrects an
// expired bucket.
//
// # Guarantees
//
//   - Every hit is checked against the limit, the first one included
//     (a limit of 0 denies everything).
//   - A cost that does not fit is denied and consumes nothing; a peek
//     (Hits == 0) never changes or creates anything.
//   - A denial reports the real count and RetryAfter, the exact time until
//     the same request would be admitted.
//   - Begin, Apply calls and Rollback leave the table as it was (Commit
//     keeps the changes): an all-or-nothing batch needs no refunds.
//   - Reserve says where the hits were counted; a Refund that names it
//     (Request.Window) credits that window only, nothing once it is over.
//   - The table never reads a clock: every method takes now, and a now earlier
//     than one already seen is taken as that later time, so a clock stepping
//     back cannot reopen a window that a sweep has deleted.
//
// # Non-guarantees
//
// A Table is not safe for concurrent use; ratelimitd gives each table one
// owner (see package actors). Window times are kept to the millisecond. A
// fixed window admits up to 2·Limit−1 in a span of one window length that
// straddles a boundary, as fixed windows do. A sliding window is an
// approximation: under steady traffic it admits at most Limit in any rolling
// window, but in the first two windows of a burst it may admit one more,
// since it assumes the first window's hits were spread evenly.
package table
