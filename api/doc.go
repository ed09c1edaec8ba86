// Package api is the HTTP transport of ratelimitd: the check_rate endpoint,
// the IETF RateLimit headers, a middleware for Go HTTP servers, and
// Prometheus metrics.
//
// # Endpoints
//
// NewHandler serves
//
//	GET  /check_rate?id=ID&scale=SCALE&limit=LIMIT[&hits=N][&algorithm=NAME]
//	POST /check_rate   {"id":"ID","scale":SCALE,"limit":LIMIT,"hits":N,"algorithm":"NAME"}
//	GET  /healthz      {"status":"ok"}
//	GET  /metrics      Prometheus text format (only when Options.Metrics is set)
//
// SCALE is the window: an integer number of milliseconds, or a Go duration
// such as "30s" or "1m30s" (in JSON, a number of milliseconds or a duration
// string). It must be a whole number of milliseconds between table.MinScale
// and table.MaxScale. LIMIT is a positive integer. hits is the cost of the
// request, a non-negative integer, 1 when absent; 0 is a peek that consumes
// nothing. algorithm is optional and names a table.Algorithm.
//
// An allowed check is answered 200, a denied one with Options.DenyStatus
// (413 by default, for compatibility with the original ratelimitd; 429 by
// option). Both carry Cache-Control: no-store, the headers
//
//	RateLimit-Policy: "default";q=LIMIT;w=WINDOW_SECONDS
//	RateLimit: "default";r=REMAINING;t=SECONDS_UNTIL_RESET
//
// of draft-ietf-httpapi-ratelimit-headers (draft 08 and later), and the body
//
//	{"allowed":true,"id":"ID","count":1,"limit":500,"remaining":499,"reset_ms":29000,"retry_after_ms":0}
//
// A denial also carries Retry-After in whole seconds, rounded up, at least 1.
//
// # Guarantees
//
//   - Bad input is answered 400 with a JSON body {"error":"...","field":"..."}
//     naming the field at fault ("body" or "query" when no request field
//     applies) and the rule it broke; never with a 5xx, never with a panic.
//     An unknown or repeated parameter, a malformed or trailing JSON value, a
//     non-integer, negative or overflowing number, and a body over 64 KiB are
//     all bad input. 413 always means "denied", never "too large".
//   - Every duration sent to a client is rounded up: a client that waits as
//     long as it was told is never early.
//   - A failure of the Checker (stopped, unavailable, canceled) is answered
//     503 with Retry-After: 1 and a JSON error, never as an allowed check: the
//     server fails closed.
//   - Handlers and middleware are safe for concurrent use and keep no mutable
//     global state; every Metrics has its own registry.
//
// # Non-guarantees
//
//   - Counting is exact only as far as the Checker is; package api neither
//     counts nor caches decisions.
//   - The middleware keys requests on the peer address by default; it does
//     not read forwarding headers. Behind a proxy, supply a KeyFunc that
//     trusts only your proxies.
//   - Timeouts on connections are the server's business (see cmd/ratelimitd),
//     not the handler's.
//   - The JSON field order and the escaping of the id are stable, but clients
//     should parse the body as JSON rather than compare bytes.
package api
