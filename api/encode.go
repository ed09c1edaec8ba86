package api

import (
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ratelimitd/ratelimitd/table"
)

// Canonical header keys (textproto.CanonicalMIMEHeaderKey form), so headers
// are set by map assignment without canonicalizing on every response.
const (
	hdrContentType     = "Content-Type"
	hdrCacheControl    = "Cache-Control"
	hdrRetryAfter      = "Retry-After"
	hdrAllow           = "Allow"
	hdrRateLimit       = "Ratelimit"        // RateLimit
	hdrRateLimitPolicy = "Ratelimit-Policy" // RateLimit-Policy
)

const (
	ctJSON  = "application/json"
	noStore = "no-store"
)

// responder writes check_rate answers and JSON errors. NewHandler and
// Middleware share it, so both speak exactly the same format.
type responder struct {
	denyStatus int
	bufs       sync.Pool // of *[]byte
}

// maxPooledBuf is the largest buffer returned to the pool.
const maxPooledBuf = 16 << 10

func (rs *responder) getBuf() *[]byte {
	if p, ok := rs.bufs.Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 0, 512)
	return &b
}

func (rs *responder) putBuf(p *[]byte) {
	if cap(*p) > maxPooledBuf {
		return
	}
	*p = (*p)[:0]
	rs.bufs.Put(p)
}

// ceilDiv returns d/unit rounded up, and 0 for a negative d.
func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	q := d / unit
	if d%unit != 0 {
		q++
	}
	return int64(q)
}

// retryAfterSeconds is the Retry-After of a denial: whole seconds, rounded
// up, at least 1.
func retryAfterSeconds(d table.Decision) int64 {
	return max(ceilDiv(d.RetryAfter, time.Second), 1)
}

// appendRateLimitFields appends the RateLimit-Policy field value and then
// the RateLimit field value, returning where the second one starts.
func appendRateLimitFields(b []byte, scale time.Duration, d table.Decision) ([]byte, int) {
	b = append(b, `"default";q=`...)
	b = strconv.AppendInt(b, d.Limit, 10)
	b = append(b, ";w="...)
	b = strconv.AppendInt(b, ceilDiv(scale, time.Second), 10)
	mid := len(b)
	b = append(b, `"default";r=`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, ceilDiv(d.ResetAfter, time.Second), 10)
	return b, mid
}

// setRateLimitHeaders sets RateLimit-Policy and RateLimit on h for a
// decision under a window of scale. The middleware uses it before calling
// the next handler.
func (rs *responder) setRateLimitHeaders(h http.Header, scale time.Duration, d table.Decision) {
	p := rs.getBuf()
	b, mid := appendRateLimitFields(*p, scale, d)
	s := string(b)
	*p = b
	rs.putBuf(p)
	vals := make([]string, 2)
	vals[0], vals[1] = s[:mid], s[mid:]
	h[hdrRateLimitPolicy] = vals[0:1:1]
	h[hdrRateLimit] = vals[1:2:2]
}

// writeDecision answers a check of id under a window of scale: 200 when
// allowed, rs.denyStatus with Retry-After when denied; the RateLimit
// headers and the JSON body either way.
func (rs *responder) writeDecision(w http.ResponseWriter, id string, scale time.Duration, d table.Decision) {
	p := rs.getBuf()
	b, mid := appendRateLimitFields(*p, scale, d)
	end := len(b)
	status := http.StatusOK
	if !d.Allowed {
		status = rs.denyStatus
		b = strconv.AppendInt(b, retryAfterSeconds(d), 10)
	}
	s := string(b) // one allocation for every dynamic header value

	// One allocation for the value slices of all five headers; each gets a
	// full slice expression so that an append by a later handler copies.
	vals := make([]string, 5)
	vals[0], vals[1], vals[2], vals[3] = ctJSON, noStore, s[:mid], s[mid:end]
	h := w.Header()
	h[hdrContentType] = vals[0:1:1]
	h[hdrCacheControl] = vals[1:2:2]
	h[hdrRateLimitPolicy] = vals[2:3:3]
	h[hdrRateLimit] = vals[3:4:4]
	if !d.Allowed {
		vals[4] = s[end:]
		h[hdrRetryAfter] = vals[4:5:5]
	}

	b = appendDecisionJSON(b[:0], id, d)
	w.WriteHeader(status)
	_, _ = w.Write(b)
	*p = b
	rs.putBuf(p)
}

// appendDecisionJSON appends the check_rate body for d.
func appendDecisionJSON(b []byte, id string, d table.Decision) []byte {
	if d.Allowed {
		b = append(b, `{"allowed":true,"id":`...)
	} else {
		b = append(b, `{"allowed":false,"id":`...)
	}
	b = appendJSONString(b, id)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, d.Count, 10)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, d.Limit, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, `,"reset_ms":`...)
	b = strconv.AppendInt(b, ceilDiv(d.ResetAfter, time.Millisecond), 10)
	b = append(b, `,"retry_after_ms":`...)
	b = strconv.AppendInt(b, ceilDiv(d.RetryAfter, time.Millisecond), 10)
	return append(b, '}')
}

// writeError answers status with the JSON body {"error":msg,"field":field}.
// A 503 also carries Retry-After: 1.
func (rs *responder) writeError(w http.ResponseWriter, status int, field, msg string) {
	p := rs.getBuf()
	b := append(*p, `{"error":`...)
	b = appendJSONString(b, msg)
	b = append(b, `,"field":`...)
	b = appendJSONString(b, field)
	b = append(b, '}')
	h := w.Header()
	h[hdrContentType] = []string{ctJSON}
	h[hdrCacheControl] = []string{noStore}
	if status == http.StatusServiceUnavailable {
		h[hdrRetryAfter] = []string{"1"}
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
	*p = b
	rs.putBuf(p)
}

// writeFieldError answers 400 for a field error.
func (rs *responder) writeFieldError(w http.ResponseWriter, fe *table.FieldError) {
	rs.writeError(w, http.StatusBadRequest, fe.Field, fe.Error())
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string: '"' and '\' escaped with a
// backslash, control characters and U+2028/U+2029 as \uXXXX, and each byte
// of invalid UTF-8 as \ufffd, so the output is always valid JSON and UTF-8.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			if c == '"' || c == '\\' {
				b = append(b, '\\', c)
			} else {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
