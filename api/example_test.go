package api_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api"
)

// ExampleMiddleware limits a handler to two requests per client address
// per hour.
func ExampleMiddleware() {
	ctx := context.Background()
	sys, err := actors.Start(ctx, actors.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Stop(ctx)

	limit, err := api.Middleware(sys, api.MiddlewareOptions{Scale: time.Hour, Limit: 2})
	if err != nil {
		log.Fatal(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	})
	srv := httptest.NewServer(limit(hello))
	defer srv.Close()

	for range 3 {
		resp, err := http.Get(srv.URL)
		if err != nil {
			log.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("RateLimit-Policy"))
	}
	// Output:
	// 200 "default";q=2;w=3600
	// 200 "default";q=2;w=3600
	// 413 "default";q=2;w=3600
}

// ExampleNewHandler serves check_rate over a real actor system.
func ExampleNewHandler() {
	ctx := context.Background()
	sys, err := actors.Start(ctx, actors.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Stop(ctx)

	h, err := api.NewHandler(sys, api.Options{DenyStatus: http.StatusTooManyRequests})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	for range 2 {
		resp, err := http.Get(srv.URL + "/check_rate?id=alice&scale=1h&limit=1")
		if err != nil {
			log.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	// Output:
	// 200
	// 429
}
