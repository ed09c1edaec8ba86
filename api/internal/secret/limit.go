package secret

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// Limiter limits the attempts at a secret per client: a token bucket of
// burst attempts per client key, refilled at burst a minute, in a table of
// package table bounded to maxClients keys (when full, the bucket closest
// to full goes first, so a flood of new addresses cannot lift the limit
// of one that is spent). It is safe for concurrent use.
type Limiter struct {
	mu     sync.Mutex
	t      *table.Table
	policy table.Policy
}

// NewLimiter returns a Limiter of burst attempts a minute per client,
// remembering at most maxClients clients.
func NewLimiter(burst int64, maxClients int) *Limiter {
	return &Limiter{
		t:      table.New(table.Config{MaxBuckets: maxClients, Evict: true}),
		policy: table.Policy{Algorithm: table.TokenBucket, Scale: time.Minute, Limit: burst},
	}
}

// Spend counts one attempt of client at now and reports whether it was
// within the limit, or else how long until the next one is.
func (l *Limiter) Spend(client string, now time.Time) (bool, time.Duration) {
	return l.apply(client, 1, now)
}

// Allowed reports whether client may attempt at now, without counting an
// attempt, or else how long until it may.
func (l *Limiter) Allowed(client string, now time.Time) (bool, time.Duration) {
	return l.apply(client, 0, now)
}

// Verdict is what Attempt made of an attempt at a secret.
type Verdict int

// Verdicts.
const (
	// Accepted: the secret matched; nothing was counted.
	Accepted Verdict = iota
	// Refused: the secret did not match; the failure was counted.
	Refused
	// LockedOut: the secret did not match, and this failure used up the
	// client's attempts: its next ones are Limited for a while. The caller
	// logs it, once per lock-out.
	LockedOut
	// Limited: the secret was not compared, the client having failed too
	// often; retry says for how long.
	Limited
)

// Attempt decides one attempt of client at a secret at now: Limited,
// without calling matches, when the client has no attempt left; else
// Accepted if matches reports true, and otherwise a failure, counted
// (Refused, or LockedOut when it was the client's last). Only failures
// count, so a client that always has the secret is never limited. retry
// is how long the client must wait, for Limited and LockedOut. A nil
// Limiter limits nothing: it only calls matches.
//
// matches runs under the Limiter's lock, so that concurrent attempts of a
// client with one attempt left make one comparison between them, not one
// each (a flood of parallel guesses gets no more tries than a sequence):
// every attempt waits for the ones before it, so matches should be quick
// (a digest and a compare; the secrets it reads may be re-read from their
// file now and then) and must not call the Limiter.
func (l *Limiter) Attempt(client string, now time.Time, matches func() bool) (Verdict, time.Duration) {
	if l == nil {
		if matches() {
			return Accepted, 0
		}
		return Refused, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok, retry := l.applyLocked(client, 0, now); !ok {
		return Limited, retry
	}
	if matches() {
		return Accepted, 0
	}
	l.applyLocked(client, 1, now)
	if ok, retry := l.applyLocked(client, 0, now); !ok {
		return LockedOut, retry
	}
	return Refused, 0
}

func (l *Limiter) apply(client string, hits int64, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.applyLocked(client, hits, now)
}

// applyLocked counts hits attempts of client at now (0: a peek) and
// reports whether they were within the limit, or else how long until the
// next one is; l.mu is held.
func (l *Limiter) applyLocked(client string, hits int64, now time.Time) (bool, time.Duration) {
	d := l.t.Apply(table.Request{ID: client, Policy: l.policy, Hits: hits}, now)
	l.t.DeleteExpired(now, 16) // full buckets are expired: keep the table small
	return d.Allowed, d.RetryAfter
}

// RetrySeconds is retry in whole seconds, rounded up, at least 1: what a
// refused client is told to wait.
func RetrySeconds(retry time.Duration) int64 {
	return max(int64((retry+time.Second-1)/time.Second), 1)
}

// ClientKey names the client at addr (host:port, or a host) for a
// Limiter: its IPv4 address, or the /64 of its IPv6 address (one host
// commonly holds a whole /64); an address that does not parse is kept as
// it is, behind a '?'.
func ClientKey(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return "?" + host
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
