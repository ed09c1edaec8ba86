package api_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/table"
)

// Ceil rounds every duration told to a client up, so that waiting as long
// as told is never early; nothing is owed for a negative one.
func ExampleCeil() {
	for _, c := range []struct{ d, unit time.Duration }{
		{0, time.Second},
		{-time.Second, time.Second},
		{1, time.Second},
		{time.Second, time.Second},
		{time.Second + 1, time.Second},
		{1999 * time.Microsecond, time.Millisecond},
		{1<<63 - 1, time.Second},
	} {
		fmt.Println(c.d, "in", c.unit, "=", api.Ceil(c.d, c.unit))
	}
	// Output:
	// 0s in 1s = 0
	// -1s in 1s = 0
	// 1ns in 1s = 1
	// 1s in 1s = 1
	// 1.000000001s in 1s = 2
	// 1.999ms in 1ms = 2
	// 2562047h47m16.854775807s in 1s = 9223372037
}

// A denial's Retry-After is whole seconds, rounded up, at least 1; the
// RateLimit fields describe the decision under its policy.
func ExampleAppendRateLimit() {
	d := table.Decision{Limit: 10, Remaining: 0, ResetAfter: 2500 * time.Millisecond, RetryAfter: 300 * time.Millisecond}
	b, mid := api.AppendRateLimit(nil, "login", time.Minute, &d)
	fmt.Println("RateLimit-Policy:", string(b[:mid]))
	fmt.Println("RateLimit:", string(b[mid:]))
	fmt.Println("Retry-After:", api.RetryAfter(d.RetryAfter))
	// Output:
	// RateLimit-Policy: "login";q=10;w=60
	// RateLimit: "login";r=0;t=3
	// Retry-After: 1
}

// A transport answers a Checker's error by its class: only bad input is
// the client's to fix.
func ExampleClassify() {
	for _, err := range []error{
		&table.FieldError{Field: "limit", Message: table.MsgNotNegative},
		fmt.Errorf("check: %w", context.Canceled),
		table.ErrStopped,
		fmt.Errorf("shard 3: %w: %w", table.ErrUnavailable, table.ErrJournal),
	} {
		fmt.Println(api.Classify(err) == api.ClassInvalid, api.Classify(err))
	}
	// Output:
	// true invalid
	// false canceled
	// false stopped
	// false unavailable
}
