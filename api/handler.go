package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/table"
)

// ErrInvalidOption is matched (errors.Is) by every error NewHandler and
// Middleware return for options they cannot use.
var ErrInvalidOption = errors.New("api: invalid option")

// Checker decides rate-limit checks. *actors.System is one; tests and
// embedders may supply their own. Check must be safe for concurrent use.
type Checker interface {
	Check(ctx context.Context, req table.Request) (table.Decision, error)
}

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
}

// Route paths.
const (
	pathCheckRate = "/check_rate"
	pathHealthz   = "/healthz"
	pathMetrics   = "/metrics"
)

// handler serves the routes of NewHandler.
type handler struct {
	responder
	checker Checker
	metrics *Metrics
	promh   http.Handler
	log     *slog.Logger
}

// NewHandler returns the HTTP handler of ratelimitd: GET and POST
// /check_rate, GET /healthz and, when opts.Metrics is set, GET /metrics.
// A known path with the wrong method is answered 405 with an Allow header,
// an unknown path 404, both with a JSON error body. The handler is safe for
// concurrent use.
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
		metrics:   opts.Metrics,
		log:       opts.Logger,
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
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
	case pathHealthz:
		if !isGetOrHead(r) {
			h.methodNotAllowed(w, r, "GET, HEAD")
			return
		}
		hdr := w.Header()
		hdr[hdrContentType] = []string{ctJSON}
		hdr[hdrCacheControl] = []string{noStore}
		_, _ = w.Write([]byte(`{"status":"ok"}`))
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

func isGetOrHead(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead
}

func (h *handler) methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header()[hdrAllow] = []string{allow}
	h.writeError(w, http.StatusMethodNotAllowed, "", "method "+r.Method+" is not allowed on "+r.URL.Path+"; use "+allow)
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.writeError(w, http.StatusNotFound, "", "no such path: "+r.URL.Path)
}

// checkRate serves GET and POST /check_rate.
func (h *handler) checkRate(w http.ResponseWriter, r *http.Request) {
	var start time.Time
	if h.metrics != nil {
		start = time.Now()
	}
	var req table.Request
	var err error
	if r.Method == http.MethodGet {
		req, err = parseQuery(r.URL.RawQuery)
	} else if r.URL.RawQuery != "" {
		err = fieldErr("query", ruleQueryPost)
	} else {
		req, err = readJSON(w, r)
	}
	if err != nil {
		h.badRequest(w, err)
		h.metrics.record(resultInvalid, start)
		return
	}
	d, err := h.checker.Check(r.Context(), req)
	if err != nil {
		h.metrics.record(h.checkFailed(r.Context(), w, err), start)
		return
	}
	h.writeDecision(w, req.ID, req.Scale, d)
	if d.Allowed {
		h.metrics.record(resultAllowed, start)
	} else {
		h.metrics.record(resultDenied, start)
	}
}

// badRequest answers 400 for an error that matches table.ErrInvalid.
func (rs *responder) badRequest(w http.ResponseWriter, err error) {
	var fe *table.FieldError
	if errors.As(err, &fe) {
		rs.writeFieldError(w, fe)
		return
	}
	rs.writeError(w, http.StatusBadRequest, "", err.Error())
}

// checkFailed answers a Checker error: 400 for an invalid request, 503 for
// anything else (logged unless it is a known transient condition). It
// returns the result to record.
func (h *handler) checkFailed(ctx context.Context, w http.ResponseWriter, err error) result {
	res := h.answerCheckError(w, err)
	switch {
	case res != resultError, isTransient(err):
	case errors.Is(err, actors.ErrUnavailable):
		h.log.WarnContext(ctx, "check_rate: shard owner unavailable", "err", err)
	default:
		h.log.ErrorContext(ctx, "check_rate: checker failed", "err", err)
	}
	return res
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
