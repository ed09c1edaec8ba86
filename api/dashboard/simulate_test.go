package dashboard

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

var jsonBearer = map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json"}

// simulate POSTs body to /simulate and decodes a 200 answer.
func simulate(t *testing.T, url, body string) SimResult {
	t.Helper()
	resp, b := do(t, nil, http.MethodPost, url+PathSimulate, body, jsonBearer)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /simulate %s: status %d, body %s", body, resp.StatusCode, b)
	}
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", got)
	}
	var r SimResult
	if err := json.Unmarshal([]byte(b), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func admitted(r SimResult) map[string]int {
	m := map[string]int{}
	for _, a := range r.Algorithms {
		m[a.Algorithm] = a.Admitted
	}
	return m
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestSimulateBoundary reproduces table's TestBoundaryBurst (the seed's
// analysis) through POST /simulate: max−1 hits at 0.95 s and max at 1.05 s,
// max = 100 per second, admit 199 (fixed), 104 (sliding), 110 (token) and
// 2 (leaky), the table's own oracle.
func TestSimulateBoundary(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, Options{})
	for _, body := range []string{
		// The shape's defaults: before = limit−1, after = limit, offset = scale/20.
		`{"policy":{"limit":100,"scale":"1s"},"traffic":{"shape":"boundary"}}`,
		// The same, spelled out, with scale in milliseconds.
		`{"policy":{"algorithm":"token_bucket","limit":100,"scale":1000,"burst":0},"traffic":{"shape":"boundary","before":99,"after":100,"offset":"50ms","duration":"2s"}}`,
	} {
		r := simulate(t, srv.URL, body)
		want := map[string]int{"fixed_window": 199, "sliding_window": 104, "token_bucket": 110, "leaky_bucket": 2}
		if got := admitted(r); !equalMaps(got, want) {
			t.Errorf("%s: admitted %v, want %v", body, got, want)
		}
		if r.Hits != 199 || r.DurationMs != 2000 || r.BucketMs != 10 || len(r.Offered) != 200 {
			t.Errorf("%s: hits %d, duration %v ms, bucket %d ms, %d buckets; want 199, 2000, 10, 200", body, r.Hits, r.DurationMs, r.BucketMs, len(r.Offered))
		}
		// The hits land in the buckets of 950 ms and 1050 ms.
		if r.Offered[95] != 99 || r.Offered[105] != 100 || sum(r.Offered) != 199 {
			t.Errorf("%s: offered %d at 950ms, %d at 1050ms, %d in all; want 99, 100, 199", body, r.Offered[95], r.Offered[105], sum(r.Offered))
		}
		for _, a := range r.Algorithms {
			if sum(a.AdmittedPerBucket) != a.Admitted || sum(a.DeniedPerBucket) != a.Denied || a.Admitted+a.Denied != 199 {
				t.Errorf("%s: %s: per-bucket sums %d/%d, totals %d/%d", body, a.Algorithm, sum(a.AdmittedPerBucket), sum(a.DeniedPerBucket), a.Admitted, a.Denied)
			}
		}
	}
	r := simulate(t, srv.URL, `{"policy":{"algorithm":"sliding_window","limit":100,"scale":"1s"},"traffic":{"shape":"boundary"}}`)
	names := []string{}
	for _, a := range r.Algorithms {
		names = append(names, a.Algorithm+" "+a.Policy)
	}
	if want := []string{"fixed_window 100/1s", "sliding_window 100/1s/sliding_window", "token_bucket 100/1s/token_bucket", "leaky_bucket 100/1s/leaky_bucket"}; r.Selected != "sliding_window" || !slices.Equal(names, want) {
		t.Errorf("selected %q, algorithms %v; want sliding_window and %v", r.Selected, names, want)
	}
}

func equalMaps(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// oracle runs arrivals through a fresh table per algorithm, directly,
// from a start aligned to the scale, and returns what each admitted.
func oracle(p table.Policy, arrivals []time.Duration) map[string]int {
	base := time.UnixMilli(p.Scale.Milliseconds() * 1_000_000)
	got := map[string]int{}
	for _, alg := range []table.Algorithm{table.FixedWindow, table.SlidingWindow, table.TokenBucket, table.LeakyBucket} {
		tb := table.New(table.Config{})
		q := p
		q.Algorithm = alg
		got[alg.String()] = 0
		for _, a := range arrivals {
			if tb.Apply(table.Request{ID: "x", Policy: q, Hits: 1}, base.Add(a)).Allowed {
				got[alg.String()]++
			}
		}
	}
	return got
}

func seconds(f float64) time.Duration { return time.Duration(math.Round(f * float64(time.Second))) }

// TestSimulateShapes checks each shape's arrivals against their
// definition, computed here, and what the algorithms admit against the
// table run directly on them.
func TestSimulateShapes(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, Options{})
	var steady, bursts, single, rising, falling []time.Duration
	for k := range 60 { // 20/s for 3 s
		steady = append(steady, time.Duration(k)*50*time.Millisecond)
	}
	for b := range 3 { // 25 at once, each second
		for range 25 {
			bursts = append(bursts, time.Duration(b)*time.Second)
		}
	}
	for range 15 {
		single = append(single, 500*time.Millisecond)
	}
	for k := range 40 { // 0 → 40/s over 2 s: 10·t² hits by t
		rising = append(rising, seconds(math.Sqrt(float64(k)/10)))
	}
	for k := range 40 { // 40/s → 0 over 2 s: 40·t − 10·t² hits by t
		falling = append(falling, seconds(2-math.Sqrt(4-float64(k)/10)))
	}
	for _, c := range []struct {
		name, body string
		policy     table.Policy
		arrivals   []time.Duration
		span       time.Duration
		bucketMs   int64
	}{
		{"steady", `{"policy":{"limit":10,"scale":"1s"},"traffic":{"shape":"steady","rate":20,"duration":"3s"}}`,
			table.Policy{Limit: 10, Scale: time.Second}, steady, 3 * time.Second, 20},
		{"bursts", `{"policy":{"limit":10,"scale":"1s","burst":5},"traffic":{"shape":"burst","hits":25,"every":"1s","duration":"3s"},"bucket":"1s"}`,
			table.Policy{Limit: 10, Scale: time.Second, Burst: 5}, bursts, 3 * time.Second, 1000},
		// The duration defaults to at + 2 × scale.
		{"single burst", `{"policy":{"limit":10,"scale":"1s"},"traffic":{"shape":"burst","hits":15,"at":500}}`,
			table.Policy{Limit: 10, Scale: time.Second}, single, 2500 * time.Millisecond, 20},
		{"rising ramp", `{"policy":{"limit":15,"scale":"500ms","algorithm":"token_bucket"},"traffic":{"shape":"ramp","to_rate":40,"duration":"2s"},"bucket":"100ms"}`,
			table.Policy{Limit: 15, Scale: 500 * time.Millisecond, Algorithm: table.TokenBucket}, rising, 2 * time.Second, 100},
		{"falling ramp", `{"policy":{"limit":15,"scale":"500ms"},"traffic":{"shape":"ramp","from_rate":40,"to_rate":0,"duration":"2s"},"bucket":"100ms"}`,
			table.Policy{Limit: 15, Scale: 500 * time.Millisecond}, falling, 2 * time.Second, 100},
	} {
		r := simulate(t, srv.URL, c.body)
		n := int((c.span + time.Duration(c.bucketMs)*time.Millisecond - 1) / (time.Duration(c.bucketMs) * time.Millisecond))
		offered := make([]int, n)
		for _, a := range c.arrivals {
			offered[a/(time.Duration(c.bucketMs)*time.Millisecond)]++
		}
		if r.Hits != len(c.arrivals) || r.BucketMs != c.bucketMs || r.DurationMs != float64(c.span.Milliseconds()) || !slices.Equal(r.Offered, offered) {
			t.Errorf("%s: %d hits over %v ms in buckets of %d ms: %v;\nwant %d over %v in %d ms: %v",
				c.name, r.Hits, r.DurationMs, r.BucketMs, r.Offered, len(c.arrivals), c.span, c.bucketMs, offered)
		}
		if got, want := admitted(r), oracle(c.policy, c.arrivals); !equalMaps(got, want) {
			t.Errorf("%s: admitted %v, the table admits %v", c.name, got, want)
		}
	}
}

// TestSimulatePoisson: arrivals depend on the seed only, average the rate,
// and every hit is answered by every algorithm.
func TestSimulatePoisson(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, Options{})
	body := func(seed int) string {
		return `{"policy":{"limit":50,"scale":"1s"},"traffic":{"shape":"poisson","rate":100,"duration":"10s","seed":` + strconv.Itoa(seed) + `}}`
	}
	a, b, c := simulate(t, srv.URL, body(7)), simulate(t, srv.URL, body(7)), simulate(t, srv.URL, body(8))
	if !slices.Equal(a.Offered, b.Offered) {
		t.Error("the same seed gave different arrivals")
	}
	if slices.Equal(a.Offered, c.Offered) {
		t.Error("seeds 7 and 8 gave the same arrivals")
	}
	// 1000 expected; a Poisson count is within 5 standard deviations (±158) but for 1 in 3.5 million seeds.
	if a.Hits < 842 || a.Hits > 1158 {
		t.Errorf("seed 7: %d hits over 10 s at 100/s", a.Hits)
	}
	for _, alg := range a.Algorithms {
		if alg.Admitted+alg.Denied != a.Hits || alg.Admitted > 50*10+50 {
			t.Errorf("%s: admitted %d denied %d of %d", alg.Algorithm, alg.Admitted, alg.Denied, a.Hits)
		}
	}
}

// TestSimulateValidation: every input out of range is answered 400 naming
// its field.
func TestSimulateValidation(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, Options{})
	policy := `"policy":{"limit":10,"scale":"1s"}`
	for _, c := range []struct{ body, field string }{
		{`{"traffic":{"shape":"boundary"}}`, "policy"},
		{`{"policy":[],"traffic":{"shape":"boundary"}}`, "policy"},
		{`{"policy":{"scale":"1s"},"traffic":{"shape":"boundary"}}`, "policy.limit"},
		{`{"policy":{"limit":-1,"scale":"1s"},"traffic":{"shape":"boundary"}}`, "policy.limit"},
		{`{"policy":{"limit":"ten","scale":"1s"},"traffic":{"shape":"boundary"}}`, "policy.limit"},
		{`{"policy":{"limit":1.5,"scale":"1s"},"traffic":{"shape":"boundary"}}`, "policy.limit"},
		{`{"policy":{"limit":10},"traffic":{"shape":"boundary"}}`, "policy.scale"},
		{`{"policy":{"limit":10,"scale":"0s"},"traffic":{"shape":"boundary"}}`, "policy.scale"},
		{`{"policy":{"limit":10,"scale":"1.5ms"},"traffic":{"shape":"boundary"}}`, "policy.scale"},
		{`{"policy":{"limit":10,"scale":"fast"},"traffic":{"shape":"boundary"}}`, "policy.scale"},
		{`{"policy":{"limit":10,"scale":"1s","burst":-1},"traffic":{"shape":"boundary"}}`, "policy.burst"},
		{`{"policy":{"limit":1,"scale":"366d"},"traffic":{"shape":"boundary"}}`, "policy.scale"}, // no such unit
		{`{"policy":{"limit":1,"scale":"8785h"},"traffic":{"shape":"boundary","duration":"1h"}}`, "policy.scale"},
		// A bucket that takes longer than a leap year to refill: token and leaky buckets refuse it.
		{`{"policy":{"limit":1,"scale":"8784h","burst":2},"traffic":{"shape":"boundary","duration":"1h"}}`, "policy.burst"},
		{`{"policy":{"limit":10,"scale":"1s","algorithm":"gcra"},"traffic":{"shape":"boundary"}}`, "policy.algorithm"},
		{`{"policy":{"limit":10,"scale":"1s","algorithm":7},"traffic":{"shape":"boundary"}}`, "policy.algorithm"},
		{`{"policy":{"limit":10,"scale":"1s","rate":5},"traffic":{"shape":"boundary"}}`, "policy.rate"},
		{`{` + policy + `}`, "traffic"},
		{`{` + policy + `,"traffic":{}}`, "traffic.shape"},
		{`{` + policy + `,"traffic":{"shape":"sawtooth"}}`, "traffic.shape"},
		{`{` + policy + `,"traffic":{"shape":"steady","duration":"1s"}}`, "traffic.rate"},
		{`{` + policy + `,"traffic":{"shape":"steady","rate":0,"duration":"1s"}}`, "traffic.rate"},
		{`{` + policy + `,"traffic":{"shape":"steady","rate":-3,"duration":"1s"}}`, "traffic.rate"},
		{`{` + policy + `,"traffic":{"shape":"steady","rate":"3","duration":"1s"}}`, "traffic.rate"},
		{`{` + policy + `,"traffic":{"shape":"steady","rate":100001,"duration":"1s"}}`, "traffic.rate"},
		{`{` + policy + `,"traffic":{"shape":"steady","rate":3}}`, "traffic.duration"},
		{`{` + policy + `,"traffic":{"shape":"steady","rate":3,"duration":0}}`, "traffic.duration"},
		{`{` + policy + `,"traffic":{"shape":"steady","rate":3,"duration":"-1s"}}`, "traffic.duration"},
		{`{` + policy + `,"traffic":{"shape":"steady","rate":3,"duration":"24h0m0.001s"}}`, "traffic.duration"},
		{`{` + policy + `,"traffic":{"shape":"steady","rate":3,"duration":"1s","hits":4}}`, "traffic.hits"},
		{`{` + policy + `,"traffic":{"shape":"steady","rate":3,"duration":"1s","colour":4}}`, "traffic.colour"},
		{`{` + policy + `,"traffic":{"shape":"burst"}}`, "traffic.hits"},
		{`{` + policy + `,"traffic":{"shape":"burst","hits":0}}`, "traffic.hits"},
		{`{` + policy + `,"traffic":{"shape":"burst","hits":100001}}`, "traffic.hits"},
		{`{` + policy + `,"traffic":{"shape":"burst","hits":5,"every":"1s"}}`, "traffic.duration"},
		{`{` + policy + `,"traffic":{"shape":"burst","hits":5,"at":"3s","duration":"2s"}}`, "traffic.at"},
		{`{` + policy + `,"traffic":{"shape":"burst","hits":5,"at":"-1s"}}`, "traffic.at"},
		{`{"policy":{"limit":10,"scale":"24h"},"traffic":{"shape":"burst","hits":5}}`, "traffic.duration"},
		{`{` + policy + `,"traffic":{"shape":"ramp","duration":"1s"}}`, "traffic.to_rate"},
		{`{` + policy + `,"traffic":{"shape":"ramp","to_rate":0,"duration":"1s"}}`, "traffic.to_rate"},
		{`{` + policy + `,"traffic":{"shape":"ramp","from_rate":-1,"to_rate":4,"duration":"1s"}}`, "traffic.from_rate"},
		{`{` + policy + `,"traffic":{"shape":"boundary","offset":0}}`, "traffic.offset"},
		{`{` + policy + `,"traffic":{"shape":"boundary","offset":"2s"}}`, "traffic.offset"},
		{`{` + policy + `,"traffic":{"shape":"boundary","before":-1}}`, "traffic.before"},
		{`{` + policy + `,"traffic":{"shape":"boundary","before":60000,"after":40001}}`, "traffic.after"},
		{`{` + policy + `,"traffic":{"shape":"boundary","duration":"1s"}}`, "traffic.duration"},
		{`{"policy":{"limit":10,"scale":"13h"},"traffic":{"shape":"boundary"}}`, "traffic.duration"},
		{`{` + policy + `,"traffic":{"shape":"poisson","duration":"1s"}}`, "traffic.rate"},
		{`{` + policy + `,"traffic":{"shape":"poisson","rate":5,"duration":"1s","seed":-1}}`, "traffic.seed"},
		{`{` + policy + `,"traffic":{"shape":"poisson","rate":5,"duration":"1s","seed":"x"}}`, "traffic.seed"},
		{`{` + policy + `,"traffic":{"shape":"boundary"},"bucket":0}`, "bucket"},
		{`{` + policy + `,"traffic":{"shape":"boundary"},"bucket":"1.5ms"}`, "bucket"},
		{`{` + policy + `,"traffic":{"shape":"steady","rate":1,"duration":"10s"},"bucket":"4ms"}`, "bucket"},
		{`{` + policy + `,"traffic":{"shape":"boundary"},"speed":1}`, "speed"},
		{`{` + policy + `,"traffic":{"shape":"boundary"},"bucket":"1ms","bucket":"2ms"}`, "bucket"},
	} {
		resp, body := do(t, nil, http.MethodPost, srv.URL+PathSimulate, c.body, jsonBearer)
		wantFieldError(t, c.body, resp, body, c.field)
	}
}

// TestSimulateBounds: at most MaxSimHits hits and MaxSimSpan of virtual
// time; one more is 400 naming the field that asked for it.
func TestSimulateBounds(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, Options{})
	policy := `"policy":{"limit":1000,"scale":"1s"}`
	r := simulate(t, srv.URL, `{`+policy+`,"traffic":{"shape":"steady","rate":100000,"duration":"1s"}}`)
	if r.Hits != MaxSimHits {
		t.Errorf("100000/s for 1 s: %d hits, want %d", r.Hits, MaxSimHits)
	}
	r = simulate(t, srv.URL, `{`+policy+`,"traffic":{"shape":"steady","rate":1,"duration":"24h"}}`)
	if r.Hits != 86400 || r.DurationMs != 86400e3 || r.BucketMs != 500_000 || len(r.Offered) != 173 {
		t.Errorf("1/s for 24 h: %d hits, %v ms in %d buckets of %d ms", r.Hits, r.DurationMs, len(r.Offered), r.BucketMs)
	}
	for _, c := range []struct{ body, field string }{
		{`{` + policy + `,"traffic":{"shape":"steady","rate":100000,"duration":"1.00001s"}}`, "traffic.rate"},
		{`{` + policy + `,"traffic":{"shape":"burst","hits":50001,"every":"1s","duration":"2s"}}`, "traffic.hits"},
		{`{` + policy + `,"traffic":{"shape":"ramp","to_rate":100000,"duration":"2.0001s"}}`, "traffic.to_rate"},
		{`{` + policy + `,"traffic":{"shape":"poisson","rate":100000,"duration":"2s"}}`, "traffic.rate"},
		{`{` + policy + `,"traffic":{"shape":"steady","rate":1,"duration":"24h0m0.000000001s"}}`, "traffic.duration"},
	} {
		resp, body := do(t, nil, http.MethodPost, srv.URL+PathSimulate, c.body, jsonBearer)
		wantFieldError(t, c.body, resp, body, c.field)
	}
}

// TestSimulateBody: not JSON, JSON of another type, or too long a body is a
// 4xx, as is any method but POST.
func TestSimulateBody(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, Options{})
	for _, c := range []struct {
		name, body, ctype string
		status            int
		msg               string
	}{
		{"no content type", `{}`, "", http.StatusUnsupportedMediaType, "the body must be JSON, sent with Content-Type: application/json"},
		{"a form", `a=1`, "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType, "the body must be JSON, sent with Content-Type: application/json"},
		{"not JSON", `{"policy":`, "application/json", http.StatusBadRequest, "the body is not valid JSON"},
		{"trailing data", `{} {}`, "application/json", http.StatusBadRequest, "the body is not valid JSON"},
		{"an array", `[]`, "application/json; charset=utf-8", http.StatusBadRequest, "body must be a JSON object"},
		{"too long", `{"policy":"` + strings.Repeat("x", maxSimBody) + `"}`, "application/json", http.StatusBadRequest, "the body is larger than 16384 bytes"},
	} {
		h := map[string]string{"Authorization": "Bearer " + testToken}
		if c.ctype != "" {
			h["Content-Type"] = c.ctype
		}
		resp, body := do(t, nil, http.MethodPost, srv.URL+PathSimulate, c.body, h)
		var e apiError
		_ = json.Unmarshal([]byte(body), &e)
		if resp.StatusCode != c.status || e.Error != c.msg || e.Field != "" {
			t.Errorf("%s: got %d %q, want %d %q", c.name, resp.StatusCode, body, c.status, c.msg)
		}
	}
	resp, body := do(t, nil, http.MethodGet, srv.URL+PathSimulate, "", bearer)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET /simulate: %d Allow %q %s, want 405 Allow POST", resp.StatusCode, resp.Header.Get("Allow"), body)
	}
}

// FuzzParseSimulation: any body is either refused with a field error or
// gives a simulation within the bounds, never a panic.
func FuzzParseSimulation(f *testing.F) {
	f.Add(`{"policy":{"limit":100,"scale":"1s"},"traffic":{"shape":"boundary"}}`)
	f.Add(`{"policy":{"limit":3,"scale":7,"burst":2,"algorithm":"leaky_bucket"},"traffic":{"shape":"ramp","from_rate":9,"to_rate":0.5,"duration":"3s"},"bucket":5}`)
	f.Add(`{"policy":{"limit":3,"scale":"1h"},"traffic":{"shape":"poisson","rate":0.001,"duration":"24h","seed":3}}`)
	f.Add(`{"policy":{"limit":1,"scale":"1ms"},"traffic":{"shape":"burst","hits":3,"every":"1ns","duration":"1ms"}}`)
	f.Add(`{"policy":{"limit":1,"scale":"1ms"},"traffic":{"shape":"steady","rate":1e-300,"duration":"24h"}}`)
	f.Fuzz(func(t *testing.T, body string) {
		s, err := parseSimulation([]byte(body))
		if err != nil {
			var fe *fieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a field error", err)
			}
			return
		}
		if len(s.arrivals) > MaxSimHits || s.span <= 0 || s.span > MaxSimSpan || s.bucket < time.Millisecond ||
			(s.span+s.bucket-1)/s.bucket > MaxSimBuckets {
			t.Fatalf("out of bounds: %d hits, span %v, bucket %v", len(s.arrivals), s.span, s.bucket)
		}
		for i, a := range s.arrivals {
			if a < 0 || a >= s.span || (i > 0 && a < s.arrivals[i-1]) {
				t.Fatalf("arrival %d at %v: out of [0, %v) or out of order", i, a, s.span)
			}
		}
		if len(s.arrivals) <= 1000 {
			r := s.run()
			for _, a := range r.Algorithms {
				if a.Admitted+a.Denied != len(s.arrivals) {
					t.Fatalf("%s: %d + %d answers for %d hits", a.Algorithm, a.Admitted, a.Denied, len(s.arrivals))
				}
			}
		}
	})
}
