// Package httpapi is the HTTP check API of ratelimitd: NewHandler serves
// GET and POST /check_rate (one check, or a batch checked all or nothing),
// GET and POST /refund, GET /healthz and, with Options.Metrics, /metrics,
// over any api.Checker. AccessLog wraps a handler to log its requests.
//
// The wire format (parameters, answers, statuses, headers, error bodies)
// is the contract written in README.md, "Using the server"; this package
// implements it and its tests pin it byte for byte (testdata/*.golden).
//
// # Guarantees
//
//   - Bad input is answered 400 with {"error","field"}, naming the field
//     and what it must be; never a 5xx, never a panic. A body over
//     MaxBodyBytes is bad input too: 413 always means "denied". A batch
//     reports its first fault in body order.
//   - Each parameter is checked as it is parsed; what the table asks of a
//     request as a whole is checked once, by the Checker, whose
//     *table.FieldError (or *table.IndexError in a batch) is answered 400.
//   - A failure of the Checker (stopped, unavailable, canceled) is answered
//     503 with Retry-After: 1 and a JSON error, never as an allowed check:
//     the handler fails closed. So is a check refused by a full table.
//   - A batch is all or nothing: a denied batch consumes nothing.
//   - A change of the rules.Store applies from the very next check.
//   - The handler is safe for concurrent use and keeps no global state.
//
// # Non-guarantees
//
//   - Counting is exact only as far as the Checker is; the package neither
//     counts nor caches decisions.
//   - While a batch is being decided, a concurrent check of the same
//     buckets may see hits the batch will give back: it can be denied
//     early, never admitted beyond a limit. The checks of shadow rules in a
//     batch are counted after the others, not atomically with them.
//   - Timeouts on connections are the server's business (cmd/ratelimitd).
//   - The JSON member order and the escaping of the id are stable, but
//     clients should parse the body as JSON rather than compare bytes.
package httpapi
