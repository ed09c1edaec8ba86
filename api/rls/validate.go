package rls

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/ratelimitd/ratelimitd/table"
)

// Limits on a RateLimitRequest. A request past one is answered
// InvalidArgument (HTTP 400 on /json) naming the field.
const (
	// MaxDescriptors is the most descriptors one request may carry.
	MaxDescriptors = 256
	// MaxEntries is the most entries one descriptor may carry.
	MaxEntries = 64
	// MaxDomainLen is the longest domain, in bytes (config files too).
	MaxDomainLen = 1024
	// MaxKeyLen is the longest entry key, in bytes.
	MaxKeyLen = 1024
	// MaxValueLen is the longest entry value, in bytes: room for a long
	// path or header value.
	MaxValueLen = 64 << 10
)

// validate reports the first field of req that breaks a rule, as a
// *table.FieldError naming it by its proto path.
func validate(req *rlsv3.RateLimitRequest) error {
	switch {
	case req == nil || req.Domain == "":
		return &table.FieldError{Field: "domain", Message: "must not be empty"}
	case len(req.Domain) > MaxDomainLen:
		return &table.FieldError{Field: "domain", Message: fmt.Sprintf("must be at most %d bytes", MaxDomainLen)}
	case !utf8.ValidString(req.Domain):
		return &table.FieldError{Field: "domain", Message: "must be valid UTF-8"}
	case len(req.Descriptors) == 0:
		return &table.FieldError{Field: "descriptors", Message: "must not be empty"}
	case len(req.Descriptors) > MaxDescriptors:
		return &table.FieldError{Field: "descriptors", Message: fmt.Sprintf("must hold at most %d descriptors", MaxDescriptors)}
	}
	for i, d := range req.Descriptors {
		at := "descriptors[" + strconv.Itoa(i) + "]"
		switch {
		case d == nil || len(d.Entries) == 0:
			return &table.FieldError{Field: at + ".entries", Message: "must not be empty"}
		case len(d.Entries) > MaxEntries:
			return &table.FieldError{Field: at + ".entries", Message: fmt.Sprintf("must hold at most %d entries", MaxEntries)}
		case d.HitsAddend != nil && d.HitsAddend.Value > math.MaxInt64:
			return &table.FieldError{Field: at + ".hits_addend", Message: fmt.Sprintf("must be at most %d", int64(math.MaxInt64))}
		}
		for j, e := range d.Entries {
			eat := at + ".entries[" + strconv.Itoa(j) + "]"
			switch {
			case e == nil || e.Key == "":
				return &table.FieldError{Field: eat + ".key", Message: "must not be empty"}
			case len(e.Key) > MaxKeyLen:
				return &table.FieldError{Field: eat + ".key", Message: fmt.Sprintf("must be at most %d bytes", MaxKeyLen)}
			case !utf8.ValidString(e.Key):
				return &table.FieldError{Field: eat + ".key", Message: "must be valid UTF-8"}
			case len(e.Value) > MaxValueLen:
				return &table.FieldError{Field: eat + ".value", Message: fmt.Sprintf("must be at most %d bytes", MaxValueLen)}
			case !utf8.ValidString(e.Value):
				return &table.FieldError{Field: eat + ".value", Message: "must be valid UTF-8"}
			}
		}
		if o := d.Limit; o != nil {
			u := rlsv3.RateLimitResponse_RateLimit_Unit(o.Unit)
			if o.Unit <= typev3.RateLimitUnit_UNKNOWN || o.Unit > typev3.RateLimitUnit_YEAR {
				return &table.FieldError{Field: at + ".limit.unit", Message: "must be one of SECOND, MINUTE, HOUR, DAY, MONTH, YEAR"}
			}
			if m := o.UnitMultiplier; m != nil {
				if max := maxMultiplier(u); m.Value < 1 || uint64(m.Value) > max {
					return &table.FieldError{Field: at + ".limit.unit_multiplier",
						Message: fmt.Sprintf("must be from 1 to %d for unit %s (a window is at most %v)", max, u, table.MaxScale)}
				}
			}
		}
	}
	return nil
}
