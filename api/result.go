package api

import "time"

// Result is what a transport answered a check request with, as its
// metrics count it. A batch is one check request.
type Result uint8

// The results of a check request.
const (
	ResultAllowed      Result = iota
	ResultDenied              // denied by a limit
	ResultInvalid             // bad input (400)
	ResultError               // the Checker failed (503)
	ResultFull                // refused for want of a bucket (Decision.Full; 503)
	ResultShadowDenied        // denied by a shadow rule, and let through
)

// Recorder records what a transport answered; *metrics.Metrics is one. Its
// methods must be safe for concurrent use and must not block.
type Recorder interface {
	// Checked records one check request answered with res, begun at start.
	Checked(res Result, start time.Time)
	// Refunded records one refund answered.
	Refunded()
}

// RuleRecorder is what a Recorder may also be, to count the checks of each
// named rule: a transport whose Recorder is one also tells it, for every
// check of a rule it decided, the rule's name and what that check came to
// (ResultAllowed, ResultDenied, ResultShadowDenied or ResultFull). Its
// methods must be safe for concurrent use and must not block.
type RuleRecorder interface {
	CheckedRule(rule string, res Result)
}
