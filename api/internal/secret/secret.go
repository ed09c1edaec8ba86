// Package secret compares what a client gives (a password, a bearer
// token) with the secrets a server accepts, so that the transports that
// ask for one (the Redis protocol's AUTH, the admin API, the dashboard)
// compare it the same way.
package secret

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
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

// MaxTokenLen is the longest fixed bearer token TokenSource accepts.
const MaxTokenLen = 4096

// TokenSource returns the source of the bearer tokens an Options of a
// transport names: tokens when it is set, else the fixed token alone,
// which must be 1 to MaxTokenLen visible ASCII characters (no spaces).
// Both set, or a bad fixed token, is an error wrapping invalid (the
// transport's ErrInvalidOption) that names the option.
func TokenSource(token string, tokens func() []string, invalid error) (func() []string, error) {
	switch {
	case tokens != nil && token != "":
		return nil, fmt.Errorf("%w: both Token and Tokens are set", invalid)
	case tokens != nil:
		return tokens, nil
	case token == "":
		return nil, fmt.Errorf("%w: Token is required", invalid)
	case len(token) > MaxTokenLen:
		return nil, fmt.Errorf("%w: Token must be at most %d bytes", invalid, MaxTokenLen)
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c > '~' {
			return nil, fmt.Errorf("%w: Token must be visible ASCII characters, without spaces", invalid)
		}
	}
	return Fixed(token), nil
}
