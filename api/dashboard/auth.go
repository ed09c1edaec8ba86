package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/api/internal/secret"
)

// Sessions and logins.
const (
	// SessionLifetime is how long a session cookie is good for.
	SessionLifetime = 12 * time.Hour
	// CookieName is the name of the session cookie.
	CookieName = "ratelimitd_dashboard"
	// LoginAttempts is how many logins an address may try per minute
	// (right or wrong), and at once.
	LoginAttempts = 10
	// maxLoginAddresses bounds the login limiter's memory: the addresses it
	// remembers (the least recently limited goes first).
	maxLoginAddresses = 4096
	// maxLoginBody is the largest POST /login body.
	maxLoginBody = 8 << 10
)

// sessionMAC is what a session cookie's HMAC covers, after the expiry and
// the token's tag: it names the cookie's purpose (and its format's
// version), so that no other MAC made with the key could pass for one.
const sessionMAC = "ratelimitd dashboard session v2"

// tokenTagMAC is what a token's tag is the HMAC of, before the token.
const tokenTagMAC = "ratelimitd dashboard token tag v2"

// tagSize is the length of a token's tag in a session cookie.
const tagSize = 8

// sessions issues and checks session cookies. The server keeps no table of
// sessions: a cookie is its expiry (Unix seconds, 8 bytes), the tag of the
// token it was logged in with (tagSize bytes of an HMAC of the token) and
// an HMAC-SHA256 of both under a key drawn at random when the process
// starts, so a restart (or a forged key) ends every session, and a cookie
// cannot be made or stretched without the key. A session lasts while its
// token is accepted: dropping a token (Options.Tokens) ends the sessions
// logged in with it, and no other. Logging out clears the cookie in the
// browser; a copy of it stays good until it expires.
type sessions struct {
	key []byte
}

func (s *sessions) mac(parts ...[]byte) []byte {
	m := hmac.New(sha256.New, s.key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// tag returns the tag of token tok: it names the token in a cookie
// without showing it.
func (s *sessions) tag(tok string) []byte {
	return s.mac([]byte(tokenTagMAC), []byte(tok))[:tagSize]
}

// issue returns a cookie value good until expiry while tok is accepted.
func (s *sessions) issue(expiry time.Time, tok string) string {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+tagSize+sha256.Size), uint64(expiry.Unix()))
	b = append(b, s.tag(tok)...)
	b = append(b, s.mac(b, []byte(sessionMAC))...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// valid reports whether v is a cookie value issued with s's key, not
// expired at now, for one of the tokens toks.
func (s *sessions) valid(v string, now time.Time, toks []string) bool {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) != 8+tagSize+sha256.Size {
		return false
	}
	signed := b[:8+tagSize]
	if !hmac.Equal(b[8+tagSize:], s.mac(signed, []byte(sessionMAC))) {
		return false
	}
	if now.Unix() >= int64(binary.BigEndian.Uint64(b[:8])) {
		return false
	}
	for _, tok := range toks {
		if tok != "" && hmac.Equal(b[8:8+tagSize], s.tag(tok)) {
			return true
		}
	}
	return false
}

// cookie returns the session cookie for r, logged in with tok, good from
// now for SessionLifetime while tok is accepted.
func (s *sessions) cookie(r *http.Request, now time.Time, tok string) *http.Cookie {
	exp := now.Add(SessionLifetime).Truncate(time.Second)
	return &http.Cookie{
		Name:     CookieName,
		Value:    s.issue(exp, tok),
		Path:     "/",
		Expires:  exp,
		MaxAge:   int(SessionLifetime / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	}
}

// clear returns a cookie that deletes the session cookie.
func clearCookie(r *http.Request) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode}
}

// hasSession reports whether r carries a valid session cookie.
func (h *Handler) hasSession(r *http.Request, now time.Time) bool {
	cs := r.CookiesNamed(CookieName)
	if len(cs) == 0 {
		return false
	}
	toks := h.tokens()
	for _, c := range cs {
		if h.sessions.valid(c.Value, now, toks) {
			return true
		}
	}
	return false
}

// bearer reports whether r carries exactly one Authorization header with
// the Bearer scheme and a token, compared through its SHA-256 digest in
// constant time (secret.In), so that neither its bytes nor its length leak
// by timing.
func (h *Handler) bearer(r *http.Request) bool {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return false
	}
	scheme, cred, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return h.tokenMatches(strings.TrimLeft(cred, " "))
}

// tokenMatches reports whether tok is one of the tokens accepted now.
func (h *Handler) tokenMatches(tok string) bool { return secret.In([]byte(tok), h.tokens()) }

// access decides whether r may read the dashboard: Accepted with a
// session cookie or the bearer token. A request with an Authorization
// header is an attempt at the token, decided under the login limiter:
// a wrong token is counted (Refused, or LockedOut, logged, when it used
// up the address's attempts), and an address without attempts left is
// Limited for retry, its token not compared. Without a session or an
// Authorization header it is Refused, counting nothing. Every refused
// attempt is told to Options.OnTokenFailure here.
func (h *Handler) access(r *http.Request, now time.Time) (secret.Verdict, time.Duration) {
	if h.hasSession(r, now) {
		return secret.Accepted, 0
	}
	if len(r.Header["Authorization"]) == 0 {
		return secret.Refused, 0
	}
	client := clientKey(r)
	v, retry := h.logins.Attempt(client, now, func() bool { return h.bearer(r) })
	switch v {
	case secret.LockedOut:
		h.log.Warn("dashboard: bearer tokens refused for a while after too many wrong ones from one address", "client", client, "retry_after_s", secret.RetrySeconds(retry))
		fallthrough
	case secret.Refused:
		h.failed(false)
	case secret.Limited:
		h.failed(true)
	}
	return v, retry
}

// clientKey names r's client for the login limiter (secret.ClientKey):
// the address is the connection's, as the admin listener is not behind a
// proxy.
func clientKey(r *http.Request) string { return secret.ClientKey(r.RemoteAddr) }
