package actors_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/table"
)

// Embed the limiter in a Go program: start it, check, stop it.
func Example() {
	ctx := context.Background()
	sys, err := actors.Start(ctx, actors.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Stop(ctx) //nolint:errcheck // nothing to do about it on the way out

	// At most 2 requests per hour for this client.
	req := table.Request{ID: "203.0.113.7", Policy: table.Policy{Scale: time.Hour, Limit: 2}, Hits: 1}
	for range 3 {
		d, err := sys.Check(ctx, req)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("allowed=%v count=%d remaining=%d retry_later=%v\n", d.Allowed, d.Count, d.Remaining, d.RetryAfter > 0)
	}
	// Output:
	// allowed=true count=1 remaining=1 retry_later=false
	// allowed=true count=2 remaining=0 retry_later=false
	// allowed=false count=2 remaining=0 retry_later=true
}

// A Limiter: one policy, made once, checked by id.
func ExampleLimiter() {
	ctx := context.Background()
	sys, err := actors.Start(ctx, actors.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Stop(ctx) //nolint:errcheck // nothing to do about it on the way out

	perClient, err := sys.Limiter(table.Policy{Scale: time.Hour, Limit: 2})
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		ok, err := perClient.Allow(ctx, "203.0.113.7")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("allowed:", ok)
	}
	d, err := perClient.Check(ctx, "203.0.113.7", 0) // a peek
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("count=%d remaining=%d\n", d.Count, d.Remaining)

	_, err = sys.Limiter(table.Policy{Scale: time.Hour, Limit: -1})
	fmt.Println(err)
	// Output:
	// allowed: true
	// allowed: true
	// allowed: false
	// count=2 remaining=0
	// limit: must not be negative
}
