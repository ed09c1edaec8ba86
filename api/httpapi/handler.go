package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/internal/httpwire"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// MaxBodyBytes is the largest POST /check_rate or /refund body accepted; a
// larger one is answered 400 (not 413, which means "denied"). It holds a
// batch of table.MaxBatch checks of about 250 bytes each.
const MaxBodyBytes = httpwire.MaxBodyBytes

// Metrics is what the handler records its answers in and serves on GET
// /metrics; *metrics.Metrics is one.
type Metrics interface {
	api.Recorder
	Handler() http.Handler
}

// Options configures NewHandler. The zero value is ready to use.
type Options struct {
	// DenyStatus is the status of a denied check: 413 (the default, when
	// zero) or 429.
	DenyStatus int
	// Metrics, when set, records every check and is served on GET /metrics.
	// When nil there is no /metrics route and nothing is recorded. If it is
	// also an api.RuleRecorder, every check of a named rule is told to it
	// too (each of a batch's).
	Metrics Metrics
	// Logger receives unexpected Checker errors. Nil discards them.
	Logger *slog.Logger
	// Rules holds the named rules that checks may use (rule=NAME). Nil
	// means no rules: a check by rule is answered 400. Changes to the
	// Store are seen by the very next check.
	Rules *rules.Store
	// Routes serves more paths beside the check API, each by its exact
	// path (the daemon mounts Envoy RLS's POST /json here); each handler
	// answers its own methods. A path of the check API is refused.
	Routes map[string]http.Handler
}

// Route paths.
const (
	pathCheckRate = "/check_rate"
	pathRefund    = "/refund"
	pathHealthz   = "/healthz"
	pathMetrics   = "/metrics"
)

// handler serves the routes of NewHandler.
type handler struct {
	httpwire.Responder
	checker  api.Checker
	reserver api.Reserver     // checker, if it is one
	rules    *rules.Store     // nil: no rules
	metrics  Metrics          // nil: nothing recorded
	byRule   api.RuleRecorder // metrics, if it is one; else nil
	promh    http.Handler
	routes   map[string]http.Handler // Options.Routes
	log      *slog.Logger
	batches  sync.Pool // of *batchBuf
}

// batchBuf is memory for the batch of one /check_rate request, reused
// through handler.batches: the checks of a batch, their requests and their
// answers. A pooled batchBuf keeps the strings of its last batch (slices of that
// request's body) reachable until it is reused or the pool drops it.
type batchBuf struct {
	ps   []httpwire.Params
	as   []httpwire.Answer
	reqs []table.Request
	decs []table.Decision
}

// NewHandler returns the HTTP handler of ratelimitd: GET and POST
// /check_rate and /refund, GET /healthz and, when opts.Metrics is set, GET
// /metrics (README.md is their contract), and opts.Routes. A known path with the wrong
// method is answered 405 with an Allow header, an unknown path 404, both
// with a JSON error body. The handler is safe for concurrent use.
func NewHandler(c api.Checker, opts Options) (http.Handler, error) {
	deny, err := httpwire.CheckOptions(c, opts.DenyStatus)
	if err != nil {
		return nil, err
	}
	for p, rh := range opts.Routes {
		switch p {
		case pathCheckRate, pathRefund, pathHealthz, pathMetrics:
			return nil, fmt.Errorf("%w: Routes: %s is a route of the check API", api.ErrInvalidOption, p)
		}
		if rh == nil {
			return nil, fmt.Errorf("%w: Routes: the handler of %s is nil", api.ErrInvalidOption, p)
		}
	}
	h := &handler{
		Responder: httpwire.Responder{DenyStatus: deny},
		checker:   c,
		rules:     opts.Rules,
		metrics:   opts.Metrics,
		routes:    opts.Routes,
		log:       opts.Logger,
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.reserver, _ = c.(api.Reserver)
	if h.metrics != nil {
		h.promh = h.metrics.Handler()
		h.byRule, _ = h.metrics.(api.RuleRecorder)
	}
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case pathCheckRate, pathRefund:
		switch {
		case r.Method != http.MethodGet && r.Method != http.MethodPost:
			h.MethodNotAllowed(w, r, "GET, POST")
		case r.URL.Path == pathCheckRate:
			h.checkRate(w, r)
		default:
			h.refund(w, r)
		}
	case pathHealthz:
		if !httpwire.IsGetOrHead(r) {
			h.MethodNotAllowed(w, r, "GET, HEAD")
			return
		}
		httpwire.WriteHealthz(w)
	case pathMetrics:
		if h.promh == nil {
			h.NotFound(w, r)
			return
		}
		if !httpwire.IsGetOrHead(r) {
			h.MethodNotAllowed(w, r, "GET, HEAD")
			return
		}
		h.promh.ServeHTTP(w, r)
	default:
		if rh, ok := h.routes[r.URL.Path]; ok {
			rh.ServeHTTP(w, r)
			return
		}
		h.NotFound(w, r)
	}
}

// ruleSet returns the current rules, or nil when there are none.
func (h *handler) ruleSet() *rules.Set {
	if h.rules == nil {
		return nil
	}
	return h.rules.Current()
}

// checkRate serves GET and POST /check_rate.
func (h *handler) checkRate(w http.ResponseWriter, r *http.Request) {
	var start time.Time
	if h.metrics != nil {
		start = time.Now()
	}
	buf, _ := h.batches.Get().(*batchBuf)
	if buf == nil {
		buf = new(batchBuf)
	}
	defer h.batches.Put(buf)
	body, err := h.ReadParams(w, r, httpwire.ModeCheck, buf.ps[:0])
	if err != nil {
		h.BadRequest(w, err)
		h.record(api.ResultInvalid, start)
		return
	}
	if body.Batch != nil {
		buf.ps = body.Batch
		h.record(h.checkBatch(w, r, body.Batch, buf), start)
		return
	}
	h.record(h.checkOne(w, r, &body.One), start)
}

// checkOne answers one check and returns the result to record.
func (h *handler) checkOne(w http.ResponseWriter, r *http.Request, p *httpwire.Params) api.Result {
	req, rule, err := httpwire.Resolve(p, h.ruleSet())
	if err != nil {
		h.BadRequest(w, err)
		return api.ResultInvalid
	}
	var res table.Reservation
	if h.reserver != nil {
		res, err = h.reserver.Reserve(r.Context(), req)
	} else {
		res.Decision, err = h.checker.Check(r.Context(), req)
	}
	if err != nil {
		return h.checkFailed(r.Context(), w, "check_rate", err)
	}
	a := httpwire.Answer{ID: req.ID, Rule: rule.Name, Scale: req.Scale, D: res.Decision, Window: res.Window, Shadow: rule.Shadow}
	d := res.Decision
	if a.Denied() && d.Full {
		h.WriteFull(w, d.RetryAfter)
	} else {
		h.WriteDecision(w, &a, false)
	}
	h.recordRule(&a)
	return a.Result()
}

// checkBatch answers a batch of checks, all or nothing, and returns the
// result to record. The checks of shadow rules are not part of the
// all-or-nothing CheckAll (they never deny): they are counted one by one
// after an admitted batch, and only peeked at after a denied one, so a
// denied batch consumes nothing.
func (h *handler) checkBatch(w http.ResponseWriter, r *http.Request, ps []httpwire.Params, buf *batchBuf) api.Result {
	set := h.ruleSet() // one version of the rules for the whole batch
	as := slices.Grow(buf.as[:0], len(ps))[:len(ps)]
	buf.as = as
	reqs := slices.Grow(buf.reqs[:0], len(ps))[:len(ps)]
	buf.reqs = reqs
	shadows := 0
	for i := range ps {
		req, rule, err := httpwire.Resolve(&ps[i], set)
		if err != nil {
			// A fault of an ad-hoc check, anywhere, comes before it: the
			// parse that found it too checked each element whole.
			h.BadRequest(w, httpwire.FirstFault(ps, true, httpwire.ElemErr(i, err)))
			return api.ResultInvalid
		}
		reqs[i] = req
		as[i] = httpwire.Answer{ID: req.ID, Rule: rule.Name, Scale: req.Scale, Shadow: rule.Shadow}
		if rule.Shadow {
			shadows++
		}
	}
	// CheckAll decides the checks not of shadow rules: all of reqs when
	// there are none, else the enforced ones, orig[j] being the element of
	// enforced[j].
	enforced, orig := reqs, []int(nil)
	if shadows > 0 {
		enforced = make([]table.Request, 0, len(ps)-shadows)
		orig = make([]int, 0, len(ps)-shadows)
		for i := range reqs {
			if !as[i].Shadow {
				enforced = append(enforced, reqs[i])
				orig = append(orig, i)
			}
		}
	}
	ctx := r.Context()
	allowed := true
	if len(enforced) > 0 {
		ds, ok, err := api.AppendCheckAll(ctx, h.checker, buf.decs[:0], enforced)
		buf.decs = ds
		if err == nil && len(ds) != len(enforced) {
			err = fmt.Errorf("CheckAll returned %d decisions for %d checks", len(ds), len(enforced))
		}
		if err != nil {
			if orig != nil {
				err = renumber(err, orig)
			}
			return h.checkFailed(ctx, w, "check_rate batch", err)
		}
		if orig == nil {
			for i := range ds {
				as[i].D = ds[i]
			}
		} else {
			for j, i := range orig {
				as[i].D = ds[j]
			}
		}
		allowed = ok
	}
	for i := range as {
		if !as[i].Shadow {
			continue
		}
		req := reqs[i]
		if !allowed {
			req.Hits = 0
		}
		d, err := h.checker.Check(ctx, req)
		if err != nil {
			return h.checkFailed(ctx, w, "check_rate batch", err)
		}
		as[i].D = d
	}
	for i := range as {
		h.recordRule(&as[i])
	}
	return h.WriteBatch(w, as, allowed)
}

// renumber makes an error of CheckAll about its check j (a
// *table.IndexError) one about element orig[j] of the batch, which differs
// when shadow checks were left out. Other errors are returned as they are.
func renumber(err error, orig []int) error {
	var ie *table.IndexError
	if !errors.As(err, &ie) || ie.Index < 0 || ie.Index >= len(orig) {
		return err
	}
	return &table.IndexError{Index: orig[ie.Index], Err: ie.Err}
}

// refund serves GET and POST /refund.
func (h *handler) refund(w http.ResponseWriter, r *http.Request) {
	body, err := h.ReadParams(w, r, httpwire.ModeRefund, nil)
	if err != nil {
		h.BadRequest(w, err)
		return
	}
	req, rule, err := httpwire.Resolve(&body.One, h.ruleSet())
	if err != nil {
		h.BadRequest(w, err)
		return
	}
	d, err := h.checker.Refund(r.Context(), req)
	if err != nil {
		h.checkFailed(r.Context(), w, "refund", err)
		return
	}
	a := httpwire.Answer{ID: req.ID, Rule: rule.Name, Scale: req.Scale, D: d, Shadow: rule.Shadow}
	h.WriteDecision(w, &a, true)
	h.refunded()
}

// checkFailed answers a Checker error: 400 for an invalid request, 503 for
// anything else (logged, as from op, unless it is a known transient
// condition). It returns the result to record.
func (h *handler) checkFailed(ctx context.Context, w http.ResponseWriter, op string, err error) api.Result {
	res := h.AnswerCheckError(w, err)
	httpwire.LogFailure(ctx, h.log, op, res, err)
	return res
}

// record counts one check request in the metrics, if any.
func (h *handler) record(res api.Result, start time.Time) {
	if h.metrics != nil {
		h.metrics.Checked(res, start)
	}
}

// recordRule tells the metrics, if they count by rule, what a check of a
// named rule came to.
func (h *handler) recordRule(a *httpwire.Answer) {
	if h.byRule != nil && a.Rule != "" {
		h.byRule.CheckedRule(a.Rule, a.Result())
	}
}

// refunded counts one refund in the metrics, if any.
func (h *handler) refunded() {
	if h.metrics != nil {
		h.metrics.Refunded()
	}
}
