package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// ErrInvalidOption is matched (errors.Is) by every error NewHandler,
// NewAdminHandler and Middleware return for options they cannot use.
var ErrInvalidOption = errors.New("api: invalid option")

// Checker decides rate-limit checks. *actors.System is one; tests and
// embedders may supply their own. Its methods must be safe for concurrent
// use; see actors.System for their contracts.
type Checker interface {
	// Check counts req against its limit and returns the decision.
	Check(ctx context.Context, req table.Request) (table.Decision, error)
	// CheckAll checks reqs all or nothing: allowed only if every one is
	// admitted, and then each is counted; otherwise nothing is consumed.
	// The decisions are in the order of reqs.
	CheckAll(ctx context.Context, reqs []table.Request) ([]table.Decision, bool, error)
	// Refund gives back up to req.Hits (≥ 1) hits to req's bucket and
	// returns the decision a peek gets afterwards.
	Refund(ctx context.Context, req table.Request) (table.Decision, error)
}

// Reserver is a Checker that also says where a check's hits were counted
// (table.Reservation.Window), so that the check_rate answer can tell the
// client which window a later /refund of them is for. *actors.System is one.
type Reserver interface {
	Reserve(ctx context.Context, req table.Request) (table.Reservation, error)
}

var (
	_ Checker  = (*actors.System)(nil)
	_ Reserver = (*actors.System)(nil)
)

// Options configures NewHandler. The zero value is ready to use.
type Options struct {
	// DenyStatus is the status of a denied check: 413 (the default, when
	// zero) or 429.
	DenyStatus int
	// Metrics, when set, records every check and is served on GET /metrics.
	// When nil there is no /metrics route and nothing is recorded.
	Metrics *Metrics
	// Logger receives unexpected Checker errors. Nil discards them.
	Logger *slog.Logger
	// Rules holds the named rules that checks may use (rule=NAME). Nil
	// means no rules: a check by rule is answered 400. Changes to the
	// Store are seen by the very next check.
	Rules *rules.Store
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
	responder
	checker  Checker
	reserver Reserver     // checker, if it is one
	rules    *rules.Store // nil: no rules
	metrics  *Metrics
	promh    http.Handler
	log      *slog.Logger
	batches  sync.Pool // of *batchBuf
}

// batchBuf is memory for the batch of one /check_rate request, reused
// through handler.batches: the checks of a batch and their answers. A
// pooled batchBuf keeps the strings of its last batch (slices of that
// request's body) reachable until it is reused or the pool drops it.
type batchBuf struct {
	ps []params
	as []answer
}

// NewHandler returns the HTTP handler of ratelimitd: GET and POST
// /check_rate and /refund, GET /healthz and, when opts.Metrics is set, GET
// /metrics (see the package documentation). A known path with the wrong
// method is answered 405 with an Allow header, an unknown path 404, both
// with a JSON error body. The handler is safe for concurrent use.
func NewHandler(c Checker, opts Options) (http.Handler, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: Checker is nil", ErrInvalidOption)
	}
	deny, err := denyStatus(opts.DenyStatus)
	if err != nil {
		return nil, err
	}
	h := &handler{
		responder: responder{denyStatus: deny},
		checker:   c,
		rules:     opts.Rules,
		metrics:   opts.Metrics,
		log:       opts.Logger,
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.reserver, _ = c.(Reserver)
	if h.metrics != nil {
		h.promh = h.metrics.Handler()
	}
	return h, nil
}

// denyStatus validates a DenyStatus option; 0 means 413.
func denyStatus(s int) (int, error) {
	switch s {
	case 0:
		return http.StatusRequestEntityTooLarge, nil
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		return s, nil
	}
	return 0, fmt.Errorf("%w: DenyStatus must be 413 or 429, got %d", ErrInvalidOption, s)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case pathCheckRate:
		switch r.Method {
		case http.MethodGet, http.MethodPost:
			h.checkRate(w, r)
		default:
			h.methodNotAllowed(w, r, "GET, POST")
		}
	case pathRefund:
		switch r.Method {
		case http.MethodGet, http.MethodPost:
			h.refund(w, r)
		default:
			h.methodNotAllowed(w, r, "GET, POST")
		}
	case pathHealthz:
		if !isGetOrHead(r) {
			h.methodNotAllowed(w, r, "GET, HEAD")
			return
		}
		writeHealthz(w)
	case pathMetrics:
		if h.promh == nil {
			h.notFound(w, r)
			return
		}
		if !isGetOrHead(r) {
			h.methodNotAllowed(w, r, "GET, HEAD")
			return
		}
		h.promh.ServeHTTP(w, r)
	default:
		h.notFound(w, r)
	}
}

// writeHealthz answers GET /healthz.
func writeHealthz(w http.ResponseWriter) {
	hdr := w.Header()
	hdr[hdrContentType] = []string{ctJSON}
	hdr[hdrCacheControl] = []string{noStore}
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

func isGetOrHead(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead
}

func (rs *responder) methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header()[hdrAllow] = []string{allow}
	rs.writeError(w, http.StatusMethodNotAllowed, "", "method "+r.Method+" is not allowed on "+r.URL.Path+"; use "+allow)
}

func (rs *responder) notFound(w http.ResponseWriter, r *http.Request) {
	rs.writeError(w, http.StatusNotFound, "", "no such path: "+r.URL.Path)
}

// ruleSet returns the current rules, or nil when there are none.
func (h *handler) ruleSet() *rules.Set {
	if h.rules == nil {
		return nil
	}
	return h.rules.Current()
}

// readParams reads the parameters of a GET (query) or POST (JSON body)
// request for m. Only modeCheck may return a batch, in the memory of batch
// if it is large enough.
func (rs *responder) readParams(w http.ResponseWriter, r *http.Request, m mode, batch []params) (checkBody, error) {
	if r.Method == http.MethodGet {
		p, err := parseQuery(r.URL.RawQuery, m)
		return checkBody{one: p}, err
	}
	if r.URL.RawQuery != "" {
		return checkBody{}, fieldErr("query", msgQueryPost)
	}
	return rs.readJSON(w, r, m, batch)
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
	body, err := h.readParams(w, r, modeCheck, buf.ps[:0])
	if err != nil {
		h.badRequest(w, err)
		h.metrics.record(resultInvalid, start)
		return
	}
	if body.batch != nil {
		buf.ps = body.batch
		h.metrics.record(h.checkBatch(w, r, body.batch, buf), start)
		return
	}
	h.metrics.record(h.checkOne(w, r, &body.one), start)
}

// checkOne answers one check and returns the result to record.
func (h *handler) checkOne(w http.ResponseWriter, r *http.Request, p *params) result {
	req, rule, err := resolve(p, h.ruleSet())
	if err != nil {
		h.badRequest(w, err)
		return resultInvalid
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
	a := answer{id: req.ID, rule: rule.Name, scale: req.Scale, d: res.Decision, window: res.Window, shadow: rule.Shadow}
	d := res.Decision
	if a.denied() && d.Full {
		h.writeFull(w, d.RetryAfter)
	} else {
		h.writeDecision(w, &a, false)
	}
	return a.result()
}

// checkBatch answers a batch of checks, all or nothing, and returns the
// result to record. The checks of shadow rules are not part of the
// all-or-nothing CheckAll (they never deny): they are counted one by one
// after an admitted batch, and only peeked at after a denied one, so a
// denied batch consumes nothing.
func (h *handler) checkBatch(w http.ResponseWriter, r *http.Request, ps []params, buf *batchBuf) result {
	set := h.ruleSet() // one version of the rules for the whole batch
	as := slices.Grow(buf.as[:0], len(ps))[:len(ps)]
	buf.as = as
	reqs := make([]table.Request, len(ps))
	shadows := 0
	for i := range ps {
		req, rule, err := resolve(&ps[i], set)
		if err != nil {
			// A fault of an ad-hoc check, anywhere, comes before it: the
			// parse that found it too checked each element whole.
			h.badRequest(w, firstFault(ps, true, elemErr(i, err)))
			return resultInvalid
		}
		reqs[i] = req
		as[i] = answer{id: req.ID, rule: rule.Name, scale: req.Scale, shadow: rule.Shadow}
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
			if !as[i].shadow {
				enforced = append(enforced, reqs[i])
				orig = append(orig, i)
			}
		}
	}
	ctx := r.Context()
	allowed := true
	if len(enforced) > 0 {
		ds, ok, err := h.checker.CheckAll(ctx, enforced)
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
				as[i].d = ds[i]
			}
		} else {
			for j, i := range orig {
				as[i].d = ds[j]
			}
		}
		allowed = ok
	}
	for i := range as {
		if !as[i].shadow {
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
		as[i].d = d
	}
	return h.writeBatch(w, as, allowed)
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
	body, err := h.readParams(w, r, modeRefund, nil)
	if err != nil {
		h.badRequest(w, err)
		return
	}
	req, rule, err := resolve(&body.one, h.ruleSet())
	if err != nil {
		h.badRequest(w, err)
		return
	}
	d, err := h.checker.Refund(r.Context(), req)
	if err != nil {
		h.checkFailed(r.Context(), w, "refund", err)
		return
	}
	a := answer{id: req.ID, rule: rule.Name, scale: req.Scale, d: d, shadow: rule.Shadow}
	h.writeDecision(w, &a, true)
	h.metrics.refunded()
}

// badRequest answers 400 for an error that matches table.ErrInvalid,
// naming the field of a batch element (a *table.IndexError) as
// "checks[I].FIELD".
func (rs *responder) badRequest(w http.ResponseWriter, err error) {
	var ie *table.IndexError
	var fe *table.FieldError
	switch {
	case errors.As(err, &ie) && errors.As(ie.Err, &fe):
		field := ie.Field(fe.Field)
		rs.writeError(w, http.StatusBadRequest, field, field+": "+fe.Message)
		return
	case errors.As(err, &fe):
		rs.writeFieldError(w, fe)
		return
	}
	rs.writeError(w, http.StatusBadRequest, "", err.Error())
}

// checkFailed answers a Checker error: 400 for an invalid request, 503 for
// anything else (logged, as from op, unless it is a known transient
// condition). It returns the result to record.
func (h *handler) checkFailed(ctx context.Context, w http.ResponseWriter, op string, err error) result {
	res := h.answerCheckError(w, err)
	logFailure(ctx, h.log, op, res, err)
	return res
}

// logFailure logs a backend error of op that was answered as res, unless it
// is a 400 or a known transient condition.
func logFailure(ctx context.Context, log *slog.Logger, op string, res result, err error) {
	switch {
	case res != resultError, isTransient(err):
	case errors.Is(err, actors.ErrUnavailable):
		log.WarnContext(ctx, op+": shard owner unavailable", "err", err)
	default:
		log.ErrorContext(ctx, op+": rate limiter failed", "err", err)
	}
}

// answerCheckError writes the response for a Checker error and returns the
// result to record.
func (rs *responder) answerCheckError(w http.ResponseWriter, err error) result {
	if errors.Is(err, table.ErrInvalid) {
		rs.badRequest(w, err)
		return resultInvalid
	}
	var msg string
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		msg = "the check was canceled or timed out; retry"
	case errors.Is(err, actors.ErrStopped):
		msg = "the rate limiter is shutting down; retry"
	case errors.Is(err, actors.ErrUnavailable):
		msg = "the rate limiter is temporarily unavailable; retry"
	default:
		msg = "the rate limiter failed; retry"
	}
	rs.writeError(w, http.StatusServiceUnavailable, "", msg)
	return resultError
}

// isTransient reports whether err is an expected 503 cause not worth a log
// line: the client went away or timed out, or the system is stopping.
func isTransient(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, actors.ErrStopped)
}
