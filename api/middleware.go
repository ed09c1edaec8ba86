package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// MiddlewareOptions configures Middleware: every request spends one hit of
// Limit per Scale under the key KeyFunc returns.
type MiddlewareOptions struct {
	// Scale is the window, a whole number of milliseconds between
	// table.MinScale and table.MaxScale.
	Scale time.Duration
	// Limit is the number of requests admitted per key and window; positive.
	Limit int64
	// DenyStatus is the status of a denied request: 413 (the default, when
	// zero) or 429.
	DenyStatus int
	// KeyFunc returns the id a request is counted under. The default is the
	// host part of r.RemoteAddr (all of it when it has no port). It must not
	// trust forwarding headers from untrusted peers.
	KeyFunc func(*http.Request) string
}

// Middleware returns a middleware that rate-limits the handler it wraps,
// checking every request with c for one hit. An admitted request gets the
// RateLimit and RateLimit-Policy headers and goes on to the next handler. A
// denied one is answered DenyStatus with Retry-After, the same headers and
// the same JSON body as check_rate, and never reaches the next handler. A
// Checker failure is answered 503 (fail closed), an invalid key 400.
//
// Middleware validates opts once; the error, which matches ErrInvalidOption,
// names the field at fault. The middleware is safe for concurrent use.
func Middleware(c Checker, opts MiddlewareOptions) (func(http.Handler) http.Handler, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: Checker is nil", ErrInvalidOption)
	}
	deny, err := denyStatus(opts.DenyStatus)
	if err != nil {
		return nil, err
	}
	if opts.Limit <= 0 {
		return nil, fmt.Errorf("%w: Limit must be positive, got %d", ErrInvalidOption, opts.Limit)
	}
	probe := table.Request{ID: "x", Scale: opts.Scale, Limit: opts.Limit, Hits: 1}
	if err := probe.Validate(); err != nil {
		var fe *table.FieldError
		if errors.As(err, &fe) && fe.Field == "scale" {
			return nil, fmt.Errorf("%w: Scale %s", ErrInvalidOption, fe.Rule)
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalidOption, err)
	}
	m := &middleware{
		responder: responder{denyStatus: deny},
		checker:   c,
		scale:     opts.Scale,
		limit:     opts.Limit,
		key:       opts.KeyFunc,
	}
	if m.key == nil {
		m.key = remoteHost
	}
	return m.wrap, nil
}

type middleware struct {
	responder
	checker Checker
	scale   time.Duration
	limit   int64
	key     func(*http.Request) string
}

func (m *middleware) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := table.Request{ID: m.key(r), Scale: m.scale, Limit: m.limit, Hits: 1}
		d, err := m.checker.Check(r.Context(), req)
		switch {
		case err != nil:
			m.answerCheckError(w, err)
		case !d.Allowed:
			m.writeDecision(w, req.ID, m.scale, d)
		default:
			m.setRateLimitHeaders(w.Header(), m.scale, d)
			next.ServeHTTP(w, r)
		}
	})
}

// remoteHost is the default key: the host part of r.RemoteAddr.
func remoteHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
