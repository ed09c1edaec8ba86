package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/metrics"
)

// refill is the policy members of an ad-hoc check whose refill time is
// over table.MaxScale: valid member by member, refused by the table.
const refill = `"scale":"8784h","limit":1,"algorithm":"token_bucket","burst":2`

func TestWireCheck(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	h, err := httpapi.NewHandler(sys, httpapi.Options{Rules: apitest.WireRules(t), Metrics: metrics.New()})
	if err != nil {
		t.Fatal(err)
	}
	var cases []apitest.Case
	for _, b := range badInputs() {
		target := "/check_rate"
		if b.path != "" {
			target = b.path
		}
		if b.query != "" {
			target += "?" + b.query
		}
		cases = append(cases, apitest.Case{Name: b.name, Method: b.method, Target: target, Body: b.body})
	}
	get := func(name, q string) apitest.Case {
		return apitest.Case{Name: name, Method: "GET", Target: "/check_rate?" + q}
	}
	post := func(name, body string) apitest.Case {
		return apitest.Case{Name: name, Method: "POST", Target: "/check_rate", Body: body}
	}
	refund := func(name, q string) apitest.Case {
		return apitest.Case{Name: name, Method: "GET", Target: "/refund?" + q}
	}
	ok := `{"id":"ok","scale":1000,"limit":3}`
	bad := `{"id":"r",` + refill + `}`
	many := func(first string, n int, last string) string {
		return "[" + first + strings.Repeat(","+ok, n) + "," + last + "]"
	}
	cases = append(cases,
		get("refill", "id=a&scale=8784h&limit=1&algorithm=token_bucket&burst=2"),
		get("refill then unknown", "id=a&scale=8784h&limit=1&algorithm=token_bucket&burst=2&x=1"),
		post("refill", bad),
		post("refill then garbage", bad+" x"),
		post("refill then object", bad+"{}"),
		post("refill cut", `{"id":"r",`+refill),
		post("batch refill", "["+bad+"]"),
		post("batch refill then missing limit", "["+bad+`,{"id":"b","scale":1000}]`),
		post("batch refill then malformed", "["+bad+`,{"id":"b",]`),
		post("batch refill then cut", "["+bad+`,{"id":"b"`),
		post("batch refill then garbage", "["+bad+"] x"),
		post("batch ok then refill", "["+ok+","+bad+"]"),
		post("batch refill then unknown rule", "["+bad+`,{"id":"b","rule":"nope"}]`),
		post("batch unknown rule then refill", `[{"id":"b","rule":"nope"},`+bad+"]"),
		post("batch slow then unknown rule", `[{"id":"b","rule":"slow"},{"id":"b","rule":"nope"}]`),
		post("batch unknown rule then slow", `[{"id":"b","rule":"nope"},{"id":"b","rule":"slow"}]`),
		post("batch slow then refill", `[{"id":"b","rule":"slow"},`+bad+"]"),
		post("batch refill then slow", "["+bad+`,{"id":"b","rule":"slow"}]`),
		post("batch slow shadow", `[{"id":"b","rule":"slowwatch"},`+ok+"]"),
		post("batch shadow then refill", `[{"id":"b","rule":"watch"},`+bad+"]"),
		post("batch refill then too many", many(bad, 1000, ok)),
		post("batch too many then refill", many(ok, 1000, bad)),
		post("batch most then refill", many(ok, 998, bad)),
		get("slow", "id=a&rule=slow"),
		get("slow shadow", "id=a&rule=slowwatch"),
		refund("refill", "id=a&scale=8784h&limit=1&algorithm=token_bucket&burst=2&hits=-1"),
		refund("slow", "id=a&rule=slow&hits=-1"),
		apitest.Case{Name: "refund post refill", Method: "POST", Target: "/refund", Body: `{"id":"r",` + refill + `,"hits":-1}`},
		apitest.Case{Name: "refund post refill then garbage", Method: "POST", Target: "/refund", Body: `{"id":"r",` + refill + `,"hits":-1} x`},

		get("allowed", "id=g&scale=30s&limit=2"),
		get("allowed again", "id=g&scale=30s&limit=2"),
		get("denied", "id=g&scale=30s&limit=2"),
		get("peek", "id=g&scale=30s&limit=2&hits=0"),
		get("token bucket", "id=g&scale=1s&limit=5&algorithm=token_bucket&burst=3&hits=2"),
		get("leaky bucket", "id=g&scale=1s&limit=5&algorithm=leaky_bucket"),
		get("leaky bucket denied", "id=g&scale=1s&limit=5&algorithm=leaky_bucket"),
		get("sliding window", "id=g&scale=1m&limit=5&algorithm=sliding_window&hits=5"),
		get("sliding window denied", "id=g&scale=1m&limit=5&algorithm=sliding_window"),
		get("rule", "id=g&rule=login"),
		get("rule again", "id=g&rule=login"),
		get("rule denied", "id=g&rule=login"),
		get("shadow", "id=g&rule=watch"),
		get("shadow denied", "id=g&rule=watch"),
		get("escaped id", "id=%22q%22%5C%0A%e2%82%ac&scale=1s&limit=1"),
		post("post", `{"id":"p","scale":"30s","limit":2,"hits":2}`),
		post("post denied", `{"id":"p","scale":"30s","limit":2}`),
		post("batch allowed", `[{"id":"b1","scale":"1m","limit":5,"hits":2},{"id":"b1","rule":"login"},{"id":"b1","rule":"watch"}]`),
		post("batch denied", `[{"id":"b1","scale":"1m","limit":5,"hits":4},{"id":"b1","rule":"login"},{"id":"b1","rule":"watch"}]`),
		post("batch denied twice", `[{"id":"b2","scale":"1m","limit":1,"hits":2},{"id":"b2","scale":"1h","limit":1,"hits":3}]`),
		post("batch of shadows", `[{"id":"b3","rule":"watch"},{"id":"b3","rule":"watch"}]`),
		refund("refund", "id=g&scale=30s&limit=2&hits=-1"),
		refund("refund rule", "id=g&rule=login&hits=-5"),
		refund("refund window", "id=g&scale=30s&limit=2&hits=-1&window=1893456000000"),
		refund("refund old window", "id=g&scale=30s&limit=2&hits=-1&window=1893455970000"),

		apitest.Case{Name: "healthz", Method: "GET", Target: "/healthz"},
		apitest.Case{Name: "healthz head", Method: "HEAD", Target: "/healthz"},
		apitest.Case{Name: "healthz post", Method: "POST", Target: "/healthz"},
		apitest.Case{Name: "check_rate put", Method: "PUT", Target: "/check_rate"},
		apitest.Case{Name: "refund delete", Method: "DELETE", Target: "/refund"},
		apitest.Case{Name: "metrics post", Method: "POST", Target: "/metrics"},
		apitest.Case{Name: "unknown", Method: "GET", Target: "/nope"},
		apitest.Case{Name: "unclean", Method: "GET", Target: "//check_rate?id=a&scale=1s&limit=1"},
		apitest.Case{Name: "admin path", Method: "GET", Target: "/rules"},
	)
	apitest.Wire(t, "check", h, cases)
}

func TestWireCheckFull(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClockedWith(t, actors.Config{MaxBuckets: 1})
	h, err := httpapi.NewHandler(sys, httpapi.Options{Rules: apitest.WireRules(t)})
	if err != nil {
		t.Fatal(err)
	}
	apitest.Wire(t, "check-full", h, []apitest.Case{
		{Name: "first", Method: "GET", Target: "/check_rate?id=a&scale=10s&limit=5"},
		{Name: "full", Method: "GET", Target: "/check_rate?id=b&scale=10s&limit=5"},
		{Name: "full by rule", Method: "GET", Target: "/check_rate?id=b&rule=login"},
		{Name: "full shadow", Method: "GET", Target: "/check_rate?id=b&rule=watch"},
		{Name: "full batch", Method: "POST", Target: "/check_rate", Body: `[{"id":"a","scale":"10s","limit":5},{"id":"c","scale":"1m","limit":5}]`},
		{Name: "full and denied batch", Method: "POST", Target: "/check_rate", Body: `[{"id":"a","scale":"10s","limit":5,"hits":9},{"id":"c","scale":"1m","limit":5}]`},
		{Name: "peek", Method: "GET", Target: "/check_rate?id=b&scale=10s&limit=5&hits=0"},
	})
}

func TestWireCheckErrors(t *testing.T) {
	t.Parallel()
	var cases []apitest.Case
	handlers := map[string]http.Handler{}
	for _, e := range apitest.ErrorCases() {
		h, err := httpapi.NewHandler(&apitest.FakeChecker{Err: e.Err}, httpapi.Options{Rules: apitest.WireRules(t)})
		if err != nil {
			t.Fatal(err)
		}
		handlers[e.Name] = h
		cases = append(cases,
			apitest.Case{Name: e.Name + " check", Method: "GET", Target: "/check_rate?id=a&scale=1s&limit=1", Header: []string{"X-Checker", e.Name}},
			apitest.Case{Name: e.Name + " batch", Method: "POST", Target: "/check_rate", Body: `[{"id":"a","scale":1000,"limit":1},{"id":"a","rule":"watch"}]`, Header: []string{"X-Checker", e.Name}},
			apitest.Case{Name: e.Name + " refund", Method: "GET", Target: "/refund?id=a&scale=1s&limit=1&hits=-1", Header: []string{"X-Checker", e.Name}},
		)
	}
	apitest.Wire(t, "check-errors", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers[r.Header.Get("X-Checker")].ServeHTTP(w, r)
	}), cases)
}
