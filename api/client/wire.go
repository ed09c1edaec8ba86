package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ratelimitd/ratelimitd/api/internal/jsonstr"
)

// Paths of the service (see package api).
const (
	pathCheckRate = "/check_rate"
	pathRefund    = "/refund"
)

// Operation names, as errors report them.
const (
	opCheck    = "GET /check_rate"
	opRefund   = "GET /refund"
	opCheckAll = "POST /check_rate"
)

// maxAnswer bounds the body of an answer read: a batch answer of the
// service's largest batch (1000 checks) is about 150 KiB.
const maxAnswer = 1 << 20

// reply is an answer of the service, read whole.
type reply struct {
	status int
	body   []byte
	// retry is the Retry-After of a 503 (0 when absent or unparsable).
	retry time.Duration
	// window is the Ratelimit-Window of an answer that counted hits (0
	// when absent or unparsable).
	window int64
}

// do sends req and reads its whole answer into *bp, which it may grow, so
// that the connection goes back to the pool. An error is the transport's
// (or a body over maxAnswer); statuses are the caller's to judge.
func (c *Client) do(req *http.Request, bp *[]byte) (reply, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		c.done()
		return reply{}, err
	}
	b, err := readBody(resp.Body, (*bp)[:0], resp.ContentLength)
	resp.Body.Close()
	c.done()
	*bp = b
	if err != nil {
		return reply{}, err
	}
	r := reply{status: resp.StatusCode, body: b}
	switch r.status {
	case http.StatusServiceUnavailable:
		r.retry = parseRetryAfter(resp.Header.Get("Retry-After"), c.clock.Now())
	case http.StatusOK:
		if v := resp.Header["Ratelimit-Window"]; len(v) == 1 {
			if w, err := strconv.ParseInt(v[0], 10, 64); err == nil && w > 0 {
				r.window = w
			}
		}
	}
	return r, nil
}

// errAnswerTooLarge is the cause of an answer over maxAnswer.
var errAnswerTooLarge = errors.New("answer larger than " + strconv.Itoa(maxAnswer) + " bytes")

// readBody appends the whole of r to b, at most maxAnswer bytes; n is the
// announced length (-1 if unknown).
func readBody(r io.Reader, b []byte, n int64) ([]byte, error) {
	if n > maxAnswer {
		return b, errAnswerTooLarge
	}
	if n > 0 && int64(cap(b)) < n+1 { // +1: room to read the EOF
		b = make([]byte, 0, n+1)
	}
	for {
		if len(b) == cap(b) {
			if len(b) >= maxAnswer {
				return b, errAnswerTooLarge
			}
			b = append(b, 0)[:len(b)]
		}
		k, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+k]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// parseRetryAfter parses a Retry-After value, delay-seconds or an
// HTTP-date (relative to now); 0 when absent, invalid or past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(math.MaxInt64/time.Second))) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return max(t.Sub(now), 0)
}

// unavailableError is a call the service did not answer. It matches
// ErrUnavailable and unwraps to its cause.
type unavailableError struct {
	op    string
	cause error
	// retry is the Retry-After of a 503, 0 when there was none.
	retry time.Duration
}

func (e *unavailableError) Error() string {
	s := ErrUnavailable.Error() + ": " + e.op + ": " + e.cause.Error()
	if e.retry > 0 {
		s += " (retry after " + e.retry.String() + ")"
	}
	return s
}

func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

func (e *unavailableError) Unwrap() error { return e.cause }

// transportFailed turns a transport error of op into the error of the
// call: the caller's context error if callerCtx has ended, else an
// unavailableError (an outage).
func (c *Client) transportFailed(callerCtx context.Context, op string, err error) error {
	if cerr := callerCtx.Err(); cerr != nil {
		if errors.Is(err, cerr) {
			return fmt.Errorf("client: %s: %w", op, err)
		}
		return fmt.Errorf("client: %s: %w (%v)", op, cerr, err)
	}
	// The *url.Error around err repeats the URL, which holds the id; op
	// says enough.
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	ue := &unavailableError{op: op, cause: err}
	c.unavailable(callerCtx, ue)
	return ue
}

// badAnswer is the error of an answer that is not a decision: ErrInvalid
// (wrapping a *FieldError) for a 400, else an unavailableError (an
// outage). cause, if set, says why an answer of a decision status could
// not be used.
func (c *Client) badAnswer(ctx context.Context, op string, r *reply, cause error) error {
	if r.status == http.StatusBadRequest {
		c.answered(ctx)
		return invalidErr(op, decodeFieldError(r.body))
	}
	if cause == nil {
		cause = fmt.Errorf("status %d: %s", r.status, errorText(r.body))
	}
	ue := &unavailableError{op: op, cause: cause, retry: r.retry}
	c.unavailable(ctx, ue)
	return ue
}

// isDecisionStatus reports whether status carries a decision: 200, or a
// denial (413, or 429 on a service configured so).
func isDecisionStatus(status int) bool {
	return status == http.StatusOK || status == http.StatusRequestEntityTooLarge ||
		status == http.StatusTooManyRequests
}

// appendQuery appends the query parameters of id spending hits under l
// (negative hits for a refund). Ad hoc, scale and limit are always sent;
// with a rule, only what is set, so that the service reports a field given
// with a rule.
func appendQuery(b []byte, id string, l *Limit, hits int64) []byte {
	b = append(b, "id="...)
	b = appendQueryEscape(b, id)
	b = append(b, "&hits="...)
	b = strconv.AppendInt(b, hits, 10)
	adHoc := l.Rule == ""
	if !adHoc {
		b = append(b, "&rule="...)
		b = appendQueryEscape(b, l.Rule)
	}
	if adHoc || l.Scale != 0 {
		b = append(b, "&scale="...)
		if ms, ok := wholeMs(l.Scale); ok {
			b = strconv.AppendInt(b, ms, 10)
		} else {
			b = appendQueryEscape(b, l.Scale.String())
		}
	}
	if adHoc || l.Limit != 0 {
		b = append(b, "&limit="...)
		b = strconv.AppendInt(b, l.Limit, 10)
	}
	if l.Algorithm != "" {
		b = append(b, "&algorithm="...)
		b = appendQueryEscape(b, l.Algorithm)
	}
	if l.Burst != 0 {
		b = append(b, "&burst="...)
		b = strconv.AppendInt(b, l.Burst, 10)
	}
	return b
}

// wholeMs returns d in milliseconds when it is a positive whole number of
// them; any other scale is sent as a Go duration, for the service to
// judge.
func wholeMs(d time.Duration) (int64, bool) {
	if d <= 0 || d%time.Millisecond != 0 {
		return 0, false
	}
	return int64(d / time.Millisecond), true
}

// appendCheckJSON appends the JSON object of check ch, with the same
// members as appendQuery's parameters.
func appendCheckJSON(b []byte, ch *Check) []byte {
	l := &ch.Limit
	b = append(b, `{"id":`...)
	b = jsonstr.Append(b, ch.ID)
	b = append(b, `,"hits":`...)
	b = strconv.AppendInt(b, ch.Hits, 10)
	adHoc := l.Rule == ""
	if !adHoc {
		b = append(b, `,"rule":`...)
		b = jsonstr.Append(b, l.Rule)
	}
	if adHoc || l.Scale != 0 {
		b = append(b, `,"scale":`...)
		if ms, ok := wholeMs(l.Scale); ok {
			b = strconv.AppendInt(b, ms, 10)
		} else {
			b = jsonstr.Append(b, l.Scale.String())
		}
	}
	if adHoc || l.Limit != 0 {
		b = append(b, `,"limit":`...)
		b = strconv.AppendInt(b, l.Limit, 10)
	}
	if l.Algorithm != "" {
		b = append(b, `,"algorithm":`...)
		b = jsonstr.Append(b, l.Algorithm)
	}
	if l.Burst != 0 {
		b = append(b, `,"burst":`...)
		b = strconv.AppendInt(b, l.Burst, 10)
	}
	return append(b, '}')
}

const upperHex = "0123456789ABCDEF"

// appendQueryEscape appends s escaped as url.QueryEscape does: unreserved
// bytes as they are, ' ' as '+', every other byte as %XX.
func appendQueryEscape(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~':
			b = append(b, c)
		case c == ' ':
			b = append(b, '+')
		default:
			b = append(b, '%', upperHex[c>>4], upperHex[c&0xf])
		}
	}
	return b
}

// errorText returns the "error" member of a JSON error body, or the body
// itself, cut short, when it is not one.
func errorText(body []byte) string {
	msg, _, ok := decodeErrorBody(body)
	if ok && msg != "" {
		return msg
	}
	const maxText = 200
	s := strings.TrimSpace(string(body[:min(len(body), maxText)]))
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if s == "" {
		return "(empty body)"
	}
	return strconv.Quote(s)
}

// decodeFieldError returns the *FieldError of a 400 body: the "error"
// member without its "FIELD: " prefix, and the "field" member.
func decodeFieldError(body []byte) *FieldError {
	msg, field, ok := decodeErrorBody(body)
	if !ok {
		return &FieldError{Message: errorText(body)}
	}
	if field != "" {
		msg = strings.TrimPrefix(msg, field+": ")
	}
	return &FieldError{Field: field, Message: msg}
}
