package resp

import (
	"bytes"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ratelimitd/ratelimitd/table"
)

// throttleNamespace is the namespace of CL.THROTTLE's buckets. Rule names
// are [a-z0-9_.-] and ad-hoc checks have none, so it is apart from both.
const throttleNamespace = "CL.THROTTLE"

// maxPeriod is the longest CL.THROTTLE period, in seconds.
const maxPeriod = int64(table.MaxScale / time.Second)

// redis-cell's error replies, byte for byte: its errors reach Redis as
// "Cell error: Store error: MESSAGE", and Redis sends a module's error
// without adding "ERR" when it is not there.
const (
	cellPrefix   = "Cell error: Store error: "
	cellUsage    = cellPrefix + "Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"
	cellParseInt = cellPrefix + "Couldn't parse as integer: "
	cellZeroRate = cellPrefix + "Zero rates are not supported"
)

// throttle is a parsed CL.THROTTLE: the request it makes and what its
// reply needs.
type throttle struct {
	req      table.Request
	quantity int64
	emission int64 // ns per token, as the table counts: period/count rounded up
}

// parseThrottle parses the arguments of CL.THROTTLE (args[0] is the
// command's name) into the check it makes, or returns the error reply:
// redis-cell's own where redis-cell answers one, else "ERR ARG: RULE"
// where redis-cell would crash, overflow or misbehave.
func parseThrottle(args [][]byte) (throttle, string) {
	if len(args) != 5 && len(args) != 6 {
		return throttle{}, cellUsage
	}
	var nums [4]int64
	nums[3] = 1
	for i, a := range args[2:] {
		n, err := strconv.ParseInt(string(a), 10, 64)
		if err != nil {
			if j := bytes.IndexByte(a, 0); j >= 0 {
				a = a[:j] // redis-cell's message is a C string
			}
			return throttle{}, cellParseInt + string(a)
		}
		nums[i] = n
	}
	maxBurst, count, period, quantity := nums[0], nums[1], nums[2], nums[3]
	switch {
	case count == 0 || period == 0:
		return throttle{}, cellZeroRate
	case maxBurst < 0:
		return throttle{}, "ERR max_burst: must be between 0 and 9223372036854775806"
	case maxBurst == math.MaxInt64:
		return throttle{}, "ERR max_burst: must be between 0 and 9223372036854775806"
	case count < 0:
		return throttle{}, "ERR count: must be at least 1"
	case period < 0 || period > maxPeriod:
		return throttle{}, "ERR period: must be between 1 and " + strconv.FormatInt(maxPeriod, 10) + " seconds"
	case quantity < 0:
		return throttle{}, "ERR quantity: must not be negative"
	}
	key := args[1]
	if msg := keyErr(key); msg != "" {
		return throttle{}, msg
	}
	scale := time.Duration(period) * time.Second
	em := ceilDivInt(int64(scale), count)
	burst := maxBurst + 1
	if burst > int64(table.MaxScale)/em {
		return throttle{}, "ERR max_burst: (max_burst+1) × period/count, the time the bucket takes to refill, must be at most " + table.MaxScale.String()
	}
	t := throttle{
		req: table.Request{
			ID:        string(key),
			Policy:    table.Policy{Algorithm: table.TokenBucket, Scale: scale, Limit: count, Burst: burst},
			Hits:      quantity,
			Namespace: throttleNamespace,
		},
		quantity: quantity,
		emission: em,
	}
	if err := t.req.Validate(); err != nil {
		// Unreachable: every rule Validate checks is checked above.
		return throttle{}, "ERR " + err.Error()
	}
	return t, ""
}

// ceilDivInt is ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDivInt(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// reply returns the 5 integers of redis-cell's reply to t, decided d:
// [limited, max_burst+1, remaining, retry_after, reset_after], computed
// with redis-cell's formulas from the bucket's state d reports, its
// ResetAfter being exactly TAT − now (ttl).
func (t *throttle) reply(d table.Decision) [5]int64 {
	burst := t.req.Burst
	ttl := int64(d.ResetAfter)
	tau := burst * t.emission // the delay variation tolerance
	limited := !d.Allowed
	if t.quantity == 0 {
		// redis-cell's peek is limited only when the bucket is over full
		// (its state was made under other parameters); the table's peek
		// asks whether one more hit fits.
		limited = ttl > tau
	}
	retry := -time.Second
	if limited && t.quantity <= burst {
		// allow_at − now = TAT + increment − τ − now.
		retry = time.Duration(ttl + t.quantity*t.emission - tau)
	}
	var remaining int64
	if next := tau - ttl; next > 0 {
		remaining = next / t.emission
	}
	var lim int64
	if limited {
		lim = 1
	}
	return [5]int64{lim, burst, remaining, cellSeconds(retry), cellSeconds(time.Duration(ttl))}
}

// cellSeconds rounds d to seconds as redis-cell does: the whole seconds of
// d as a float64, plus one if the part under a second holds at least a
// millisecond.
func cellSeconds(d time.Duration) int64 {
	sec, nsec := int64(d/time.Second), int64(d%time.Second)
	s := int64(float64(sec) + float64(nsec)/1e9)
	if nsec/1e6 > 0 {
		s++
	}
	return s
}

// keyErr returns the error reply to a key that cannot be a CL.THROTTLE
// key, "" to one that can.
func keyErr(key []byte) string {
	switch {
	case len(key) == 0:
		return "ERR key: must not be empty"
	case len(key) > table.MaxIDLen:
		return "ERR key: must be at most " + strconv.Itoa(table.MaxIDLen) + " bytes"
	case !utf8.Valid(key):
		return "ERR key: must be valid UTF-8"
	}
	return ""
}
