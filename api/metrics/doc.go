// Package metrics holds the Prometheus series of ratelimitd (see Metrics
// for the list) in a registry of its own, and serves them: it is the only
// package of the module that imports the Prometheus client. A transport
// records into it through api.Recorder; the daemon feeds it the limiter's
// counters (Observe), sweep rounds (SweepDone), rule reloads and listener
// connection counts.
//
// Guarantees: every Metrics has its own registry, never the global one;
// recording is safe for concurrent use and costs no label lookup.
// Non-guarantees: the counters read at a scrape are a snapshot, not taken
// atomically together.
package metrics
