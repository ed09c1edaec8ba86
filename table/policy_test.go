package table

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

func TestParsePolicy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want Policy
		str  string // String of the result
	}{
		{"100/1s", Policy{Limit: 100, Scale: time.Second}, "100/1s"},
		{"600/1m/token_bucket/50", Policy{Limit: 600, Scale: time.Minute, Algorithm: TokenBucket, Burst: 50}, "600/1m0s/token_bucket/50"},
		{"5/250ms/sliding_window", Policy{Limit: 5, Scale: 250 * time.Millisecond, Algorithm: SlidingWindow}, "5/250ms/sliding_window"},
		{"0/1h", Policy{Scale: time.Hour}, "0/1h0m0s"},
	}
	for _, c := range cases {
		got, err := ParsePolicy(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParsePolicy(%q): got %+v, %v, want %+v", c.in, got, err, c.want)
			continue
		}
		if s := got.String(); s != c.str {
			t.Errorf("String of %q: got %q, want %q", c.in, s, c.str)
		}
		if back, err := ParsePolicy(got.String()); err != nil || back != got {
			t.Errorf("ParsePolicy(String()) of %q: got %+v, %v", c.in, back, err)
		}
	}
	for in, field := range map[string]string{
		"100":                                    "",
		"x/1s":                                   "",
		"-1/1s":                                  "",
		"100/fast":                               "",
		"1/1s/fixed_window/":                     "",
		"1/1s/a/b/c":                             "",
		"1/1s/quick":                             "algorithm",
		"1/1ns":                                  "scale",
		"1/1500us":                               "scale",
		"1/1ms/token_bucket/9223372036854775807": "burst",
	} {
		_, err := ParsePolicy(in)
		var fe *FieldError
		switch {
		case field == "" && !errors.Is(err, ErrPolicySyntax):
			t.Errorf("ParsePolicy(%q): got %v, want ErrPolicySyntax", in, err)
		case field != "" && (!errors.As(err, &fe) || fe.Field != field):
			t.Errorf("ParsePolicy(%q): got %v, want a FieldError on %s", in, err, field)
		}
	}
}

// TestPolicyValidateIsRequestValidate: a Request is refused for its policy
// with the very error Policy.Validate gives.
func TestPolicyValidateIsRequestValidate(t *testing.T) {
	t.Parallel()
	for _, p := range []Policy{
		{Scale: 0, Limit: 1},
		{Scale: time.Second, Limit: -1},
		{Scale: time.Second, Limit: 1, Algorithm: 7},
		{Scale: time.Second, Limit: 1, Burst: -2},
		{Scale: MaxScale, Limit: 1, Algorithm: LeakyBucket, Burst: 2},
	} {
		perr := p.Validate()
		r := Request{ID: "x", Policy: p, Hits: 1}
		rerr := r.Validate()
		if perr == nil || rerr == nil || perr.Error() != rerr.Error() {
			t.Errorf("%+v: Policy.Validate %v, Request.Validate %v, want the same error", p, perr, rerr)
		}
	}
}

// TestPolicyHugeLimit checks that a GCRA policy whose limit is near the
// largest int64 is valid (one token a nanosecond) and decided, instead of
// overflowing the emission interval into a division by zero.
func TestPolicyHugeLimit(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, limit := range []int64{math.MaxInt64, math.MaxInt64 - 1_000_000_000, 9223372036700000000} {
		for _, alg := range []Algorithm{TokenBucket, LeakyBucket} {
			req := Request{ID: "k", Hits: 1, Policy: Policy{Algorithm: alg, Scale: time.Second, Limit: limit, Burst: 1}}
			if err := req.Validate(); err != nil {
				t.Fatalf("%v limit %d: Validate: %v", alg, limit, err)
			}
			d := New(Config{}).Apply(req, now)
			if !d.Allowed || d.ResetAfter != time.Nanosecond {
				t.Errorf("%v limit %d: got %+v, want allowed, reset after 1ns", alg, limit, d)
			}
		}
	}
}

// TestMessages keeps the numbers the messages state equal to the limits
// they state.
func TestMessages(t *testing.T) {
	t.Parallel()
	for got, want := range map[string]string{
		MsgIDLen:        fmt.Sprintf("must be at most %d bytes", MaxIDLen),
		MsgScaleRange:   fmt.Sprintf("must be between %v and %v", MinScale, MaxScale),
		MsgRefill:       fmt.Sprintf("burst × scale/limit (the time to refill) must be at most %v", MaxScale),
		msgNamespaceLen: fmt.Sprintf("must be at most %d bytes", MaxNamespaceLen),
	} {
		if got != want {
			t.Errorf("got message %q, want %q", got, want)
		}
	}
}

func TestIndexError(t *testing.T) {
	t.Parallel()
	err := error(&IndexError{Index: 3, Err: &FieldError{Field: "limit", Message: MsgNotNegative}})
	if got, want := err.Error(), "checks[3].limit: must not be negative"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "limit" || !errors.Is(err, ErrInvalid) {
		t.Errorf("got %v: want it to unwrap to the FieldError on limit, matching ErrInvalid", err)
	}
	other := &IndexError{Index: 0, Err: errors.New("boom")}
	if got, want := other.Error(), "checks[0]: boom"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := other.Field(""), "checks[0]"; got != want {
		t.Errorf("got Field %q, want %q", got, want)
	}
	if MsgBatchSize != fmt.Sprintf("must hold 1 to %d checks", MaxBatch) {
		t.Errorf("got MsgBatchSize %q, want it to state MaxBatch %d", MsgBatchSize, MaxBatch)
	}
}
