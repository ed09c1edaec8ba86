// Package middleware rate-limits a net/http handler: New returns a
// func(http.Handler) http.Handler that checks every request, for one hit,
// with an api.Checker (an embedded actors.System), under a fixed limit, a
// named rule or the URL rule a request matches.
//
// An admitted request gets the RateLimit fields and goes on; a denied one
// is answered DenyStatus with Retry-After, the RateLimit fields and the
// check_rate JSON body of README.md, and never reaches the next handler.
//
// Guarantees: a Checker failure or a full table is answered 503 (fail
// closed); a key that is not a valid id is answered 400 naming id; the
// path is cleaned before a rule is matched, so "//api" cannot dodge a rule
// for "/api"; a deleted rule stops limiting at once. The middleware is
// safe for concurrent use.
//
// Non-guarantees: requests are keyed on the peer address by default, and
// forwarding headers are not read: behind a proxy, supply a KeyFunc that
// trusts only your proxies (a clientip.Resolver's Key).
package middleware
