// Package api is the HTTP transport of ratelimitd: the check_rate and
// refund endpoints, the IETF RateLimit headers, a middleware for Go HTTP
// servers, an admin API, and Prometheus metrics.
//
// # Endpoints
//
// NewHandler serves
//
//	GET  /check_rate?id=ID&scale=SCALE&limit=LIMIT[&hits=N][&algorithm=NAME][&burst=B]
//	GET  /check_rate?id=ID&rule=RULE[&hits=N]
//	POST /check_rate   {"id":"ID","scale":SCALE,"limit":LIMIT,"hits":N,"algorithm":"NAME","burst":B}
//	POST /check_rate   {"id":"ID","rule":"RULE","hits":N}
//	POST /check_rate   [CHECK, CHECK, ...]    (a batch: all or nothing)
//	GET  /refund?...&hits=-N   POST /refund {...,"hits":-N}
//	GET  /healthz      {"status":"ok"}
//	GET  /metrics      Prometheus text format (only when Options.Metrics is set)
//
// ID is 1 to table.MaxIDLen bytes of valid UTF-8; in JSON, a \uD800 to
// \uDFFF escape only as half of a surrogate pair. An id that is not is
// answered 400 naming id ({"error":"id: must be valid UTF-8","field":"id"}),
// not counted under a U+FFFD stand-in.
//
// SCALE is the window: an integer number of milliseconds, or a Go duration
// such as "30s" or "1m30s" (in JSON, a number of milliseconds or a duration
// string). It must be a whole number of milliseconds between table.MinScale
// and table.MaxScale. LIMIT is a positive integer. hits is the cost of the
// request, a non-negative integer, 1 when absent; 0 is a peek that consumes
// nothing. algorithm is optional and names a table.Algorithm: fixed_window
// (the default), sliding_window, token_bucket or leaky_bucket. burst is
// optional, an integer ≥ 0: the bucket size of token_bucket (0: LIMIT) and
// leaky_bucket (0: 1), ignored by the windows; burst × SCALE/LIMIT must be
// at most table.MaxScale. The same id under a different scale, limit,
// algorithm or burst counts in a different bucket.
//
// rule names a rule of Options.Rules (see package rules) instead: the
// rule supplies scale, limit, algorithm and burst, which must then not be
// given (400 naming the field: "must not be given with rule: it comes from
// the rule"), and the check counts in the rule's namespace, apart from
// every ad-hoc check. A name the Store does not hold is answered 400
// {"error":"rule: is not a configured rule","field":"rule"}; without a Store
// at all, "rule: no rules are configured". A rule may have limit 0, which
// denies everything. The Store is read on every request: a change is seen
// by the very next check.
//
// # Answers
//
// An allowed check is answered 200, a denied one with Options.DenyStatus
// (413 by default, for compatibility with the original ratelimitd; 429 by
// option). Both carry Cache-Control: no-store, the headers
//
//	RateLimit-Policy: "NAME";q=LIMIT;w=WINDOW_SECONDS
//	RateLimit: "NAME";r=REMAINING;t=SECONDS_UNTIL_RESET
//
// of draft-ietf-httpapi-ratelimit-headers (draft 08 and later), where NAME
// is the rule's name, or "default" for an ad-hoc check, and the body
//
//	{"allowed":true,"id":"ID","count":1,"limit":500,"remaining":499,"reset_ms":29000,"retry_after_ms":0}
//
// with "rule":"RULE" after "id" for a check by rule. For token and leaky
// buckets, limit (and q=) is the bucket size and count the tokens in use.
// A denial also carries Retry-After in whole seconds, rounded up, at least 1.
//
// A shadow rule never denies: a check it would deny is answered 200 with
// "allowed":true and "shadow_denied":true after the other members, which
// hold the real count, remaining and retry_after_ms; there is no
// Retry-After.
//
// A check that needs a new bucket while the rate limiter holds its maximum
// number of buckets (actors.Config.MaxBuckets) is answered 503 with
// {"error":"the rate limiter is full (max buckets); retry","field":""} and
// Retry-After, the table's estimate of when room frees (the end of the
// check's own window, at least 1 s); it consumes nothing. (A shadow rule's
// check is answered 200 "shadow_denied" instead.)
//
// # Batches
//
// A POST /check_rate body that is a JSON array of 1 to actors.MaxCheckAll
// check objects is checked all or nothing (Checker.CheckAll): if every
// check is admitted, every one is counted; if any is denied, nothing is
// consumed. The answer is 200 when all are admitted, else DenyStatus (or
// 503 as above when the only denials are for a full table), with the body
//
//	{"allowed":false,"checks":[DECISION, DECISION, ...]}
//
// holding one decision object per check, in order, as for a single check.
// In a denied batch, the admitted checks show their state before their
// hits were given back. Retry-After is the longest wait among the
// denials. The RateLimit headers describe one check, the one that binds:
// in a denied batch, the denial with the least remaining (on a tie, the
// longest wait); otherwise the check with the least remaining (on a tie,
// the longest wait, then the latest reset), shadow rules left aside. Checks
// by a shadow rule are not part of the all-or-nothing decision: they are
// counted one by one after an admitted batch, and only peeked at after a
// denied one. An error in element I is reported on field "checks[I].FIELD"
// (or "checks[I]" when the element is not an object), a wrong number of
// elements on "checks". A batch counts once in the metrics.
//
// # Refunds
//
// GET and POST /refund take the parameters of a single check (ad hoc or by
// rule) with hits negative, the hits to give back: hits=-3 gives 3 back.
// A missing, zero or positive hits is answered 400 {"error":"hits: must be
// negative on a refund: the hits to give back, e.g. -3","field":"hits"}. A
// refund never takes a bucket below empty (a count below 0, a token bucket
// above full) and never creates one. A check that counted hits answers
// Ratelimit-Window (table.Reservation.Window); a refund with window=<that>
// credits that window only, and nothing once it is over; without window it
// credits the current one. The answer is always 200, without Retry-After,
// with the decision body of a peek after the refund.
//
// # Admin API
//
// NewAdminHandler serves, on a listener of its own (never on the public
// one):
//
//	GET    /rules               {"version":N,"rules":[RULE...]}   sorted by name
//	GET    /rules/NAME          {"version":N,"rule":RULE}
//	PUT    /rules/NAME          body RULE → {"version":N,"rule":RULE}
//	DELETE /rules/NAME          {"version":N}
//	POST   /reset?id=ID&rule=RULE  (or id, scale, limit, algorithm, burst)  {"deleted":N}
//	GET    /buckets?id=ID       {"id":"ID","buckets":[BUCKET...]}
//	GET    /stats               {"shards":N,"buckets":N,...}   (actors.Stats)
//	GET    /healthz             {"status":"ok"}
//
// Every request but GET /healthz must carry "Authorization: Bearer TOKEN"
// (the scheme in any case); one that does not is answered 401 with
// WWW-Authenticate: Bearer and a JSON error, whatever its path. /healthz
// needs no token, for load balancers and probes.
//
// RULE is the JSON form of rules.Rule: {"name","algorithm","scale" (a
// duration string, or milliseconds),"limit","burst","shadow","match":
// {"prefix","method","host"}}. In a PUT, "name" may be left out and must
// otherwise equal NAME; a member given twice, an unknown member or an
// invalid value is answered 400 naming the field, for example
// {"error":"scale: must be between 1ms and 8784h0m0s","field":"scale"}, as
// is a rule whose refill time (burst × scale/limit) exceeds table.MaxScale
// (field "burst") or whose match is another rule's (field "match"). Each
// change makes a new rules.Set, one version up; the next check sees it.
// DELETE of an unknown rule, and GET of one, is a 404. Without a
// rules.Store, every /rules endpoint answers 404 with a JSON error.
//
// BUCKET is {"rule" ("" for ad-hoc limits),"algorithm","scale_ms","limit",
// "burst","window","count","previous","full_at" (token and leaky buckets
// only),"created_at","modified_at","expired"}, times in RFC 3339 (UTC,
// fractional seconds as needed). limit and burst are those of the bucket's
// key: 0 for a rule's buckets, whose limit may change.
//
// # Errors
//
// Every error body is {"error":"...","field":"..."}: 400 for bad input
// (field names the parameter at fault: "body" or "query" when no parameter
// applies), 401, 404 and 405 (with Allow) with field "", and 503 with
// Retry-After when the rate limiter cannot answer.
//
// # Guarantees
//
//   - Bad input is answered 400 naming the field at fault and the rule it
//     broke; never with a 5xx, never with a panic. An unknown or repeated
//     parameter, a malformed or trailing JSON value, a non-integer, negative
//     or overflowing number, and a body over MaxBodyBytes (256 KiB: a batch
//     of 1000 checks of about 250 bytes each) are all bad input. 413 always
//     means "denied", never "too large".
//   - Every duration sent to a client is rounded up: a client that waits as
//     long as it was told is never early.
//   - A failure of the Checker (stopped, unavailable, canceled) is answered
//     503 with Retry-After: 1 and a JSON error, never as an allowed check: the
//     server fails closed. So is a check refused by a full table.
//   - A batch is all or nothing: a denied batch consumes nothing.
//   - Rule changes (through a rules.Store, the admin API or a file watcher)
//     apply from the very next check; a rule's counts survive a change of
//     its limit, and a deleted rule stops limiting at once.
//   - The admin token is compared in constant time (through SHA-256
//     digests, so its length does not leak either).
//   - Handlers and middleware are safe for concurrent use and keep no mutable
//     global state; every Metrics has its own registry.
//
// # Non-guarantees
//
//   - Counting is exact only as far as the Checker is; package api neither
//     counts nor caches decisions.
//   - While a batch is being decided, a concurrent check of the same buckets
//     may see hits that the batch will give back: it can be denied early,
//     never admitted beyond a limit. In a batch, the checks of shadow rules
//     are counted after the others, not atomically with them; should one of
//     them fail, the batch is answered 503 though its other checks were
//     counted.
//   - The middleware keys requests on the peer address by default; it does
//     not read forwarding headers. Behind a proxy, supply a KeyFunc that
//     trusts only your proxies.
//   - Timeouts on connections are the server's business (see cmd/ratelimitd),
//     not the handler's.
//   - The JSON field order and the escaping of the id are stable, but clients
//     should parse the body as JSON rather than compare bytes.
//   - The admin API trusts its token holder fully, and changes made through
//     it are held in memory by the rules.Store only: persisting them (for
//     example from OnRulesChanged) is the embedder's business.
//
// # Metrics
//
// See Metrics for the series. ratelimitd_checks_total counts check requests
// by result: allowed, denied, shadow_denied, full, invalid, error;
// ratelimitd_refunds_total counts refunds answered 200.
package api
