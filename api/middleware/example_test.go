package middleware_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/middleware"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// ExampleNew limits a handler to two requests per client address
// per hour.
func ExampleNew() {
	ctx := context.Background()
	sys, err := actors.Start(ctx, actors.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Stop(ctx)

	limit, err := middleware.New(sys, middleware.Options{Policy: table.Policy{Scale: time.Hour, Limit: 2}})
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

// ExampleNew_rules limits the paths that rules match, and lets the
// others through.
func ExampleNew_rules() {
	ctx := context.Background()
	sys, err := actors.Start(ctx, actors.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Stop(ctx)
	store, err := rules.NewStore([]rules.Rule{
		{Name: "api", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Match: rules.Match{Prefix: "/api"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	limit, err := middleware.New(sys, middleware.Options{Rules: store})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(limit(http.NotFoundHandler()))
	defer srv.Close()

	for _, path := range []string{"/api/a", "/api/b", "/static/c", "/static/d"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		line := fmt.Sprint(path, " ", resp.StatusCode)
		if p := resp.Header.Get("RateLimit-Policy"); p != "" {
			line += " " + p
		}
		fmt.Println(line)
	}
	// Output:
	// /api/a 404 "api";q=1;w=3600
	// /api/b 413 "api";q=1;w=3600
	// /static/c 404
	// /static/d 404
}
