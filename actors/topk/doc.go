// Package topk finds the heaviest ids — by hits and by denials, over the
// last minute and the last 15 minutes — in memory fixed whatever the number
// of ids, cheaply enough to sit on the check path of a shard.
//
//	sk, _ := topk.New(topk.Config{})            // one per shard
//	sk.Observe(id, ruleName, hits, denied, now) // under the shard's lock
//
//	v := topk.View{Metric: topk.Denials, Window: topk.Minute, Partitioned: true}
//	v.Merge(sk, now) // each shard's, under its lock
//	top := v.Top(20)
//
// # Algorithm
//
// Each interval of time has one Space-Saving summary (Metwally, Agrawal and
// El Abbadi, "Efficient computation of frequent and top-k elements in data
// streams", 2005) per metric: Capacity counters, each holding a key — an id
// and the label it was observed with (its rule or policy) — its count and
// its error. A tracked key adds its hits to its counter; a new key takes
// over the counter with the smallest count m, becoming m+hits with error m.
// So a summary's counts add up to its total N, each count overestimates its
// key by at most its error, and a key left out weighs at most m ≤ N/Capacity.
// Hits are weights: one Observe of 5 hits counts 5.
//
// With Config.Front a Sketch also has a front: a small set-associative
// cache (sets of four) of the keys observed last, each with the weight
// observed since it came in. An Observe of a key in the front adds to it
// there; a new key takes the place of its set's lightest, which takes its
// weight into the summaries as one weighted Observe; and the whole front
// goes into the summaries before the interval changes and before a View
// merges the Sketch. The summaries see the same weights, in another
// order, so the guarantees below hold as they are; repeated ids cost a
// probe of one set (a 64-byte line: the keys' tags and weights) instead
// of an update of one or two summaries. In the front a key is known by
// its tag, a seeded 64-bit hash of the id mixed with its label, not by
// its id: two keys share one with probability 2^-64, by no choice of ids,
// and their weights would then be counted as the first one's.
//
// # Windows
//
// One ring of 45 epoch-aligned intervals of 20 seconds, each with a summary
// per metric. Minute reads the current interval and the two before it
// (between 40 and 60 seconds of the past), FifteenMinutes all 45 (between
// 14m40s and 15m). An interval's slot is emptied when the ring comes round
// to it, so what is older than a window is gone from it, all at once: no
// decay, no estimate of a partial interval. One ring, rather than one per
// window, so that Observe writes one summary per metric. Time is a
// parameter: no clock is read.
//
// # Merging
//
// A View merges the summaries a window covers — of one Sketch, or of every
// shard's — on read, without losing the bound: a key's Count is the sum,
// over the merged summaries, of its counter or, where it has none, of that
// summary's smallest count. In each summary a key's counter is at most its
// error above its weight there, an error is at most that summary's smallest
// count, and a key without a counter weighs at most that count: so
// Count − (true weight) ≤ Bound, the sum of the summaries' smallest counts,
// ≤ Total/Capacity. The merged candidates are not cut back to Capacity, which
// would loosen the bound. When ids are
// hashed to shards (View.Partitioned), a key's Count takes only its own
// shard's smallest counts, and Bound is the largest shard's sum. Min, the
// sum of count − error, is a lower bound on the key's weight.
//
// # Guarantees
//
//   - Every key whose weight in the window exceeds Bound (hence every key
//     above Total/Capacity) is a candidate (Top(-1)); every Count is at
//     least the key's weight and at most Bound above it; every Min at most.
//   - Memory is fixed at New: Bytes reports it, 356,984 bytes per Sketch
//     at the default Capacity 32 without a front; in general 10,664 +
//     90·(104·K + 8·I + 8·⌈K/64⌉) + 112·F bytes for Capacity K, I the
//     index size (the power of two at least 2·K) and F the front's size
//     (Config.Front rounded up to a power of two, or 0). An id is copied
//     into its counter and its front entry (at most IDBytes bytes: a
//     longer id keeps its first bytes and a digest of the whole, and is
//     reported Truncated); labels are kept by reference.
//   - Observe never allocates and reads no clock. A tracked key costs one
//     hash of the id (none with ObserveHashed, for a caller that has it),
//     a check of the current interval, and per summary (one, two for a
//     denial) a probe of a small index and an addition; a new key also
//     takes the counter marked smallest, re-marking them by a scan of
//     Capacity counts when none is left, and moves a few index slots.
//     With a front, a key in it costs the hashes, the interval's check
//     and a look at one line (ObserveFront: the tag only, for the label
//     observed last); one new to it, also the lightest key's move
//     to the summaries, as above; a change of interval, or a Merge, the
//     move of the whole front.
//
// # Sampling
//
// A caller whose checks come too fast to observe each one cheaply enough
// puts a Sampler in front of its Sketch: below a rate of its choosing it
// observes every check; above, one admitted check in Rate at random,
// Rate times, and still every denied one. The guarantees above then hold
// for the sampled weights, which estimate the true ones without bias,
// within the standard deviation Sampler documents; the ranking by denials
// keeps them for the true weights.
//
// # Non-guarantees
//
// A Sketch is not safe for concurrent use, and has no lock: its owner (a
// shard, under the lock that already serializes the shard's table) calls
// it. Counts saturate at 2^64−1. The ranking of keys whose Counts differ by
// less than Bound may differ from their true order. State is in memory
// only: a restart starts empty.
package topk
