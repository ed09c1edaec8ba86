package api

import (
	"strconv"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// DefaultPolicy is the RateLimit policy name of an ad-hoc check, which has
// no rule to be named after.
const DefaultPolicy = "default"

// Ceil returns d/unit rounded up, and 0 for d ≤ 0: every duration a client
// is told is rounded up, so that a client that waits as long as it was
// told is never early.
func Ceil(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	q := d / unit
	if d%unit != 0 {
		q++
	}
	return int64(q)
}

// RetryAfter is the Retry-After of a denial that waits d: whole seconds,
// rounded up, at least 1 (a client told 0 would retry at once).
func RetryAfter(d time.Duration) int64 { return max(Ceil(d, time.Second), 1) }

// AppendRateLimit appends to b the value of the RateLimit-Policy field and
// then that of the RateLimit field (draft-ietf-httpapi-ratelimit-headers)
// of decision d under policy, whose window is scale, returning where the
// second starts:
//
//	"POLICY";q=LIMIT;w=WINDOW_SECONDS"POLICY";r=REMAINING;t=SECONDS_UNTIL_RESET
//
// policy must need no escaping in a quoted string (a rule name does not).
func AppendRateLimit(b []byte, policy string, scale time.Duration, d *table.Decision) ([]byte, int) {
	b = append(b, '"')
	b = append(b, policy...)
	b = append(b, `";q=`...)
	b = strconv.AppendInt(b, d.Limit, 10)
	b = append(b, ";w="...)
	b = strconv.AppendInt(b, Ceil(scale, time.Second), 10)
	mid := len(b)
	b = append(b, '"')
	b = append(b, policy...)
	b = append(b, `";r=`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, Ceil(d.ResetAfter, time.Second), 10)
	return b, mid
}
