package rls

import "time"

// Observer receives the measurements of a Service: the wiring implements
// it with Prometheus. Its methods are called on the request's goroutine;
// they must be safe for concurrent use and must not block.
type Observer interface {
	// ObserveCall is told about every ShouldRateLimit call (gRPC or JSON)
	// once it is answered.
	ObserveCall(CallEvent)
	// ObserveLimit is told about every limited descriptor of an answered
	// call (not the unmatched, unlimited or replaced ones, not refunds).
	ObserveLimit(LimitEvent)
}

// Transports of a CallEvent.
const (
	TransportGRPC = "grpc"
	TransportJSON = "json"
)

// Outcomes of a CallEvent.
const (
	OutcomeOK        = "ok"         // answered, overall OK
	OutcomeOverLimit = "over_limit" // answered, overall OVER_LIMIT
	OutcomeInvalid   = "invalid"    // refused: InvalidArgument / 400
	OutcomeError     = "error"      // failed: no config, the Checker failed, ctx ended
)

// CallEvent describes one call.
type CallEvent struct {
	// Domain is the request's domain when the config has it, else "" (so
	// that clients cannot grow the label set).
	Domain    string
	Transport string        // TransportGRPC or TransportJSON
	Outcome   string        // one of the Outcome constants
	Latency   time.Duration // from the decoded request to the answer
	// GlobalShadow reports an OVER_LIMIT answer turned OK by Options.ShadowMode.
	GlobalShadow bool
}

// LimitEvent describes one limited descriptor of one call, counted in hits
// as the reference's per-descriptor stats are.
type LimitEvent struct {
	Domain string // the configured domain
	// Key is the descriptor's metrics key, relative to the domain: its
	// entries as matched in the config, "key" or "key_value" joined by ".",
	// e.g. "remote_address" or "path_/api/*.method" — a runtime value only
	// where the config asks (detailed_metric, value_to_metric), never for an
	// override (whose key lists the entries' keys alone); OtherMetricKey past
	// Options.MaxMetricKeys.
	Key         string
	Hits        uint64 // the hits of the request (total_hits)
	WithinLimit uint64 // of those, admitted (within_limit)
	NearLimit   uint64 // of those, past NearLimitRatio of the limit and within it (near_limit)
	OverLimit   uint64 // of those, past the limit (over_limit)
	ShadowMode  uint64 // of the over-limit hits, those a shadow_mode limit let through (shadow_mode)
}
