package httpapi_test

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
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// ExampleNewHandler serves check_rate over a real actor system.
func ExampleNewHandler() {
	ctx := context.Background()
	sys, err := actors.Start(ctx, actors.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Stop(ctx)

	h, err := httpapi.NewHandler(sys, httpapi.Options{DenyStatus: http.StatusTooManyRequests})
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
	h, err := httpapi.NewHandler(sys, httpapi.Options{Rules: store})
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

	h, err := httpapi.NewHandler(sys, httpapi.Options{})
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
