// Package api is the seam between the rate limiter and the transports that
// speak for it: the Checker every transport checks with (actors.System is
// one), and what they all say alike, whatever their wire protocol.
//
//   - Checker and Reserver: the consumer-side interface of a limiter. A
//     transport depends on it, never on package actors, so that it can be
//     tested with a fake and an embedder can put its own limiter behind it.
//   - Classify: what a Checker's error means to a client (bad input, gone,
//     stopping, unavailable, failed). The errors are table's
//     (table.ErrInvalid, table.ErrStopped, table.ErrUnavailable).
//   - RetryAfter, Ceil and AppendRateLimit: the Retry-After seconds of a
//     denial and the IETF RateLimit field values, one definition for every
//     transport.
//   - Result and Recorder: what a transport answered, as metrics count it.
//   - ErrInvalidOption: matched by every transport constructor's error.
//
// The transports are its sub-packages, one protocol each, none importing
// another: httpapi (GET/POST /check_rate and /refund), middleware (a
// net/http middleware), proxy (a limiting reverse proxy), admin (rules,
// reset, inspect), metrics (Prometheus); rules holds the named rules,
// clientip finds client addresses behind proxies, client is the Go client.
// README.md is the contract of their wire formats.
//
// Guarantees: every duration told to a client is rounded up, so that a
// client that waits as long as it was told is never early; a Retry-After
// is at least 1. Non-guarantees: the package counts nothing and holds no
// state; exactness is the Checker's.
package api
