package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/internal/httpwire"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// Options configures New.
type Options struct {
	// Upstream is where admitted requests go: scheme and host, and
	// optionally a path prefix. Required.
	Upstream *url.URL
	// PerClient, PerHost and Global are the layers besides the URL rules,
	// each at most Limit requests per Scale; nil leaves a layer out. See
	// New for the order.
	PerClient, PerHost, Global *table.Policy
	// Rules, when set, adds the layer of the URL rule Rules.Match picks for
	// each request (its Key says whose budget it spends).
	Rules *rules.Store
	// ClientKey returns the client's key (the per-client layer's id, and a
	// URL rule's for the "ip" key). Nil means the host of RemoteAddr. Give
	// it a clientip.Resolver's Key to read forwarding headers from trusted
	// proxies only. A key that is empty or not valid UTF-8 is answered 400
	// "the client address is unusable".
	ClientKey func(*http.Request) string
	// TrustedPeer reports whether the direct peer is a trusted proxy, whose
	// X-Forwarded-For is kept (the peer is appended to it) and whose
	// X-Real-IP passes; from any other peer X-Forwarded-For is replaced by
	// the peer alone and X-Real-IP is dropped. Forwarded is always dropped:
	// the proxy speaks X-Forwarded-*. Nil trusts no one.
	TrustedPeer func(*http.Request) bool
	// UserFunc returns the authenticated user of a request, for rules keyed
	// by "user"; nil means the HTTP Basic user name.
	UserFunc func(*http.Request) string
	// DenyStatus is the status of a denied request: 413 (the default,
	// when zero) or 429.
	DenyStatus int
	// Transport reaches the upstream; nil means a pooled http.Transport
	// with timeouts.
	Transport http.RoundTripper
	// Metrics, when set, records every decision; if it is also an
	// api.RuleRecorder, every check of a named rule too.
	Metrics api.Recorder
	// Logger receives upstream failures and unexpected errors; nil discards them.
	Logger *slog.Logger
}

// Namespaces of the proxy's own layers: they hold characters rule names
// cannot, so they never share a counter with a rule.
const (
	nsClient = "@client"
	nsHost   = "@host"
	nsGlobal = "@global"
)

// globalID is the id of the global layer's single bucket.
const globalID = "*"

// New returns a reverse proxy that rate-limits every request before
// it reaches the upstream. Each request spends one hit in each layer, in
// this fixed order:
//
//  1. per client (PerClient, keyed by ClientKey);
//  2. per URL rule (the rule Rules.Match picks for the method, host and
//     cleaned path; keyed by the rule's Key);
//  3. per host (PerHost, keyed by the request's host, lower-case, without
//     port);
//  4. a global ceiling (Global, one bucket).
//
// The layers are checked all or nothing (api.Checker.CheckAll): a request
// denied by any layer consumes nothing in the others. It is answered
// DenyStatus with Retry-After (the longest wait of the layers that denied),
// the RateLimit fields and the check_rate JSON body of the most restrictive
// denial, and the upstream never sees it. A shadow rule is counted but
// never denies. An admitted request is proxied with
// net/http/httputil.ReverseProxy, bodies streamed both ways; hop-by-hop
// headers are dropped, X-Forwarded-For gets the peer appended (see
// TrustedPeer), and X-Forwarded-Host and X-Forwarded-Proto are set. An
// unreachable upstream is answered 502 with a JSON error; its hit stays
// counted. A Checker failure or a full table is answered 503 (fail closed).
func New(c api.Checker, opts Options) (http.Handler, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: Checker is nil", api.ErrInvalidOption)
	}
	if opts.Upstream == nil || (opts.Upstream.Scheme != "http" && opts.Upstream.Scheme != "https") || opts.Upstream.Host == "" {
		return nil, fmt.Errorf("%w: Upstream must be an http or https URL with a host", api.ErrInvalidOption)
	}
	deny, err := httpwire.DenyStatusOption(opts.DenyStatus)
	if err != nil {
		return nil, err
	}
	for name, l := range map[string]*table.Policy{"PerClient": opts.PerClient, "PerHost": opts.PerHost, "Global": opts.Global} {
		if l == nil {
			continue
		}
		if err := l.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", api.ErrInvalidOption, name, err)
		}
	}
	p := &proxy{
		Responder:   httpwire.Responder{DenyStatus: deny},
		checker:     c,
		opts:        opts,
		trustedPeer: opts.TrustedPeer,
		metrics:     opts.Metrics,
		log:         opts.Logger,
	}
	p.byRule, _ = opts.Metrics.(api.RuleRecorder)
	p.clientKey, p.user = httpwire.KeyFuncs(opts.ClientKey, opts.UserFunc)
	if p.trustedPeer == nil {
		p.trustedPeer = func(*http.Request) bool { return false }
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	transport := opts.Transport
	if transport == nil {
		transport = &http.Transport{
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   256,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
	}
	upstream := *opts.Upstream
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&upstream)
			pr.Out.Host = pr.In.Host // the upstream sees the host the client asked for
			p.setForwarded(pr)
		},
		Transport: transport,
		ErrorLog:  slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, r.Context().Err()) {
				return // the client went away
			}
			p.log.Warn("proxy: upstream failed", "upstream", upstream.Host, "err", err)
			p.WriteError(w, http.StatusBadGateway, "", "the upstream is unreachable or failed: "+err.Error())
		},
	}
	return p, nil
}

type proxy struct {
	httpwire.Responder
	checker     api.Checker
	opts        Options
	rp          *httputil.ReverseProxy
	clientKey   func(*http.Request) string
	trustedPeer func(*http.Request) bool
	user        func(*http.Request) string
	metrics     api.Recorder
	byRule      api.RuleRecorder // metrics, if it is one; else nil
	log         *slog.Logger
}

// setForwarded sets X-Forwarded-For (the peer appended to a trusted peer's
// chain, or the peer alone), X-Forwarded-Host and X-Forwarded-Proto.
func (p *proxy) setForwarded(pr *httputil.ProxyRequest) {
	peer := httpwire.RemoteHost(pr.In)
	xff := peer
	trusted := p.trustedPeer(pr.In)
	if prior := pr.In.Header.Values("X-Forwarded-For"); len(prior) > 0 && trusted {
		xff = strings.Join(prior, ", ") + ", " + peer
	}
	pr.Out.Header.Del("Forwarded")
	if !trusted {
		// What an untrusted client says about itself goes no further.
		pr.Out.Header.Del("X-Real-Ip")
	}
	pr.Out.Header.Set("X-Forwarded-For", xff)
	pr.Out.Header.Set("X-Forwarded-Host", pr.In.Host)
	proto := "http"
	if pr.In.TLS != nil {
		proto = "https"
	}
	pr.Out.Header.Set("X-Forwarded-Proto", proto)
}

// ruleKey returns the id a request spends under rule r.
func (p *proxy) ruleKey(r *http.Request, rule *rules.Rule) string {
	return httpwire.RuleID(r, rule, p.clientKey, p.user)
}

func layer(l *table.Policy, ns, id string) table.Request {
	return table.Request{ID: id, Policy: *l, Hits: 1, Namespace: ns}
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var reqs [4]table.Request
	var as [4]httpwire.Answer
	n := 0
	client := p.clientKey(r)
	if client == "" || !utf8.ValidString(client) {
		p.WriteError(w, http.StatusBadRequest, "", "the client address is unusable")
		return
	}
	if l := p.opts.PerClient; l != nil {
		reqs[n], as[n] = layer(l, nsClient, client), httpwire.Answer{ID: client, Scale: l.Scale}
		n++
	}
	var shadow *table.Request
	var shadowRule string
	ruleAt := -1 // the element of as of the enforced rule, if any
	if p.opts.Rules != nil {
		if rule, ok := p.opts.Rules.Match(r.Method, r.Host, httpwire.CleanPath(r.URL.Path)); ok {
			req := httpwire.RuleRequest(rule, p.ruleKey(r, &rule), 1)
			if rule.Shadow {
				shadow, shadowRule = &req, rule.Name
			} else {
				reqs[n], as[n] = req, httpwire.Answer{ID: req.ID, Scale: rule.Scale, Rule: rule.Name}
				ruleAt = n
				n++
			}
		}
	}
	if l := p.opts.PerHost; l != nil {
		host := strings.ToLower(r.Host)
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host == "" || len(host) > table.MaxIDLen {
			p.WriteError(w, http.StatusBadRequest, "", "the Host header is missing or too long")
			return
		}
		reqs[n], as[n] = layer(l, nsHost, host), httpwire.Answer{ID: host, Scale: l.Scale}
		n++
	}
	if l := p.opts.Global; l != nil {
		reqs[n], as[n] = layer(l, nsGlobal, globalID), httpwire.Answer{ID: globalID, Scale: l.Scale}
		n++
	}
	if n > 0 {
		decs, allowed, err := p.checker.CheckAll(r.Context(), reqs[:n])
		if err != nil {
			p.record(start, p.AnswerCheckError(w, err))
			return
		}
		for i := range n {
			as[i].D = decs[i]
		}
		if ruleAt >= 0 {
			p.recordRule(as[ruleAt].Rule, as[ruleAt].Result())
		}
		if !allowed {
			p.record(start, p.writeBatchDenial(w, as[:n]))
			return
		}
	}
	res := api.ResultAllowed
	if shadow != nil {
		// Counted, never enforced; a failure to count lets it through.
		d, err := p.checker.Check(r.Context(), *shadow)
		switch {
		case err != nil:
			p.log.Warn("proxy: shadow rule check failed", "rule", shadowRule, "err", err)
		case !d.Allowed:
			res = api.ResultShadowDenied
			p.recordRule(shadowRule, res)
		default:
			p.recordRule(shadowRule, api.ResultAllowed)
		}
	}
	if n > 0 {
		if b := httpwire.Outcome(as[:n], true).Binding; b >= 0 {
			p.SetRateLimitHeaders(w.Header(), &as[b])
		}
	}
	p.record(start, res)
	p.rp.ServeHTTP(w, r)
}

// writeBatchDenial answers a request some layer denied: the most
// restrictive denial's decision, with Retry-After the longest wait.
func (p *proxy) writeBatchDenial(w http.ResponseWriter, as []httpwire.Answer) api.Result {
	o := httpwire.Outcome(as, false)
	if !o.Limited {
		p.WriteFull(w, o.Retry)
		return o.Res
	}
	a := as[o.Binding]
	a.D.RetryAfter = o.Retry
	p.WriteDecision(w, &a, false)
	return api.ResultDenied
}

// recordRule tells the metrics, if they count by rule, what a check of the
// named rule came to.
func (p *proxy) recordRule(rule string, res api.Result) {
	if p.byRule != nil {
		p.byRule.CheckedRule(rule, res)
	}
}

// record records a decision in the metrics, if any.
func (p *proxy) record(start time.Time, res api.Result) {
	if p.metrics != nil {
		p.metrics.Checked(res, start)
	}
}
