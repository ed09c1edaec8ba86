// Package secret compares what a client gives (a password, a bearer
// token) with the secrets a server accepts, so that the transports that
// ask for one (the Redis protocol's AUTH, the admin API, the dashboard)
// compare it the same way.
package secret

import (
	"crypto/sha256"
	"crypto/subtle"
)

// In reports whether given is one of secrets; an empty secret matches
// nothing. It compares SHA-256 digests in constant time, with each secret
// however early one matches, so that the time taken shows neither a
// secret's bytes or length nor which one matched (only how many there are).
func In(given []byte, secrets []string) bool {
	sum := sha256.Sum256(given)
	match := 0
	for _, s := range secrets {
		want := sha256.Sum256([]byte(s))
		match |= subtle.ConstantTimeCompare(sum[:], want[:]) & subtle.ConstantTimeLessOrEq(1, len(s))
	}
	return match == 1
}

// Fixed returns a source of the secrets that always returns s alone: the
// transports' fixed Password or Token as their Passwords or Tokens.
func Fixed(s string) func() []string {
	one := []string{s}
	return func() []string { return one }
}
