// Package table is the bucket table and the limit algorithms of ratelimitd:
// the Erlang ETS ordered_set keyed {BucketNum, Id} of its heritage, reborn as
// a B-tree (github.com/tidwall/btree).
//
// # Layout
//
// A bucket's key is (group, window, hash(id), id). A group is one
// (algorithm, scale, limit) namespace, so the same id under two different
// limits never shares a counter; the window is floor(now_ms / scale_ms), the
// seed's BucketNum. Keys are fixed-size (the id is compared only when two ids
// of a window share a 64-bit hash), and a bucket's counter and its created
// and modified stamps live in a paged slab, so a hit on an existing bucket is
// one tree search and an in-place increment, with no allocation.
//
// # Expiry
//
// A bucket is expired when it can no longer change a decision: for a fixed
// window, when the window has ended. Within a group, windows end in key
// order, so the expired buckets of a group are a prefix of its key range. A
// second ordered index holds one entry per group, keyed by the time its
// oldest window expires; DeleteExpired pops due groups and deletes their
// expired prefix, at a cost proportional to what it deletes, not to the size
// of the table. Config.BucketTTL keeps buckets longer, never shorter.
//
// # Guarantees
//
//   - Every hit is checked against the limit, the first one included
//     (a limit of 0 denies everything).
//   - A cost that does not fit is denied and consumes nothing; a peek
//     (Hits == 0) never changes or creates anything.
//   - A denial reports the real count and RetryAfter, the exact time until
//     the window ends.
//   - The table never reads a clock: every method takes now, and a now earlier
//     than one already seen is taken as that later time, so a clock stepping
//     back cannot reopen a window that a sweep has deleted.
//
// # Non-guarantees
//
// A Table is not safe for concurrent use; ratelimitd gives each table one
// owner (see package actors). Times are kept to the millisecond; a fixed
// window admits up to 2·limit in a span of one window length that straddles
// a boundary, as fixed windows do.
package table
