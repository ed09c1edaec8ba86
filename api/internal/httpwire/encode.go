package httpwire

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/internal/jsonstr"
	"github.com/ratelimitd/ratelimitd/table"
)

// Canonical header keys (textproto.CanonicalMIMEHeaderKey form), so headers
// are set by map assignment without canonicalizing on every response.
const (
	HdrContentType     = "Content-Type"
	HdrCacheControl    = "Cache-Control"
	HdrRetryAfter      = "Retry-After"
	HdrAllow           = "Allow"
	hdrRateLimit       = "Ratelimit"        // RateLimit
	hdrRateLimitPolicy = "Ratelimit-Policy" // RateLimit-Policy
	hdrRateLimitWindow = "Ratelimit-Window" // where admitted hits were counted, for /refund
	hdrContentLength   = "Content-Length"
)

// Header values of every JSON answer.
const (
	CTJSON  = "application/json"
	NoStore = "no-store"
)

// Responder writes check_rate answers and JSON errors. Every HTTP transport
// shares it, so that all speak exactly the same format.
type Responder struct {
	DenyStatus         int
	NoRateLimitHeaders bool      // leave RateLimit and RateLimit-Policy off (the middleware's option)
	bufs               sync.Pool // of *[]byte
}

// maxPooledBuf is the largest buffer returned to the pool: enough for the
// body of a batch of a few hundred checks, and for its answer.
const maxPooledBuf = 64 << 10

func (rs *Responder) getBuf() *[]byte {
	if p, ok := rs.bufs.Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 0, 512)
	return &b
}

func (rs *Responder) putBuf(p *[]byte) {
	if cap(*p) > maxPooledBuf {
		return
	}
	*p = (*p)[:0]
	rs.bufs.Put(p)
}

// Answer is a decision with what its response needs.
type Answer struct {
	ID    string
	Rule  string        // the rule checked, or "" for an ad-hoc check
	Scale time.Duration // the window
	D     table.Decision
	// Window is where the hits were counted (table.Reservation.Window),
	// sent for a later refund of them; 0 when nothing was counted.
	Window int64
	// Shadow says the rule is a shadow rule: a denial is reported, never
	// enforced.
	Shadow bool
}

// Denied reports whether a denies the request: a denial not of a shadow rule.
func (a *Answer) Denied() bool { return !a.D.Allowed && !a.Shadow }

// ShadowDenied reports whether a is a shadow rule's denial, let through.
func (a *Answer) ShadowDenied() bool { return !a.D.Allowed && a.Shadow }

// Result is what a check answered with a counts as in the metrics.
func (a *Answer) Result() api.Result {
	switch {
	case a.D.Full:
		return api.ResultFull
	case a.D.Allowed:
		return api.ResultAllowed
	case a.Shadow:
		return api.ResultShadowDenied
	}
	return api.ResultDenied
}

// policyName returns the name of the RateLimit policy of a: its rule's
// name (a token of [a-z0-9_.-], safe in a quoted string), or
// api.DefaultPolicy.
func (a *Answer) policyName() string {
	if a.Rule != "" {
		return a.Rule
	}
	return api.DefaultPolicy
}

// appendRateLimit appends the RateLimit fields of a (api.AppendRateLimit).
func appendRateLimit(b []byte, a *Answer) ([]byte, int) {
	return api.AppendRateLimit(b, a.policyName(), a.Scale, &a.D)
}

// SetRateLimitHeaders sets RateLimit-Policy and RateLimit on h for a. The
// middleware uses it before calling the next handler.
func (rs *Responder) SetRateLimitHeaders(h http.Header, a *Answer) {
	p := rs.getBuf()
	b, mid := appendRateLimit(*p, a)
	s := string(b)
	*p = b
	rs.putBuf(p)
	vals := make([]string, 2)
	vals[0], vals[1] = s[:mid], s[mid:]
	h[hdrRateLimitPolicy] = vals[0:1:1]
	h[hdrRateLimit] = vals[1:2:2]
}

// WriteDecision answers a check: 200 when allowed (or let through by a
// shadow rule), rs.DenyStatus with Retry-After when denied; the RateLimit
// headers and the JSON body either way. An answer to a refund (refund
// true) is always 200, without Retry-After.
func (rs *Responder) WriteDecision(w http.ResponseWriter, a *Answer, refund bool) {
	p := rs.getBuf()
	b, mid := appendRateLimit(*p, a)
	end := len(b)
	status := http.StatusOK
	deny := a.Denied() && !refund
	if deny {
		status = rs.DenyStatus
		b = strconv.AppendInt(b, api.RetryAfter(a.D.RetryAfter), 10)
	}
	retryEnd := len(b)
	if a.Window != 0 {
		b = strconv.AppendInt(b, a.Window, 10)
	}
	s := string(b) // one allocation for every dynamic header value

	// One allocation for the value slices of all six headers; each gets a
	// full slice expression so that an append by a later handler copies.
	vals := make([]string, 6)
	vals[0], vals[1], vals[2], vals[3] = CTJSON, NoStore, s[:mid], s[mid:end]
	h := w.Header()
	h[HdrContentType] = vals[0:1:1]
	h[HdrCacheControl] = vals[1:2:2]
	h[hdrRateLimitPolicy] = vals[2:3:3]
	h[hdrRateLimit] = vals[3:4:4]
	if deny {
		vals[4] = s[end:retryEnd]
		h[HdrRetryAfter] = vals[4:5:5]
	}
	if a.Window != 0 {
		vals[5] = s[retryEnd:]
		h[hdrRateLimitWindow] = vals[5:6:6]
	}
	if rs.NoRateLimitHeaders {
		delete(h, hdrRateLimitPolicy)
		delete(h, hdrRateLimit)
	}

	b = appendDecisionJSON(b[:0], a)
	w.WriteHeader(status)
	_, _ = w.Write(b)
	*p = b
	rs.putBuf(p)
}

// appendDecisionJSON appends the check_rate body of a: allowed is true for
// a shadow rule's denial, which also gets "shadow_denied":true; "rule" is
// there for a check by rule.
func appendDecisionJSON(b []byte, a *Answer) []byte {
	var nums batchNums
	return nums.appendDecision(b, a)
}

// batchNums keeps the text of the numbers of a batch's answers that
// mostly repeat from one answer to the next (limit, reset, retry), so that
// each is formatted once per change, not once per answer.
type batchNums struct {
	limit, reset, retry numText
}

// numText is the decimal text of the last value it was asked for.
type numText struct {
	v   int64
	n   uint8 // the text's length; 0 before the first value
	txt [20]byte
}

// append appends the decimal text of v to b.
func (c *numText) append(b []byte, v int64) []byte {
	if c.n == 0 || c.v != v {
		c.v, c.n = v, uint8(len(strconv.AppendInt(c.txt[:0], v, 10)))
	}
	return append(b, c.txt[:c.n]...)
}

// appendDecision is appendDecisionJSON with the repeated numbers from nums.
func (nums *batchNums) appendDecision(b []byte, a *Answer) []byte {
	d := &a.D
	if d.Allowed || a.Shadow {
		b = append(b, `{"allowed":true,"id":`...)
	} else {
		b = append(b, `{"allowed":false,"id":`...)
	}
	b = jsonstr.Append(b, a.ID)
	if a.Rule != "" {
		b = append(b, `,"rule":`...)
		b = jsonstr.Append(b, a.Rule)
	}
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, d.Count, 10)
	b = append(b, `,"limit":`...)
	b = nums.limit.append(b, d.Limit)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, `,"reset_ms":`...)
	b = nums.reset.append(b, api.Ceil(d.ResetAfter, time.Millisecond))
	b = append(b, `,"retry_after_ms":`...)
	b = nums.retry.append(b, api.Ceil(d.RetryAfter, time.Millisecond))
	if a.ShadowDenied() {
		b = append(b, `,"shadow_denied":true`...)
	}
	return append(b, '}')
}

// BatchOutcome is what a batch of answers comes to.
type BatchOutcome struct {
	Allowed bool
	// Binding is the answer the RateLimit headers describe; -1 for none.
	Binding int
	// Limited reports a denial by a limit (not only by a full table).
	Limited bool
	// Retry is the longest RetryAfter of the denials.
	Retry time.Duration
	Res   api.Result
}

// Outcome sums up the answers of a batch whose checks were allowed (all
// or nothing) or not. The binding answer is, among the answers that count
// (the denials of a denied batch; else those not of shadow rules; else all),
// the one with the least remaining, and on a tie the longer wait (retry,
// then reset), then the first.
func Outcome(as []Answer, allowed bool) BatchOutcome {
	o := BatchOutcome{Allowed: allowed, Binding: -1, Res: api.ResultAllowed}
	counts := func(a *Answer) bool { return a.Denied() }
	if allowed {
		counts = func(a *Answer) bool { return !a.Shadow }
		if !slices.ContainsFunc(as, func(a Answer) bool { return !a.Shadow }) {
			counts = func(*Answer) bool { return true }
		}
	}
	for i := range as {
		a := &as[i]
		if a.ShadowDenied() && allowed {
			o.Res = api.ResultShadowDenied
		}
		if a.Denied() {
			o.Retry = max(o.Retry, a.D.RetryAfter)
			o.Limited = o.Limited || !a.D.Full
		}
		if !counts(a) {
			continue
		}
		if o.Binding < 0 || bindsMore(a, &as[o.Binding]) {
			o.Binding = i
		}
	}
	switch {
	case allowed:
	case o.Limited:
		o.Res = api.ResultDenied
	default:
		o.Res = api.ResultFull
	}
	return o
}

// bindsMore reports whether a is more restrictive than b.
func bindsMore(a, b *Answer) bool {
	switch {
	case a.D.Remaining != b.D.Remaining:
		return a.D.Remaining < b.D.Remaining
	case a.D.RetryAfter != b.D.RetryAfter:
		return a.D.RetryAfter > b.D.RetryAfter
	}
	return a.D.ResetAfter > b.D.ResetAfter
}

// WriteBatch answers a batch of checks, all or nothing: 200 when allowed,
// rs.DenyStatus with Retry-After (the longest wait of the denials) when
// denied by a limit, 503 when denied only because the table is full. The
// RateLimit headers describe the binding check (see outcome); the body is
// {"allowed":BOOL,"checks":[DECISION...]}. It returns the result to record.
func (rs *Responder) WriteBatch(w http.ResponseWriter, as []Answer, allowed bool) api.Result {
	o := Outcome(as, allowed)
	if !allowed && !o.Limited {
		rs.WriteFull(w, o.Retry)
		return o.Res
	}
	// The body first, then after it in the same buffer the dynamic header
	// values, made one string: the RateLimit fields of the binding answer,
	// Retry-After when denied, and the body's length. Past 2 KiB net/http
	// would send the body in chunks, the last one written apart: with its
	// length, a batch's answer takes one write less and the client parses
	// no chunks.
	p := rs.getBuf()
	b := append((*p)[:0], `{"allowed":`...)
	b = strconv.AppendBool(b, allowed)
	b = append(b, `,"checks":[`...)
	var nums batchNums
	for i := range as {
		if i > 0 {
			b = append(b, ',')
		}
		b = nums.appendDecision(b, &as[i])
	}
	b = append(b, "]}"...)
	body := len(b)
	mid, end := body, body
	if o.Binding >= 0 {
		b, mid = appendRateLimit(b, &as[o.Binding])
		end = len(b)
	}
	if !allowed {
		b = strconv.AppendInt(b, api.RetryAfter(o.Retry), 10)
	}
	retry := len(b)
	b = strconv.AppendInt(b, int64(body), 10)
	s := string(b[body:])
	vals := make([]string, 6) // each header gets a full slice expression, as in writeDecision
	vals[0], vals[1], vals[5] = CTJSON, NoStore, s[retry-body:]
	h := w.Header()
	h[HdrContentType] = vals[0:1:1]
	h[HdrCacheControl] = vals[1:2:2]
	h[hdrContentLength] = vals[5:6:6]
	if o.Binding >= 0 {
		vals[2], vals[3] = s[:mid-body], s[mid-body:end-body]
		h[hdrRateLimitPolicy] = vals[2:3:3]
		h[hdrRateLimit] = vals[3:4:4]
	}
	status := http.StatusOK
	if !allowed {
		status = rs.DenyStatus
		vals[4] = s[end-body : retry-body]
		h[HdrRetryAfter] = vals[4:5:5]
	}
	w.WriteHeader(status)
	_, _ = w.Write(b[:body])
	*p = b
	rs.putBuf(p)
	return o.Res
}

// msgFull is the error of a check refused because the table is full.
const msgFull = "the rate limiter is full (max buckets); retry"

// WriteFull answers 503 for a check the table had no room for, with the
// Retry-After of retry, the decision's RetryAfter: the table's is 1 s, as
// room comes back when buckets expire, not at a time it can name.
func (rs *Responder) WriteFull(w http.ResponseWriter, retry time.Duration) {
	rs.writeErrorRetry(w, http.StatusServiceUnavailable, "", msgFull, api.RetryAfter(retry))
}

// WriteError answers status with the JSON body {"error":msg,"field":field}.
// A 503 also carries Retry-After: 1.
func (rs *Responder) WriteError(w http.ResponseWriter, status int, field, msg string) {
	rs.writeErrorRetry(w, status, field, msg, 1)
}

// writeErrorRetry is writeError with the Retry-After of a 503 in seconds.
func (rs *Responder) writeErrorRetry(w http.ResponseWriter, status int, field, msg string, retry int64) {
	p := rs.getBuf()
	b := append(*p, `{"error":`...)
	b = jsonstr.Append(b, msg)
	b = append(b, `,"field":`...)
	b = jsonstr.Append(b, field)
	b = append(b, '}')
	h := w.Header()
	h[HdrContentType] = []string{CTJSON}
	h[HdrCacheControl] = []string{NoStore}
	if status == http.StatusServiceUnavailable {
		h[HdrRetryAfter] = []string{strconv.FormatInt(retry, 10)}
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
	*p = b
	rs.putBuf(p)
}

// writeFieldError answers 400 for a field error.
func (rs *Responder) writeFieldError(w http.ResponseWriter, fe *table.FieldError) {
	rs.WriteError(w, http.StatusBadRequest, fe.Field, fe.Error())
}
