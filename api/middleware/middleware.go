package middleware

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/internal/httpwire"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// Options configures Middleware: every request spends one hit,
// under the key KeyFunc returns, of the limit that applies to it:
//
//   - with Rule set, the rule of that name in Rules;
//   - else, with Rules set, the rule Rules.Match picks for the request's
//     method, host and path, or, when none matches, Scale and Limit if set
//     (otherwise the request passes unlimited);
//   - else Scale and Limit.
type Options struct {
	// Policy is the limit of every request per key: Limit, positive,
	// requests per Scale, counted by Algorithm (with Burst for the
	// buckets). Required without Rules; with Rules and no Rule, optional
	// (the limit of requests no rule matches); with Rule, it must be zero.
	table.Policy
	// DenyStatus is the status of a denied request: 413 (the default, when
	// zero) or 429.
	DenyStatus int
	// KeyFunc returns the id a request is counted under. The default is the
	// host part of r.RemoteAddr (all of it when it has no port). It must not
	// trust forwarding headers from untrusted peers. A key that is not a
	// valid id (empty, over table.MaxIDLen bytes, not valid UTF-8) is
	// answered 400 naming id, as the Checker refuses it.
	KeyFunc func(*http.Request) string
	// Rules, when set, supplies the limits by rule: the one named by Rule,
	// or else the one matching each request. Changes to the Store apply
	// from the very next request.
	Rules *rules.Store
	// Rule names the rule of Rules every request is checked under. It must
	// exist when Middleware is called; if it is deleted later, requests
	// pass unlimited until it is put back.
	Rule string
	// UserFunc returns the authenticated user of a request, for rules
	// keyed by "user"; nil means the HTTP Basic user name. A rule keyed by
	// a header, a query parameter or the user counts a request that lacks
	// one, or whose one is over table.MaxIDLen bytes or not valid UTF-8,
	// under KeyFunc's key.
	UserFunc func(*http.Request) string
	// OnDeny, if set, answers denied requests instead of the default 413
	// JSON body; Retry-After and the RateLimit fields (unless
	// NoRateLimitHeaders) are set before it is called. It is not called
	// for a full table or a Checker failure (503).
	OnDeny func(w http.ResponseWriter, r *http.Request, d table.Decision)
	// NoRateLimitHeaders leaves the RateLimit and RateLimit-Policy fields
	// off the responses (Retry-After stays on denials).
	NoRateLimitHeaders bool
}

// New returns a middleware that rate-limits the handler it wraps,
// checking every request with c for one hit (see Options for
// which limit applies). An admitted request gets the RateLimit and
// RateLimit-Policy headers and goes on to the next handler. A denied one is
// answered DenyStatus with Retry-After, the same headers and the same JSON
// body as check_rate, and never reaches the next handler; a denial by a
// shadow rule goes on like an admitted request. A Checker failure is
// answered 503 (fail closed), as is a request refused because the rate
// limiter is full; an invalid key 400.
//
// Before matching, the path is cleaned (as http.ServeMux cleans it, keeping
// a trailing slash), so "//api" and "/x/../api" cannot dodge a rule for
// "/api".
//
// New validates opts once; the error, which matches api.ErrInvalidOption,
// names the field at fault. The middleware is safe for concurrent use.
func New(c api.Checker, opts Options) (func(http.Handler) http.Handler, error) {
	deny, err := httpwire.CheckOptions(c, opts.DenyStatus)
	if err != nil {
		return nil, err
	}
	m := &middleware{
		Responder: httpwire.Responder{DenyStatus: deny, NoRateLimitHeaders: opts.NoRateLimitHeaders},
		checker:   c,
		policy:    opts.Policy,
		rules:     opts.Rules,
		rule:      opts.Rule,
		onDeny:    opts.OnDeny,
		noHeaders: opts.NoRateLimitHeaders,
	}
	m.key, m.user = httpwire.KeyFuncs(opts.KeyFunc, opts.UserFunc)
	switch {
	case opts.Rule != "":
		if opts.Rules == nil {
			return nil, fmt.Errorf("%w: Rule %q needs Rules", api.ErrInvalidOption, opts.Rule)
		}
		if _, ok := opts.Rules.Current().Get(opts.Rule); !ok {
			return nil, fmt.Errorf("%w: Rule %q is not in Rules", api.ErrInvalidOption, opts.Rule)
		}
		if opts.Policy != (table.Policy{}) {
			return nil, fmt.Errorf("%w: Scale and Limit must be zero with Rule: they come from the rule", api.ErrInvalidOption)
		}
	case opts.Rules != nil && opts.Policy == (table.Policy{}):
		// Requests no rule matches pass unlimited.
	default:
		if err := validLimit(&opts.Policy); err != nil {
			return nil, err
		}
		m.fallback = true
	}
	return m.wrap, nil
}

// validLimit validates the Policy of Options.
func validLimit(p *table.Policy) error {
	if p.Limit <= 0 {
		return fmt.Errorf("%w: Limit must be positive, got %d", api.ErrInvalidOption, p.Limit)
	}
	if err := p.Validate(); err != nil {
		var fe *table.FieldError
		if errors.As(err, &fe) && fe.Field == "scale" {
			return fmt.Errorf("%w: Scale %s", api.ErrInvalidOption, fe.Message)
		}
		return fmt.Errorf("%w: %v", api.ErrInvalidOption, err)
	}
	return nil
}

type middleware struct {
	httpwire.Responder
	checker  api.Checker
	policy   table.Policy
	fallback bool // policy applies to requests no rule covers
	key      func(*http.Request) string
	rules    *rules.Store // nil: no rules
	rule     string       // the rule of every request, or "": match

	user      func(*http.Request) string
	onDeny    func(http.ResponseWriter, *http.Request, table.Decision)
	noHeaders bool
}

// ruleFor returns the rule that applies to r, if any.
func (m *middleware) ruleFor(r *http.Request) (rules.Rule, bool) {
	switch {
	case m.rules == nil:
		return rules.Rule{}, false
	case m.rule != "":
		return m.rules.Current().Get(m.rule)
	}
	return m.rules.Match(r.Method, r.Host, httpwire.CleanPath(r.URL.Path))
}

func (m *middleware) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req table.Request
		var a httpwire.Answer
		if rule, ok := m.ruleFor(r); ok {
			req = httpwire.RuleRequest(rule, httpwire.RuleID(r, &rule, m.key, m.user), 1)
			a.Rule, a.Shadow = rule.Name, rule.Shadow
		} else if m.fallback {
			req = table.Request{ID: m.key(r), Policy: m.policy, Hits: 1}
		} else {
			next.ServeHTTP(w, r)
			return
		}
		d, err := m.checker.Check(r.Context(), req)
		if err != nil {
			m.AnswerCheckError(w, err)
			return
		}
		a.ID, a.Scale, a.D = req.ID, req.Scale, d
		switch {
		case a.Denied() && d.Full:
			m.WriteFull(w, d.RetryAfter)
		case a.Denied() && m.onDeny != nil:
			h := w.Header()
			if !m.noHeaders {
				m.SetRateLimitHeaders(h, &a)
			}
			h[httpwire.HdrRetryAfter] = []string{strconv.FormatInt(api.RetryAfter(d.RetryAfter), 10)}
			m.onDeny(w, r, d)
		case a.Denied():
			m.WriteDecision(w, &a, false)
		default:
			if !m.noHeaders {
				m.SetRateLimitHeaders(w.Header(), &a)
			}
			next.ServeHTTP(w, r)
		}
	})
}
