// Package admin is the admin API of ratelimitd, to be served on a listener
// of its own, never on the public one: NewHandler lists, reads, puts and
// deletes the rules of a rules.Store, resets and inspects buckets, reports
// the limiter's counters, and serves the metrics, the cluster status and
// the Go runtime's profiles when asked to, all behind a bearer token.
//
// README.md ("Admin API") is the contract of its routes and bodies.
//
// Guarantees: every request but GET /healthz needs the token, checked
// before its path is looked at; the token is compared in constant time
// (through SHA-256 digests, so its length does not leak either); wrong
// tokens are limited per client address (Options.AuthFailures: past the
// limit, a request with a token is 429 with Retry-After, its token not
// compared), so a token cannot be guessed at the listener's speed; an
// unknown path is a JSON 404, a wrong method a JSON 405 with Allow; a
// rule the table cannot take is refused (400 naming the field); changes
// are serialized, and OnRulesChanged hears of them in version order.
//
// Non-guarantees: the API trusts its token holder fully, and changes made
// through it are held in memory by the rules.Store only: persisting them
// is the embedder's business (OnRulesChanged).
package admin
