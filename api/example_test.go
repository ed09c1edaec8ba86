package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
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

	limit, err := api.Middleware(sys, api.MiddlewareOptions{Policy: table.Policy{Scale: time.Hour, Limit: 2}})
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

// ExampleNewHandler_rules checks by a named rule instead of scale and limit,
// and gives hits back with a refund.
func ExampleNewHandler_rules() {
	ctx := context.Background()
	sys, err := actors.Start(ctx, actors.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Stop(ctx)

	store, err := rules.NewStore([]rules.Rule{{Name: "login", Policy: table.Policy{Scale: time.Hour, Limit: 2}}})
	if err != nil {
		log.Fatal(err)
	}
	h, err := api.NewHandler(sys, api.Options{Rules: store})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, path := range []string{
		"/check_rate?id=alice&rule=login&hits=2",
		"/check_rate?id=alice&rule=login",
		"/refund?id=alice&rule=login&hits=-1",
		"/check_rate?id=alice&rule=login",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		var d struct {
			Rule  string `json:"rule"`
			Count int64  `json:"count"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, d.Rule, d.Count, resp.Header.Get("RateLimit-Policy"))
	}
	// Output:
	// 200 login 2 "login";q=2;w=3600
	// 413 login 2 "login";q=2;w=3600
	// 200 login 1 "login";q=2;w=3600
	// 200 login 2 "login";q=2;w=3600
}

// ExampleNewHandler_batch checks two limits at once, all or nothing: the
// second batch is denied by the per-minute limit, and consumes nothing of
// the per-day one.
func ExampleNewHandler_batch() {
	ctx := context.Background()
	sys, err := actors.Start(ctx, actors.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Stop(ctx)

	h, err := api.NewHandler(sys, api.Options{})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	batch := `[{"id":"bob","scale":"24h","limit":1000,"hits":10},{"id":"bob","scale":"8784h","limit":1,"algorithm":"sliding_window"}]`
	for range 2 {
		resp, err := http.Post(srv.URL+"/check_rate", "application/json", strings.NewReader(batch))
		if err != nil {
			log.Fatal(err)
		}
		var b struct {
			Allowed bool `json:"allowed"`
			Checks  []struct {
				Allowed bool  `json:"allowed"`
				Count   int64 `json:"count"`
			} `json:"checks"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, b.Allowed, b.Checks)
	}
	resp, err := http.Get(srv.URL + "/check_rate?id=bob&scale=24h&limit=1000&hits=0")
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(strings.Contains(string(body), `"count":10,`))
	// Output:
	// 200 true [{true 10} {true 1}]
	// 413 false [{true 20} {false 1}]
	// true
}

// ExampleNewAdminHandler changes a rule at runtime through the admin API,
// served on a listener of its own; the public handler sees the change on
// the very next check.
func ExampleNewAdminHandler() {
	ctx := context.Background()
	sys, err := actors.Start(ctx, actors.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Stop(ctx)
	store, err := rules.NewStore(nil)
	if err != nil {
		log.Fatal(err)
	}

	public, err := api.NewHandler(sys, api.Options{Rules: store})
	if err != nil {
		log.Fatal(err)
	}
	admin, err := api.NewAdminHandler(api.AdminOptions{
		Backend:        sys,
		Rules:          store,
		Token:          "example-token",
		OnRulesChanged: func(s *rules.Set) { fmt.Println("rules now at version", s.Version()) },
	})
	if err != nil {
		log.Fatal(err)
	}
	pub, adm := httptest.NewServer(public), httptest.NewServer(admin)
	defer pub.Close()
	defer adm.Close()

	call := func(method, url, body string) {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			log.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer example-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(b))
	}
	call("PUT", adm.URL+"/rules/search", `{"scale":"1m","limit":1}`)
	for range 2 {
		resp, err := http.Get(pub.URL + "/check_rate?id=carol&rule=search")
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	call("POST", adm.URL+"/reset?id=carol&rule=search", "")
	call("DELETE", adm.URL+"/rules/search", "")
	// Output:
	// rules now at version 2
	// 200 {"version":2,"rule":{"name":"search","algorithm":"fixed_window","scale":"1m","limit":1,"burst":0,"shadow":false}}
	// 200
	// 413
	// 200 {"deleted":1}
	// rules now at version 3
	// 200 {"version":3}
}

// ExampleMiddleware_rules limits the paths that rules match, and lets the
// others through.
func ExampleMiddleware_rules() {
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
	limit, err := api.Middleware(sys, api.MiddlewareOptions{Rules: store})
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
