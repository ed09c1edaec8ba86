package client_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/client"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
)

// Example checks a limit of two hits per hour on a ratelimitd served in
// process, gives one hit back, and checks again.
func Example() {
	ctx := context.Background()
	url, stop := service(ctx)
	defer stop()

	c, err := client.New(client.Options{BaseURL: url})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	perHour := client.Limit{Policy: client.Policy{Scale: time.Hour, Limit: 2}}
	for range 3 {
		d, err := c.Check(ctx, "alice", perHour, 1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("allowed=%v remaining=%d retry within the hour=%v\n", d.Allowed, d.Remaining, d.RetryAfter > 0 && d.RetryAfter <= time.Hour)
	}
	if _, err := c.Refund(ctx, "alice", perHour, 1); err != nil {
		log.Fatal(err)
	}
	d, err := c.Check(ctx, "alice", perHour, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after a refund: allowed=%v remaining=%d\n", d.Allowed, d.Remaining)
	// Output:
	// allowed=true remaining=1 retry within the hour=false
	// allowed=true remaining=0 retry within the hour=false
	// allowed=false remaining=0 retry within the hour=true
	// after a refund: allowed=true remaining=0
}

// ExampleClient_Wait paces a worker with a leaky bucket of 100 hits per
// second: each Wait returns when the worker's turn comes, and no job is
// dropped.
func ExampleClient_Wait() {
	ctx := context.Background()
	url, stop := service(ctx)
	defer stop()

	c, err := client.New(client.Options{BaseURL: url, Failure: client.FailClosed})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pace := client.Limit{Policy: client.Policy{Scale: time.Second, Limit: 100, Algorithm: "leaky_bucket"}}
	begin := time.Now()
	for job := range 10 {
		if err := c.Wait(ctx, "mailer", pace); err != nil {
			log.Fatalf("job %d: %v", job, err)
		}
		// ... send the mail ...
	}
	fmt.Println("10 jobs, at least 90ms:", time.Since(begin) >= 90*time.Millisecond)
	// Output:
	// 10 jobs, at least 90ms: true
}

// service serves a ratelimitd in process for the examples, an actor
// system behind the check_rate handler, and returns its URL and what
// stops it.
func service(ctx context.Context) (url string, stop func()) {
	sys, err := actors.Start(ctx, actors.Config{})
	if err != nil {
		log.Fatal(err)
	}
	h, err := httpapi.NewHandler(sys, httpapi.Options{})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	return srv.URL, func() {
		srv.Close()
		_ = sys.Stop(ctx)
	}
}
