package resp

import "slices"

// Observer is told what the server does, for metrics. Its methods are
// called from the connections' goroutines, concurrently; they must be
// fast and must not block.
type Observer interface {
	// Command reports one command answered: its name (one of Commands()) and
	// the result of its reply.
	Command(name string, res Result)
	// Batch reports the checks of one pipelined read decided in one pass.
	Batch(checks int)
	// Conn reports a connection event.
	Conn(ev ConnEvent)
}

// Commands returns the names Observer.Command reports: the lower-case
// names of the commands served, and "unknown" for any other.
func Commands() []string { return slices.Clone(cmdNames[:]) }

// cmdNames are the names of the cmdIDs.
var cmdNames = [...]string{
	cmdUnknown:    "unknown",
	cmdThrottle:   "cl.throttle",
	cmdCheck:      "rl.check",
	cmdRule:       "rl.rule",
	cmdRefund:     "rl.refund",
	cmdRefundRule: "rl.refundrule",
	cmdPing:       "ping",
	cmdEcho:       "echo",
	cmdQuit:       "quit",
	cmdSelect:     "select",
	cmdHello:      "hello",
	cmdAuth:       "auth",
	cmdClient:     "client",
	cmdCommand:    "command",
	cmdConfig:     "config",
	cmdInfo:       "info",
	cmdMulti:      "multi",
	cmdExec:       "exec",
	cmdDiscard:    "discard",
	cmdDel:        "del",
	cmdUnlink:     "unlink",
}

// Result is what a reply says, for Observer.Command.
type Result string

// The results.
const (
	// ResultOK is any reply that is not an error, but those of checks.
	ResultOK Result = "ok"
	// ResultAllowed is an allowed check (for a refund, the peek after it
	// is counted as ResultOK).
	ResultAllowed Result = "allowed"
	// ResultDenied is a denied check.
	ResultDenied Result = "denied"
	// ResultShadowDenied is a check a shadow rule would deny, let through.
	ResultShadowDenied Result = "shadow_denied"
	// ResultFull is a check refused because the rate limiter is full.
	ResultFull Result = "full"
	// ResultInvalid is an error reply to bad input: arguments, arity, an
	// unknown command.
	ResultInvalid Result = "invalid"
	// ResultError is an error reply because the Checker failed.
	ResultError Result = "error"
	// ResultNoAuth is a command refused before AUTH.
	ResultNoAuth Result = "noauth"
	// ResultWrongPass is an AUTH with a wrong password.
	ResultWrongPass Result = "wrongpass"
	// ResultAuthLimited is an AUTH refused unread because its client's
	// address failed AUTH too often (see Options.AuthFailures).
	ResultAuthLimited Result = "auth_limited"
	// ResultQueued is a command queued by MULTI; EXEC reports it again
	// with the result of its reply.
	ResultQueued Result = "queued"
)

// ConnEvent is a connection event, for Observer.Conn.
type ConnEvent string

// The connection events.
const (
	ConnOpened        ConnEvent = "opened"
	ConnClosed        ConnEvent = "closed"
	ConnRejected      ConnEvent = "rejected"       // over Options.MaxConns
	ConnProtocolError ConnEvent = "protocol_error" // closed for a protocol error or a limit
	ConnTimedOut      ConnEvent = "timed_out"      // closed by the read or idle timeout
)

// Results returns every Result Observer.Command reports.
func Results() []Result {
	return []Result{ResultOK, ResultAllowed, ResultDenied, ResultShadowDenied, ResultFull,
		ResultInvalid, ResultError, ResultNoAuth, ResultWrongPass, ResultAuthLimited, ResultQueued}
}

// ConnEvents returns every ConnEvent Observer.Conn reports.
func ConnEvents() []ConnEvent {
	return []ConnEvent{ConnOpened, ConnClosed, ConnRejected, ConnProtocolError, ConnTimedOut}
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) Command(string, Result) {}
func (nopObserver) Batch(int)              {}
func (nopObserver) Conn(ConnEvent)         {}
