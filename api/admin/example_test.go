package admin_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/admin"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/rules"
)

// ExampleNewHandler changes a rule at runtime through the admin API,
// served on a listener of its own; the public handler sees the change on
// the very next check.
func ExampleNewHandler() {
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

	public, err := httpapi.NewHandler(sys, httpapi.Options{Rules: store})
	if err != nil {
		log.Fatal(err)
	}
	adminH, err := admin.NewHandler(admin.Options{
		Backend:        backend{sys}, // *actors.System, its Stats as admin.Stats
		Rules:          store,
		Token:          "example-token",
		OnRulesChanged: func(s *rules.Set) { fmt.Println("rules now at version", s.Version()) },
	})
	if err != nil {
		log.Fatal(err)
	}
	pub, adm := httptest.NewServer(public), httptest.NewServer(adminH)
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
