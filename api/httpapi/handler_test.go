package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

func TestNewHandlerOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		c       api.Checker
		opts    httpapi.Options
		wantErr bool
	}{
		{"zero", &apitest.FakeChecker{}, httpapi.Options{}, false},
		{"413", &apitest.FakeChecker{}, httpapi.Options{DenyStatus: 413}, false},
		{"429", &apitest.FakeChecker{}, httpapi.Options{DenyStatus: 429}, false},
		{"200", &apitest.FakeChecker{}, httpapi.Options{DenyStatus: 200}, true},
		{"503", &apitest.FakeChecker{}, httpapi.Options{DenyStatus: 503}, true},
		{"negative", &apitest.FakeChecker{}, httpapi.Options{DenyStatus: -1}, true},
		{"nil checker", nil, httpapi.Options{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := httpapi.NewHandler(tt.c, tt.opts)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("NewHandler: got err %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, api.ErrInvalidOption) {
				t.Errorf("got err %v, want it to match ErrInvalidOption", err)
			}
			if err == nil && h == nil {
				t.Errorf("got nil handler and nil error")
			}
		})
	}
}

// badInput is a request that must be answered 400 naming field.
type badInput struct {
	name   string
	method string
	query  string // GET query, or the query of a POST
	body   string // POST body
	field  string
	path   string // "" for /check_rate
}

// badInputRules are the rules of the server TestBadInput sends bad input to.
func badInputRules(t testing.TB) *rules.Store {
	t.Helper()
	st, err := rules.NewStore([]rules.Rule{
		{Name: "login", Policy: table.Policy{Scale: time.Hour, Limit: 5}},
		{Name: "slow", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: table.MaxScale, Limit: 1, Burst: 2}}, // refill over MaxScale
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func badInputs() []badInput {
	long := strings.Repeat("a", table.MaxIDLen+1)
	good := "&scale=1000&limit=3"
	get := func(name, q, field string) badInput { return badInput{name, http.MethodGet, q, "", field, ""} }
	post := func(name, body, field string) badInput { return badInput{name, http.MethodPost, "", body, field, ""} }
	refundGet := func(name, q, field string) badInput {
		return badInput{"refund " + name, http.MethodGet, q, "", field, "/refund"}
	}
	refundPost := func(name, body, field string) badInput {
		return badInput{"refund " + name, http.MethodPost, "", body, field, "/refund"}
	}
	elem := `{"id":"a","scale":1000,"limit":3}`
	return []badInput{
		get("no params", "", "id"),
		get("missing id", "scale=1000&limit=3", "id"),
		get("empty id", "id="+good, "id"),
		get("bare id", "id"+good, "id"),
		get("id too long", "id="+long+good, "id"),
		get("id too long unescaped", "id="+strings.Repeat("%61", table.MaxIDLen+1)+good, "id"),
		get("id bad escape", "id=%zz"+good, "id"),
		get("id truncated escape", "id=a%2"+good, "id"),
		get("id repeated", "id=a&id=b&scale=1000&limit=3", "id"),
		get("missing scale", "id=a&limit=3", "scale"),
		get("scale empty", "id=a&scale=&limit=3", "scale"),
		get("scale zero", "id=a&scale=0&limit=3", "scale"),
		get("scale negative", "id=a&scale=-5&limit=3", "scale"),
		get("scale negative duration", "id=a&scale=-5s&limit=3", "scale"),
		get("scale fraction", "id=a&scale=1.5&limit=3", "scale"),
		get("scale sub-ms", "id=a&scale=1500us&limit=3", "scale"),
		get("scale fractional ms", "id=a&scale=1.5ms&limit=3", "scale"),
		get("scale under 1ms", "id=a&scale=999us&limit=3", "scale"),
		get("scale word", "id=a&scale=abc&limit=3", "scale"),
		get("scale overflow", "id=a&scale=99999999999999999999&limit=3", "scale"),
		get("scale duration overflow", "id=a&scale=9999999999h&limit=3", "scale"),
		get("scale over max ms", "id=a&scale=31622400001&limit=3", "scale"),
		get("scale over max", "id=a&scale=8785h&limit=3", "scale"),
		get("scale plus sign", "id=a&scale=%2B5&limit=3", "scale"),
		get("scale repeated", "id=a&scale=1&scale=2&limit=3", "scale"),
		get("missing limit", "id=a&scale=1000", "limit"),
		get("limit empty", "id=a&scale=1000&limit=", "limit"),
		get("limit zero", "id=a&scale=1000&limit=0", "limit"),
		get("limit negative", "id=a&scale=1000&limit=-1", "limit"),
		get("limit fraction", "id=a&scale=1000&limit=1.5", "limit"),
		get("limit exponent", "id=a&scale=1000&limit=1e3", "limit"),
		get("limit overflow", "id=a&scale=1000&limit=9223372036854775808", "limit"),
		get("limit huge", "id=a&scale=1000&limit=99999999999999999999999", "limit"),
		get("limit plus", "id=a&scale=1000&limit=%2B3", "limit"),
		get("limit space", "id=a&scale=1000&limit=+3", "limit"),
		get("limit hex", "id=a&scale=1000&limit=0x10", "limit"),
		get("limit word", "id=a&scale=1000&limit=many", "limit"),
		get("hits negative", "id=a"+good+"&hits=-1", "hits"),
		get("hits fraction", "id=a"+good+"&hits=1.5", "hits"),
		get("hits empty", "id=a"+good+"&hits=", "hits"),
		get("hits word", "id=a"+good+"&hits=x", "hits"),
		get("hits overflow", "id=a"+good+"&hits=9223372036854775808", "hits"),
		get("hits repeated", "id=a"+good+"&hits=1&hits=1", "hits"),
		get("algorithm unknown", "id=a"+good+"&algorithm=sliding_windows", "algorithm"),
		get("algorithm case", "id=a"+good+"&algorithm=FIXED_WINDOW", "algorithm"),
		get("unknown param", "id=a"+good+"&foo=1", "foo"),
		get("unknown param first", "bogus=x&id=a"+good, "bogus"),
		get("burst negative", "id=a"+good+"&burst=-1", "burst"),
		get("burst fraction", "id=a"+good+"&burst=1.5", "burst"),
		get("burst empty", "id=a"+good+"&burst=", "burst"),
		get("burst overflow", "id=a"+good+"&burst=9223372036854775808", "burst"),
		get("burst repeated", "id=a"+good+"&burst=1&burst=1", "burst"),
		get("burst refill too long", "id=a&scale=8784h&limit=1&algorithm=token_bucket&burst=2", "burst"),
		get("rule empty", "id=a&rule=", "rule"),
		get("rule unknown", "id=a&rule=nope", "rule"),
		get("rule case", "id=a&rule=LOGIN", "rule"),
		get("rule repeated", "id=a&rule=login&rule=login", "rule"),
		get("rule without id", "rule=login", "id"),
		get("rule and scale", "id=a&rule=login&scale=1000", "scale"),
		get("rule and limit", "id=a&rule=login&limit=3", "limit"),
		get("rule and algorithm", "id=a&rule=login&algorithm=fixed_window", "algorithm"),
		get("rule and burst", "id=a&rule=login&burst=0", "burst"),
		get("rule and hits negative", "id=a&rule=login&hits=-1", "hits"),
		get("rule the table cannot take", "id=a&rule=slow", "rule"),
		get("param case", "ID=a"+good, "ID"),
		get("semicolon", "id=a;scale=1000&limit=3", "scale"),
		get("no name", "id=a"+good+"&=1", "query"),
		get("key bad escape", "id=a"+good+"&%zz=1", "query"),
		get("escaped key repeated", "id=a&%69d=b"+good, "id"),

		post("empty body", "", "body"),
		post("whitespace body", "   ", "body"),
		post("not json", "not json", "body"),
		post("empty array", `[]`, "checks"),
		post("array of empty", `[{}]`, "checks[0].id"),
		post("array of number", `[`+elem+`,5]`, "checks[1]"),
		post("array of array", `[[`+elem+`]]`, "checks[0]"),
		post("array element missing limit", `[`+elem+`,`+elem+`,`+elem+`,{"id":"a","scale":1000}]`, "checks[3].limit"),
		post("array element bad limit", `[`+elem+`,{"id":"a","scale":1000,"limit":0}]`, "checks[1].limit"),
		post("array element unknown field", `[{"id":"a","scale":1000,"limit":3,"x":1}]`, "checks[0].x"),
		post("array element unknown rule", `[`+elem+`,{"id":"a","rule":"nope"}]`, "checks[1].rule"),
		post("array element rule and scale", `[{"id":"a","rule":"login","scale":1000}]`, "checks[0].scale"),
		post("array element repeated", `[{"id":"a","id":"a","scale":1000,"limit":3}]`, "checks[0].id"),
		post("array too long", `[`+strings.Repeat(elem+`,`, actors.MaxCheckAll)+elem+`]`, "checks"),
		post("array truncated", `[`+elem, "body"),
		post("array trailing comma", `[`+elem+`,]`, "body"),
		post("array trailing", `[`+elem+`]{}`, "body"),
		post("string", `"id"`, "body"),
		post("number", `42`, "body"),
		post("null", `null`, "body"),
		post("truncated", `{"id":"a","scale":1000,`, "body"),
		post("truncated value", `{"id":"a","scale":1000,"limit":`, "body"),
		post("missing colon", `{"id" "a"}`, "body"),
		post("trailing comma", `{"id":"a","scale":1000,"limit":3,}`, "body"),
		post("trailing object", `{"id":"a","scale":1000,"limit":3}{}`, "body"),
		post("trailing garbage", `{"id":"a","scale":1000,"limit":3} x`, "body"),
		post("trailing number", `{"id":"a","scale":1000,"limit":3}1`, "body"),
		post("leading zero", `{"id":"a","scale":1000,"limit":3,"hits":01}`, "body"),
		post("two values", `{"id":"a","scale":1000,"limit":3 4}`, "body"),
		post("unknown field", `{"id":"a","scale":1000,"limit":3,"foo":1}`, "foo"),
		post("field case", `{"ID":"a","scale":1000,"limit":3}`, "ID"),
		post("rule without id", `{"rule":"login"}`, "id"),
		post("rule unknown", `{"id":"a","rule":"nope"}`, "rule"),
		post("rule number", `{"id":"a","rule":1}`, "rule"),
		post("rule and limit", `{"id":"a","rule":"login","limit":3}`, "limit"),
		post("burst negative", `{"id":"a","scale":1000,"limit":3,"burst":-1}`, "burst"),
		post("burst string", `{"id":"a","scale":1000,"limit":3,"burst":"1"}`, "burst"),
		post("id repeated", `{"id":"a","id":"b","scale":1000,"limit":3}`, "id"),
		post("missing id", `{"scale":1000,"limit":3}`, "id"),
		post("id empty", `{"id":"","scale":1000,"limit":3}`, "id"),
		post("id null", `{"id":null,"scale":1000,"limit":3}`, "id"),
		post("id number", `{"id":5,"scale":1000,"limit":3}`, "id"),
		post("id object", `{"id":{},"scale":1000,"limit":3}`, "id"),
		post("id too long", `{"id":"`+long+`","scale":1000,"limit":3}`, "id"),
		post("missing scale", `{"id":"a","limit":3}`, "scale"),
		post("scale fraction", `{"id":"a","scale":1.5,"limit":3}`, "scale"),
		post("scale negative", `{"id":"a","scale":-1000,"limit":3}`, "scale"),
		post("scale zero", `{"id":"a","scale":0,"limit":3}`, "scale"),
		post("scale exponent", `{"id":"a","scale":1e3,"limit":3}`, "scale"),
		post("scale overflow", `{"id":"a","scale":99999999999999999999,"limit":3}`, "scale"),
		post("scale bool", `{"id":"a","scale":true,"limit":3}`, "scale"),
		post("scale null", `{"id":"a","scale":null,"limit":3}`, "scale"),
		post("scale word", `{"id":"a","scale":"abc","limit":3}`, "scale"),
		post("scale sub-ms string", `{"id":"a","scale":"1.5ms","limit":3}`, "scale"),
		post("scale over max", `{"id":"a","scale":"8785h","limit":3}`, "scale"),
		post("missing limit", `{"id":"a","scale":1000}`, "limit"),
		post("limit zero", `{"id":"a","scale":1000,"limit":0}`, "limit"),
		post("limit negative", `{"id":"a","scale":1000,"limit":-1}`, "limit"),
		post("limit fraction", `{"id":"a","scale":1000,"limit":1.5}`, "limit"),
		post("limit integral fraction", `{"id":"a","scale":1000,"limit":3.0}`, "limit"),
		post("limit exponent", `{"id":"a","scale":1000,"limit":3e0}`, "limit"),
		post("limit overflow", `{"id":"a","scale":1000,"limit":9223372036854775808}`, "limit"),
		post("limit string", `{"id":"a","scale":1000,"limit":"3"}`, "limit"),
		post("limit null", `{"id":"a","scale":1000,"limit":null}`, "limit"),
		post("limit array", `{"id":"a","scale":1000,"limit":[3]}`, "limit"),
		post("hits negative", `{"id":"a","scale":1000,"limit":3,"hits":-1}`, "hits"),
		post("hits fraction", `{"id":"a","scale":1000,"limit":3,"hits":0.5}`, "hits"),
		post("hits string", `{"id":"a","scale":1000,"limit":3,"hits":"1"}`, "hits"),
		post("hits overflow", `{"id":"a","scale":1000,"limit":3,"hits":1e400}`, "hits"),
		post("algorithm number", `{"id":"a","scale":1000,"limit":3,"algorithm":0}`, "algorithm"),
		post("algorithm unknown", `{"id":"a","scale":1000,"limit":3,"algorithm":"token-bucket"}`, "algorithm"),
		post("too large", `{"id":"a","scale":1000,"limit":3`+strings.Repeat(" ", httpapi.MaxBodyBytes)+`}`, "body"),
		post("too large trailing", `{"id":"a","scale":1000,"limit":3}`+strings.Repeat(" ", httpapi.MaxBodyBytes), "body"),
		{"post with query", http.MethodPost, "id=a", `{"id":"a","scale":1000,"limit":3}`, "query", ""},

		refundGet("no hits", "id=a"+good, "hits"),
		refundGet("hits positive", "id=a"+good+"&hits=3", "hits"),
		refundGet("hits zero", "id=a"+good+"&hits=0", "hits"),
		refundGet("hits minus zero", "id=a"+good+"&hits=-0", "hits"),
		refundGet("hits overflow", "id=a"+good+"&hits=-9223372036854775808", "hits"),
		refundGet("hits word", "id=a"+good+"&hits=-x", "hits"),
		refundGet("missing limit", "id=a&scale=1000&hits=-1", "limit"),
		refundGet("rule unknown", "id=a&rule=nope&hits=-1", "rule"),
		refundGet("rule and scale", "id=a&rule=login&scale=1000&hits=-1", "scale"),
		refundGet("unknown param", "id=a"+good+"&hits=-1&x=1", "x"),
		refundPost("array", `[{"id":"a","scale":1000,"limit":3,"hits":-1}]`, "body"),
		refundPost("hits positive", `{"id":"a","scale":1000,"limit":3,"hits":3}`, "hits"),
		refundPost("hits string", `{"id":"a","scale":1000,"limit":3,"hits":"-3"}`, "hits"),
		refundPost("hits fraction", `{"id":"a","scale":1000,"limit":3,"hits":-1.5}`, "hits"),
		refundPost("no hits", `{"id":"a","scale":1000,"limit":3}`, "hits"),
		refundPost("not json", `x`, "body"),
		{"refund post with query", http.MethodPost, "id=a", `{"id":"a","scale":1000,"limit":3,"hits":-1}`, "query", "/refund"},
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	srv := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{Rules: badInputRules(t)})
	c := srv.Client()
	for _, tt := range badInputs() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := srv.URL + "/check_rate"
			if tt.path != "" {
				u = srv.URL + tt.path
			}
			if tt.query != "" {
				u += "?" + tt.query
			}
			r := apitest.Do(t, c, tt.method, u, tt.body)
			if r.Status != http.StatusBadRequest {
				t.Fatalf("%s ?%.80s %.80s: got status %d, want 400; body %s", tt.method, tt.query, tt.body, r.Status, r.Body)
			}
			if got := r.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", got)
			}
			var e apitest.ErrorBody
			apitest.DecodeStrict(t, r.Body, &e)
			if e.Field != tt.field {
				t.Errorf("got field %q, want %q (error %q)", e.Field, tt.field, e.Error)
			}
			if !strings.Contains(e.Error, tt.field) || len(e.Error) <= len(tt.field)+2 {
				t.Errorf("got error %q, want a sentence naming %q", e.Error, tt.field)
			}
		})
	}
	// Still serving, in a subtest that runs after the parallel ones.
	t.Cleanup(func() {
		r := apitest.Do(t, c, http.MethodGet, srv.URL+"/check_rate?id=after&scale=1000&limit=3", "")
		if r.Status != http.StatusOK {
			t.Errorf("after bad input: got status %d, want 200; body %s", r.Status, r.Body)
		}
	})
}

// TestGoodInput checks the accepted spellings of each parameter.
func TestGoodInput(t *testing.T) {
	t.Parallel()
	srv := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{})
	c := srv.Client()
	maxID := strings.Repeat("x", table.MaxIDLen)
	tests := []struct {
		name      string
		method    string
		query     string
		body      string
		wantID    string
		wantLimit int64
		wantCount int64
		wantW     int64 // RateLimit-Policy w=
	}{
		{"ms", "GET", "id=g1&scale=30000&limit=500", "", "g1", 500, 1, 30},
		{"duration", "GET", "id=g2&scale=30s&limit=500", "", "g2", 500, 1, 30},
		{"compound duration", "GET", "id=g3&scale=1m30s&limit=5", "", "g3", 5, 1, 90},
		{"sub-second", "GET", "id=g4&scale=1500ms&limit=5", "", "g4", 5, 1, 2},
		{"min scale", "GET", "id=g5&scale=1&limit=5", "", "g5", 5, 1, 1},
		{"max scale", "GET", "id=g6&scale=31622400000&limit=5", "", "g6", 5, 1, apitest.LongScaleSeconds},
		{"max limit", "GET", "id=g7&scale=1000&limit=9223372036854775807", "", "g7", math.MaxInt64, 1, 1},
		{"hits", "GET", "id=g8&scale=1000&limit=5&hits=4", "", "g8", 5, 4, 1},
		{"peek", "GET", "id=g9&scale=1000&limit=5&hits=0", "", "g9", 5, 0, 1},
		{"algorithm", "GET", "algorithm=fixed_window&id=g10&scale=1000&limit=5", "", "g10", 5, 1, 1},
		{"empty segments", "GET", "&id=g11&&scale=1000&limit=5&", "", "g11", 5, 1, 1},
		{"escaped", "GET", "id=a%20b+c%26&scale=1000&limit=5", "", "a b c&", 5, 1, 1},
		{"leading zeros", "GET", "id=g12&scale=01000&limit=005", "", "g12", 5, 1, 1},
		{"max id", "GET", "id=" + maxID + "&scale=1000&limit=5", "", maxID, 5, 1, 1},
		{"sliding window", "GET", "id=g13&scale=1000&limit=5&algorithm=sliding_window", "", "g13", 5, 1, 1},
		{"token bucket burst", "GET", "id=g14&scale=1000&limit=5&algorithm=token_bucket&burst=7", "", "g14", 7, 1, 1},
		{"leaky bucket", "GET", "id=g15&scale=1000&limit=5&algorithm=leaky_bucket", "", "g15", 1, 1, 1},
		{"burst on a window", "GET", "id=g16&scale=1000&limit=5&burst=9", "", "g16", 5, 1, 1},
		{"max refill", "GET", "id=g17&scale=8784h&limit=1&algorithm=token_bucket&burst=1", "", "g17", 1, 1, apitest.LongScaleSeconds},
		{"post ms", "POST", "", `{"id":"p1","scale":30000,"limit":500}`, "p1", 500, 1, 30},
		{"post duration", "POST", "", `{"id":"p2","scale":"30s","limit":500,"hits":2}`, "p2", 500, 2, 30},
		{"post ms string", "POST", "", `{"id":"p3","scale":"30000","limit":500}`, "p3", 500, 1, 30},
		{"post peek", "POST", "", `{"limit":5,"hits":0,"scale":1000,"id":"p4","algorithm":"fixed_window"}`, "p4", 5, 0, 1},
		{"post whitespace", "POST", "", " \n\t{ \"id\" : \"p5\" , \"scale\" : 1000 , \"limit\" : 5 }\n ", "p5", 5, 1, 1},
		{"post escaped id", "POST", "", `{"id":"p\u00e9\n","scale":1000,"limit":5}`, "p\u00e9\n", 5, 1, 1},
		{"post token bucket", "POST", "", `{"id":"p7","scale":"1s","limit":5,"algorithm":"token_bucket","burst":0}`, "p7", 5, 1, 1},
		{"post leaky burst", "POST", "", `{"id":"p8","scale":1000,"limit":5,"algorithm":"leaky_bucket","burst":3,"hits":2}`, "p8", 3, 2, 1},
		{"post max id", "POST", "", `{"id":"` + maxID + `","scale":1000,"limit":6}`, maxID, 6, 1, 1},
		{"post max body", "POST", "", `{"id":"p6","scale":1000,"limit":5}` + strings.Repeat(" ", httpapi.MaxBodyBytes-len(`{"id":"p6","scale":1000,"limit":5}`)), "p6", 5, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := srv.URL + "/check_rate"
			if tt.query != "" {
				u += "?" + tt.query
			}
			r := apitest.Do(t, c, tt.method, u, tt.body)
			if r.Status != http.StatusOK {
				t.Fatalf("got status %d, want 200; body %s", r.Status, r.Body)
			}
			d := apitest.Decision(t, r)
			if d.ID != tt.wantID || d.Limit != tt.wantLimit || d.Count != tt.wantCount || !d.Allowed {
				t.Errorf("got %+v, want id %q limit %d count %d allowed", d, tt.wantID, tt.wantLimit, tt.wantCount)
			}
			wantPolicy := fmt.Sprintf(`"default";q=%d;w=%d`, tt.wantLimit, tt.wantW)
			if got := r.Header.Get("RateLimit-Policy"); got != wantPolicy {
				t.Errorf("got RateLimit-Policy %q, want %q", got, wantPolicy)
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	plain := apitest.StartServer(t, &apitest.FakeChecker{}, httpapi.Options{})
	withMetrics := apitest.StartServer(t, &apitest.FakeChecker{}, httpapi.Options{Metrics: metrics.New()})
	tests := []struct {
		name      string
		srv       string
		method    string
		path      string
		want      int
		wantAllow string
		wantBody  string // exact, when set
	}{
		{"healthz", plain.URL, "GET", "/healthz", 200, "", `{"status":"ok"}`},
		{"healthz head", plain.URL, "HEAD", "/healthz", 200, "", ""},
		{"healthz post", plain.URL, "POST", "/healthz", 405, "GET, HEAD", ""},
		{"check_rate put", plain.URL, "PUT", "/check_rate", 405, "GET, POST", ""},
		{"check_rate delete", plain.URL, "DELETE", "/check_rate", 405, "GET, POST", ""},
		{"check_rate head", plain.URL, "HEAD", "/check_rate", 405, "GET, POST", ""},
		{"refund put", plain.URL, "PUT", "/refund", 405, "GET, POST", ""},
		{"refund delete", plain.URL, "DELETE", "/refund", 405, "GET, POST", ""},
		{"refund trailing slash", plain.URL, "GET", "/refund/", 404, "", ""},
		{"admin path on the public handler", plain.URL, "GET", "/rules", 404, "", ""},
		{"reset on the public handler", plain.URL, "POST", "/reset", 404, "", ""},
		{"unknown", plain.URL, "GET", "/nope", 404, "", ""},
		{"root", plain.URL, "GET", "/", 404, "", ""},
		{"trailing slash", plain.URL, "GET", "/check_rate/", 404, "", ""},
		{"metrics off", plain.URL, "GET", "/metrics", 404, "", ""},
		{"metrics", withMetrics.URL, "GET", "/metrics", 200, "", ""},
		{"metrics post", withMetrics.URL, "POST", "/metrics", 405, "GET, HEAD", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := apitest.Do(t, http.DefaultClient, tt.method, tt.srv+tt.path, "")
			if r.Status != tt.want {
				t.Fatalf("%s %s: got status %d, want %d; body %s", tt.method, tt.path, r.Status, tt.want, r.Body)
			}
			if got := r.Header.Get("Allow"); got != tt.wantAllow {
				t.Errorf("got Allow %q, want %q", got, tt.wantAllow)
			}
			if tt.wantBody != "" && string(r.Body) != tt.wantBody {
				t.Errorf("got body %q, want %q", r.Body, tt.wantBody)
			}
			if tt.want >= 400 && tt.method != "HEAD" {
				if got := r.Header.Get("Content-Type"); got != "application/json" {
					t.Errorf("got Content-Type %q, want application/json", got)
				}
				var e apitest.ErrorBody
				apitest.DecodeStrict(t, r.Body, &e)
				if e.Error == "" || e.Field != "" {
					t.Errorf("got error %+v, want a message and no field", e)
				}
			}
		})
	}
}

// step is one request of a flow and what it must get.
type step struct {
	query      string // after id=<flow id>&scale=<longScale>&
	wantStatus int
	want       apitest.DecisionBody // ID, ResetMs and RetryAfterMs are checked apart
}

func runFlow(t *testing.T, srvURL, id string, steps []step) {
	t.Helper()
	for i, s := range steps {
		u := srvURL + "/check_rate?id=" + url.QueryEscape(id) + "&scale=" + apitest.LongScale + "&" + s.query
		r := apitest.Do(t, http.DefaultClient, http.MethodGet, u, "")
		if r.Status != s.wantStatus {
			t.Fatalf("step %d (%s): got status %d, want %d; body %s", i, s.query, r.Status, s.wantStatus, r.Body)
		}
		d := apitest.Decision(t, r)
		apitest.CheckDecision(t, r, d, id)
		want := s.want
		want.ID, want.ResetMs, want.RetryAfterMs = id, d.ResetMs, d.RetryAfterMs
		if d != want {
			t.Errorf("step %d (%s): got %+v, want %+v", i, s.query, d, want)
		}
	}
}

func TestFlows(t *testing.T) {
	t.Parallel()
	srv := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{})
	srv429 := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{DenyStatus: http.StatusTooManyRequests})
	allow := func(count, limit int64) apitest.DecisionBody {
		return apitest.DecisionBody{Allowed: true, Count: count, Limit: limit, Remaining: limit - count}
	}
	deny := func(count, limit int64) apitest.DecisionBody {
		return apitest.DecisionBody{Allowed: false, Count: count, Limit: limit, Remaining: limit - count}
	}
	tests := []struct {
		name  string
		url   string
		steps []step
	}{
		{"limit 3", srv.URL, []step{
			{"limit=3", 200, allow(1, 3)},
			{"limit=3", 200, allow(2, 3)},
			{"limit=3", 200, allow(3, 3)},
			{"limit=3", 413, deny(3, 3)},
			{"limit=3", 413, deny(3, 3)},
		}},
		{"deny status 429", srv429.URL, []step{
			{"limit=1", 200, allow(1, 1)},
			{"limit=1", 429, deny(1, 1)},
		}},
		{"peek does not consume", srv.URL, []step{
			{"limit=2&hits=0", 200, allow(0, 2)},
			{"limit=2&hits=0", 200, allow(0, 2)},
			{"limit=2", 200, allow(1, 2)},
			{"limit=2&hits=0", 200, allow(1, 2)},
			{"limit=2", 200, allow(2, 2)},
			{"limit=2&hits=0", 413, deny(2, 2)},
			{"limit=2", 413, deny(2, 2)},
		}},
		{"cost over remaining", srv.URL, []step{
			{"limit=3&hits=2", 200, allow(2, 3)},
			{"limit=3&hits=2", 413, deny(2, 3)},
			{"limit=3&hits=0", 200, allow(2, 3)},
			{"limit=3&hits=1", 200, allow(3, 3)},
			{"limit=3&hits=1", 413, deny(3, 3)},
		}},
		{"cost over limit", srv.URL, []step{
			{"limit=3&hits=4", 413, deny(0, 3)},
			{"limit=3&hits=3", 200, allow(3, 3)},
		}},
		{"limits do not share counters", srv.URL, []step{
			{"limit=1", 200, allow(1, 1)},
			{"limit=2", 200, allow(1, 2)},
			{"limit=1", 413, deny(1, 1)},
			{"limit=2", 200, allow(2, 2)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runFlow(t, tt.url, "flow "+tt.name, tt.steps)
		})
	}
}

// TestPostFlow mixes GET and POST on one bucket: they are the same check.
func TestPostFlow(t *testing.T) {
	t.Parallel()
	srv := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{})
	body := `{"id":"mixed","scale":"` + apitest.LongScale + `","limit":2}`
	getURL := srv.URL + "/check_rate?id=mixed&scale=" + apitest.LongScale + "&limit=2"
	steps := []struct {
		method string
		want   int
		count  int64
	}{
		{"POST", 200, 1},
		{"GET", 200, 2},
		{"POST", 413, 2},
	}
	for i, s := range steps {
		u, b := getURL, ""
		if s.method == "POST" {
			u, b = srv.URL+"/check_rate", body
		}
		r := apitest.Do(t, http.DefaultClient, s.method, u, b)
		if r.Status != s.want {
			t.Fatalf("step %d %s: got status %d, want %d; body %s", i, s.method, r.Status, s.want, r.Body)
		}
		d := apitest.Decision(t, r)
		apitest.CheckDecision(t, r, d, "mixed")
		if d.Count != s.count {
			t.Errorf("step %d %s: got count %d, want %d", i, s.method, d.Count, s.count)
		}
	}
}

func TestIDRoundTrip(t *testing.T) {
	t.Parallel()
	srv := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{})
	ids := []string{
		`plain`,
		`with "quotes"`,
		`back\slash`,
		"new\nline\r\ttab",
		"nul\x00byte\x1f\x7f",
		"unicode 日本語 é 🚀",
		"line sep \u2028 para sep \u2029",
		`<script>&amp;</script>`,
		`+%&=?#;`,
		strings.Repeat(`"`, table.MaxIDLen),
	}
	for i, id := range ids {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			// What a client decoding the JSON must see: the id.
			enc, _ := json.Marshal(id)
			var want string
			if err := json.Unmarshal(enc, &want); err != nil {
				t.Fatal(err)
			}
			get := apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?scale=1000&limit=9&id="+url.QueryEscape(id), "")
			post := apitest.Do(t, http.DefaultClient, "POST", srv.URL+"/check_rate", `{"scale":1000,"limit":9,"id":`+string(enc)+`}`)
			for _, r := range []apitest.Response{get, post} {
				if r.Status != 200 {
					t.Fatalf("got status %d, want 200; body %s", r.Status, r.Body)
				}
				if !json.Valid(r.Body) {
					t.Fatalf("got invalid JSON %q", r.Body)
				}
				if got := apitest.Decision(t, r).ID; got != want {
					t.Errorf("got id %q, want %q", got, want)
				}
			}
		})
	}
	// An id that is not valid UTF-8 could not come back as sent: it is refused.
	const bad = "invalid \xff utf-8 \xc3"
	get := apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?scale=1000&limit=9&id="+url.QueryEscape(bad), "")
	post := apitest.Do(t, http.DefaultClient, "POST", srv.URL+"/check_rate", `{"scale":1000,"limit":9,"id":"`+bad+`"}`)
	for _, r := range []apitest.Response{get, post} {
		if want := `{"error":"id: must be valid UTF-8","field":"id"}`; r.Status != 400 || string(r.Body) != want {
			t.Errorf("id %q: got %d %s, want 400 %s", bad, r.Status, r.Body, want)
		}
	}
}

// TestExactResponse checks the body and headers byte for byte against
// decisions with awkward durations, to pin down the rounding.
func TestExactResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		opts        httpapi.Options
		query       string
		d           table.Decision
		wantStatus  int
		wantBody    string
		wantRL      string
		wantPolicy  string
		wantRetryAf string
	}{
		{
			name:       "allowed",
			query:      "id=a&scale=30s&limit=500",
			d:          table.Decision{Allowed: true, Count: 1, Limit: 500, Remaining: 499, ResetAfter: 29 * time.Second},
			wantStatus: 200,
			wantBody:   `{"allowed":true,"id":"a","count":1,"limit":500,"remaining":499,"reset_ms":29000,"retry_after_ms":0}`,
			wantRL:     `"default";r=499;t=29`,
			wantPolicy: `"default";q=500;w=30`,
		},
		{
			name:       "rounded up",
			query:      "id=b&scale=1500&limit=5",
			d:          table.Decision{Allowed: true, Count: 2, Limit: 5, Remaining: 3, ResetAfter: 1000*time.Millisecond + 1},
			wantStatus: 200,
			wantBody:   `{"allowed":true,"id":"b","count":2,"limit":5,"remaining":3,"reset_ms":1001,"retry_after_ms":0}`,
			wantRL:     `"default";r=3;t=2`,
			wantPolicy: `"default";q=5;w=2`,
		},
		{
			name:        "denied",
			query:       "id=c&scale=1m&limit=5",
			d:           table.Decision{Count: 5, Limit: 5, ResetAfter: 2*time.Second + 1, RetryAfter: 2*time.Second + 1},
			wantStatus:  413,
			wantBody:    `{"allowed":false,"id":"c","count":5,"limit":5,"remaining":0,"reset_ms":2001,"retry_after_ms":2001}`,
			wantRL:      `"default";r=0;t=3`,
			wantPolicy:  `"default";q=5;w=60`,
			wantRetryAf: "3",
		},
		{
			name:        "denied sub-second",
			opts:        httpapi.Options{DenyStatus: 429},
			query:       "id=d&scale=10&limit=1",
			d:           table.Decision{Count: 1, Limit: 1, ResetAfter: time.Microsecond, RetryAfter: time.Microsecond},
			wantStatus:  429,
			wantBody:    `{"allowed":false,"id":"d","count":1,"limit":1,"remaining":0,"reset_ms":1,"retry_after_ms":1}`,
			wantRL:      `"default";r=0;t=1`,
			wantPolicy:  `"default";q=1;w=1`,
			wantRetryAf: "1",
		},
		{
			name:        "denied zero retry",
			query:       "id=e&scale=1000&limit=1",
			d:           table.Decision{Count: 1, Limit: 1},
			wantStatus:  413,
			wantBody:    `{"allowed":false,"id":"e","count":1,"limit":1,"remaining":0,"reset_ms":0,"retry_after_ms":0}`,
			wantRL:      `"default";r=0;t=0`,
			wantPolicy:  `"default";q=1;w=1`,
			wantRetryAf: "1",
		},
		{
			name:       "escaped id",
			query:      "id=%22x%0A%5C&scale=1000&limit=1",
			d:          table.Decision{Allowed: true, Count: 1, Limit: 1, ResetAfter: time.Millisecond},
			wantStatus: 200,
			wantBody:   `{"allowed":true,"id":"\"x\u000a\\","count":1,"limit":1,"remaining":0,"reset_ms":1,"retry_after_ms":0}`,
			wantRL:     `"default";r=0;t=1`,
			wantPolicy: `"default";q=1;w=1`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := apitest.StartServer(t, &apitest.FakeChecker{D: tt.d}, tt.opts)
			r := apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?"+tt.query, "")
			if r.Status != tt.wantStatus {
				t.Errorf("got status %d, want %d", r.Status, tt.wantStatus)
			}
			if string(r.Body) != tt.wantBody {
				t.Errorf("got body\n%s\nwant\n%s", r.Body, tt.wantBody)
			}
			for k, want := range map[string]string{
				"RateLimit":        tt.wantRL,
				"RateLimit-Policy": tt.wantPolicy,
				"Retry-After":      tt.wantRetryAf,
				"Content-Type":     "application/json",
				"Cache-Control":    "no-store",
				"Content-Length":   strconv.Itoa(len(tt.wantBody)),
			} {
				if got := r.Header.Get(k); got != want {
					t.Errorf("got %s %q, want %q", k, got, want)
				}
			}
		})
	}
}

// TestCheckerErrors maps Checker errors to statuses.
func TestCheckerErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		err       error
		want      int
		wantField string
		wantLog   bool
	}{
		{"invalid", &table.FieldError{Field: "limit", Message: "must not be negative"}, 400, "limit", false},
		{"wrapped invalid", fmt.Errorf("shard 3: %w", &table.FieldError{Field: "id", Message: "is required"}), 400, "id", false},
		{"bare invalid", table.ErrInvalid, 400, "", false},
		{"canceled", context.Canceled, 503, "", false},
		{"deadline", fmt.Errorf("ask: %w", context.DeadlineExceeded), 503, "", false},
		{"stopped", actors.ErrStopped, 503, "", false},
		{"unavailable", fmt.Errorf("shard 1: %w", actors.ErrUnavailable), 503, "", true},
		{"other", errors.New("disk on fire"), 503, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logged atomic.Int64
			logger := slog.New(countHandler{&logged})
			srv := apitest.StartServer(t, &apitest.FakeChecker{Err: tt.err}, httpapi.Options{Logger: logger})
			r := apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?id=a&scale=1000&limit=1", "")
			if r.Status != tt.want {
				t.Fatalf("got status %d, want %d; body %s", r.Status, tt.want, r.Body)
			}
			var e apitest.ErrorBody
			apitest.DecodeStrict(t, r.Body, &e)
			if e.Field != tt.wantField || e.Error == "" {
				t.Errorf("got %+v, want field %q and a message", e, tt.wantField)
			}
			wantRetry := ""
			if tt.want == 503 {
				wantRetry = "1"
			}
			if got := r.Header.Get("Retry-After"); got != wantRetry {
				t.Errorf("got Retry-After %q, want %q", got, wantRetry)
			}
			if got := logged.Load() > 0; got != tt.wantLog {
				t.Errorf("got logged %v, want %v", got, tt.wantLog)
			}
		})
	}
}

// countHandler is a slog.Handler that counts records.
type countHandler struct{ n *atomic.Int64 }

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// TestStopped checks that a stopped system is answered 503, not allowed.
func TestStopped(t *testing.T) {
	t.Parallel()
	sys, err := actors.Start(context.Background(), actors.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.StartServer(t, sys, httpapi.Options{})
	if err := sys.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?id=a&scale=1000&limit=1", "")
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("after Stop: got status %d, want 503; body %s", r.Status, r.Body)
	}
	if got := r.Header.Get("Retry-After"); got != "1" {
		t.Errorf("got Retry-After %q, want 1", got)
	}
	var e apitest.ErrorBody
	apitest.DecodeStrict(t, r.Body, &e)
	if e.Error == "" || e.Field != "" {
		t.Errorf("got %+v, want a message and no field", e)
	}
}

func TestConcurrentOneID(t *testing.T) {
	t.Parallel()
	const (
		goroutines = 200
		perG       = 5
		limit      = 100
	)
	srv := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{})
	tr := &http.Transport{MaxIdleConnsPerHost: goroutines}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	u := srv.URL + "/check_rate?id=hot&scale=" + apitest.LongScale + "&limit=" + strconv.Itoa(limit)

	var allowed, denied, other atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range perG {
				resp, err := client.Get(u)
				if err != nil {
					other.Add(1)
					t.Errorf("GET: %v", err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					allowed.Add(1)
				case 413:
					denied.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != limit {
		t.Errorf("got %d allowed, want %d", got, limit)
	}
	if got, want := denied.Load(), int64(goroutines*perG-limit); got != want {
		t.Errorf("got %d denied, want %d", got, want)
	}
	if got := other.Load(); got != 0 {
		t.Errorf("got %d other answers, want 0", got)
	}
}

// TestCheckerValidates: the handler checks each parameter as it parses it
// and leaves the table's rules of a whole request to the Checker, which
// validates every request once: a check whose refill time the table refuses
// is sent on, and the Checker's error answered 400 as it says. A rule whose
// policy the table refuses is known from its Set, with no request sent.
func TestCheckerValidates(t *testing.T) {
	t.Parallel()
	f := &apitest.FakeChecker{Err: &table.FieldError{Field: "burst", Message: table.MsgRefill}}
	store := apitest.NewStore(t, rules.Rule{Name: "slow", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: table.MaxScale, Limit: 1, Burst: 2}})
	srv := apitest.StartServer(t, f, httpapi.Options{Rules: store})

	r := apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?id=a&scale=8784h&limit=1&algorithm=token_bucket&burst=2", "")
	const want = `{"error":"burst: burst × scale/limit (the time to refill) must be at most 8784h0m0s","field":"burst"}`
	if r.Status != 400 || string(r.Body) != want {
		t.Errorf("got %d %s, want 400 %s", r.Status, r.Body, want)
	}
	wantReq := table.Request{ID: "a", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: table.MaxScale, Limit: 1, Burst: 2}, Hits: 1}
	if got := f.Requests(); len(got) != 1 || got[0] != wantReq {
		t.Errorf("got requests %+v to the Checker, want exactly %+v", got, wantReq)
	}

	r = apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?id=a&rule=slow", "")
	if r.Status != 400 || len(f.Requests()) != 1 {
		t.Errorf("by rule slow: got %d %s and %d requests to the Checker, want 400 and none more", r.Status, r.Body, len(f.Requests()))
	}
}
