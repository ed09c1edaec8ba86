// Package client is the Go client of a remote ratelimitd: it asks the
// service's HTTP API (see package api) whether hits are admitted.
//
//	c, err := client.New(client.Options{BaseURL: "http://127.0.0.1:8080"})
//	...
//	defer c.Close()
//	d, err := c.Check(ctx, "alice", client.Limit{Policy: client.Policy{Scale: time.Minute, Limit: 100}}, 1)
//	if err != nil { ... }          // unavailable (FailClosed), bad input, closed
//	if !d.Allowed { ... }          // denied: retry after d.RetryAfter
//
// Check is one GET /check_rate; CheckAll one POST /check_rate of a JSON
// array (all or nothing); Refund one GET /refund with negative hits; Wait
// a loop of checks that sleeps each denial's RetryAfter, for workers that
// must not lose work (with a leaky_bucket limit it paces them at the
// limit's rate). A Limit is ad hoc (Scale, Limit, Algorithm, Burst) or a
// rule configured on the service (Rule).
//
// # Answers and errors
//
// A denial is a Decision with Allowed false, not an error, whatever the
// service's denial status (413 or 429). A 400 is an error matching
// ErrInvalid that wraps a *FieldError naming the parameter at fault. A
// service that cannot answer — connection refused or broken,
// Options.Timeout reached, a 503 (table full, journal failing, shutting
// down), any other status, or a body that is not a ratelimitd answer — is
// an outage, and Options.Failure decides:
//
//   - FailClosed (the default): Check and CheckAll return an error
//     matching ErrUnavailable; Wait retries (after the 503's Retry-After,
//     else a capped exponential backoff with jitter) until admitted or its
//     context ends.
//   - FailOpen: Check and CheckAll return allowed decisions marked
//     Degraded, and Wait returns nil at once.
//
// Refund returns ErrUnavailable under either policy: there is nothing to
// allow. The caller's own context ending is never an outage: the error
// wraps ctx.Err(), under either policy. Each outage is logged once when it
// starts (a warning) and once when the service answers again, through
// Options.Logger.
//
// # Guarantees
//
//   - The client counts nothing itself: every decision that is not Degraded
//     is the service's, so the service's exactness holds across every
//     client and process.
//   - A Decision with Degraded false is the service's answer; one with
//     Degraded true is the failure policy's (whether the failed request
//     was counted is unknown: see below).
//   - Wait never busy-loops: it sleeps at least 1 ms after a denial and the
//     backoff (at least 5 ms) after a failure, on Options.Clock.
//   - Wait returns nil only for an admitted hit (or under FailOpen), and
//     ctx.Err() only if its hit was not taken: it does not abandon a
//     request in flight when ctx ends, but waits for the answer (at most
//     Options.Timeout).
//   - Every request is bounded by Options.Timeout (or by the supplied
//     HTTPClient's own settings) and by the caller's context.
//   - Connections are kept alive and reused (Options.MaxIdleConnsPerHost
//     idle ones); every answer is read to its end so its connection goes
//     back to the pool. A Check allocates only what net/http needs for the
//     request, plus the rule's name when the service renames it.
//   - A Client is safe for concurrent use, keeps no global state and starts
//     no goroutine of its own; Close is idempotent.
//
// # Non-guarantees
//
//   - When the answer to a sent request is lost (a timeout, a broken
//     connection, the caller's context ending during Check, CheckAll or
//     Refund), its hits may or may not have been counted. Wait then checks
//     again, so a hit may be counted that nobody got; and net/http itself
//     resends a GET once when a reused connection breaks before the first
//     byte of the answer. Either way hits are over-counted, never admitted
//     beyond a limit. A CheckAll (a POST) is never resent.
//   - Options.Timeout bounds each request, not Wait, which retries as long
//     as its context lasts; give it a context with a deadline.
//   - Degraded decisions are not limited at all: FailOpen trades exactness
//     for availability for as long as the outage lasts.
//   - Wait sleeps on Options.Clock but the HTTP requests' timeouts run on
//     real time.
//   - Beyond a Refund's hits, an empty CheckAll and ids that are not valid
//     UTF-8 (which the service refuses, and which a JSON body could not
//     carry), the client checks nothing the service checks (id lengths,
//     scales, limits, algorithm names): bad input costs a round trip and
//     comes back as ErrInvalid. Ids are sent byte for byte.
//   - Retries honour Retry-After but do not coordinate between clients
//     beyond the jitter of the backoff.
package client
