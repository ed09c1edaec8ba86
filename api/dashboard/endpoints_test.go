package dashboard

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTop is a TopKeys that records what it was asked.
type fakeTop struct {
	mu   sync.Mutex
	asks []string
	list TopList
}

func (f *fakeTop) Top(by TopBy, window TopWindow, n int, now time.Time) TopList {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asks = append(f.asks, string(by)+" "+string(window)+" "+itoa(n)+" "+now.Format(time.RFC3339))
	return f.list
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestTop: GET /top passes by, window and n (defaults hits, 1m, 20) and
// the clock's now to the provider, and answers its list as JSON, the ids
// as they are (an id of HTML markup included), at most n of them, with
// the sampling rate and whether the counts are sampled.
func TestTop(t *testing.T) {
	t.Parallel()
	xss := `<img src=x onerror=alert(1)>`
	top := &fakeTop{list: TopList{Total: 1000, Bound: 7, Sample: 32, Sampled: true, Keys: []TopKey{
		{ID: xss, Label: "login", Count: 600, Min: 593},
		{ID: "alice", Label: "100/1s", Count: 300, Min: 300},
		{ID: strings.Repeat("l", 56), Truncated: true, Label: "api", Count: 9, Min: 2},
	}}}
	srv, _ := server(t, Options{Top: top})
	body := getJSON(t, srv.URL+"/top", http.StatusOK, nil)
	want := `{"by":"hits","window":"1m","total":1000,"bound":7,"sample":32,"sampled":true,"keys":[` +
		`{"id":"\u003cimg src=x onerror=alert(1)\u003e","label":"login","count":600,"min":593},` +
		`{"id":"alice","label":"100/1s","count":300,"min":300},` +
		`{"id":"` + strings.Repeat("l", 56) + `","truncated":true,"label":"api","count":9,"min":2}]}` + "\n"
	if body != want {
		t.Errorf("GET /top:\n got %s\nwant %s", body, want)
	}
	var ans topAnswer
	getJSON(t, srv.URL+"/top?by=denials&window=15m&n=2", http.StatusOK, &ans)
	if ans.By != ByDenials || ans.Window != Window15m || len(ans.Keys) != 2 || ans.Keys[0].ID != xss {
		t.Errorf("by=denials&window=15m&n=2: got %+v", ans)
	}
	getJSON(t, srv.URL+"/top?n=100", http.StatusOK, nil)
	if want := []string{
		"hits 1m 20 2025-03-01T12:00:00Z", "denials 15m 2 2025-03-01T12:00:00Z", "hits 1m 100 2025-03-01T12:00:00Z",
	}; strings.Join(top.asks, "|") != strings.Join(want, "|") {
		t.Errorf("asked %q, want %q", top.asks, want)
	}
}

// TestTopValidation: a bad by, window or n, an unknown or repeated
// parameter, is 400 naming it; n is capped at MaxTopN.
func TestTopValidation(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, Options{Top: &fakeTop{}})
	for _, c := range []struct{ query, field, msg string }{
		{"by=misses", "by", "by: must be hits or denials"},
		{"by=", "by", "by: must be hits or denials"},
		{"window=5m", "window", "window: must be 1m or 15m"},
		{"n=0", "n", "n: must be an integer from 1 to 100"},
		{"n=101", "n", "n: must be an integer from 1 to 100"},
		{"n=-1", "n", "n: must be an integer from 1 to 100"},
		{"n=ten", "n", "n: must be an integer from 1 to 100"},
		{"n=2&n=3", "n", "n: is given more than once"},
		{"limit=3", "limit", "limit: is not a parameter here"},
	} {
		resp, body := do(t, nil, http.MethodGet, srv.URL+"/top?"+c.query, "", bearer)
		var e apiError
		_ = json.Unmarshal([]byte(body), &e)
		if resp.StatusCode != http.StatusBadRequest || e.Field != c.field || e.Error != c.msg {
			t.Errorf("?%s: %d %s, want 400 %q naming %q", c.query, resp.StatusCode, body, c.msg, c.field)
		}
	}
	resp, body := do(t, nil, http.MethodGet, srv.URL+"/top?n=%zz", "", bearer)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a bad query string: %d %s, want 400", resp.StatusCode, body)
	}
	resp, _ = do(t, nil, http.MethodPost, srv.URL+"/top", "", bearer)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /top: %d Allow %q, want 405 GET, HEAD", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestTraffic: GET /dashboard/traffic answers the ring's last 900 whole
// seconds as series, and with ?since= only the seconds after it, for the
// page to poll.
func TestTraffic(t *testing.T) {
	t.Parallel()
	ring := &TrafficRing{}
	srv, clk := server(t, Options{Traffic: ring})
	now := clk.Now()
	for i, r := range []Result{Allowed, Allowed, Denied, ShadowDenied, Error} {
		ring.Record(r, now.Add(-2*time.Second+time.Duration(i)*time.Millisecond))
	}
	ring.Record(Denied, now.Add(-time.Second))
	ring.Record(Allowed, now) // the current second: not over, not shown
	var all trafficAnswer
	getJSON(t, srv.URL+PathTraffic, http.StatusOK, &all)
	n := len(all.T)
	if n != SeriesSeconds || all.Now != now.Unix() || all.T[0] != now.Unix()-900 || all.T[n-1] != now.Unix()-1 {
		t.Fatalf("%d seconds from %d to %d at %d; want 900 from now−900 to now−1", n, all.T[0], all.T[n-1], all.Now)
	}
	if got := [4]uint64{all.Allowed[n-2], all.Denied[n-2], all.ShadowDenied[n-2], all.Errors[n-2]}; got != [4]uint64{2, 1, 1, 1} {
		t.Errorf("second now−2: %v, want [2 1 1 1]", got)
	}
	if got := [4]uint64{all.Allowed[n-1], all.Denied[n-1], all.ShadowDenied[n-1], all.Errors[n-1]}; got != [4]uint64{0, 1, 0, 0} {
		t.Errorf("second now−1: %v, want [0 1 0 0]", got)
	}
	body := getJSON(t, srv.URL+PathTraffic+"?since="+itoa(int(now.Unix()-2)), http.StatusOK, nil)
	if want := `{"now":` + itoa(int(now.Unix())) + `,"t":[` + itoa(int(now.Unix()-1)) + `],"allowed":[0],"denied":[1],"shadow_denied":[0],"errors":[0]}` + "\n"; body != want {
		t.Errorf("?since=now−2:\n got %s\nwant %s", body, want)
	}
	body = getJSON(t, srv.URL+PathTraffic+"?since="+itoa(int(now.Unix())), http.StatusOK, nil)
	if want := `{"now":` + itoa(int(now.Unix())) + `,"t":[],"allowed":[],"denied":[],"shadow_denied":[],"errors":[]}` + "\n"; body != want {
		t.Errorf("?since=now: got %s, want %s", body, want)
	}
	for _, q := range []string{"since=-1", "since=x", "since=1&since=2", "from=3"} {
		resp, body := do(t, nil, http.MethodGet, srv.URL+PathTraffic+"?"+q, "", bearer)
		field := strings.SplitN(q, "=", 2)[0]
		wantFieldError(t, q, resp, body, field)
	}
}

type fakeRules []RuleStats

func (f fakeRules) Rules(time.Time) []RuleStats { return f }

type fakeHealth HealthReport

func (f *fakeHealth) Health(time.Time) HealthReport { return HealthReport(*f) }

// TestRulesAndHealth: the rules and health endpoints answer their
// providers' reports as JSON, exactly; without a provider, 404.
func TestRulesAndHealth(t *testing.T) {
	t.Parallel()
	rules := fakeRules{
		{Name: "api", Policy: "100/1s", Over: time.Minute, ChecksPerSec: 12.5, DeniedPerSec: 0.25},
		{Name: "login", Policy: "5/1m0s/token_bucket", Shadow: true, Over: time.Minute, ChecksPerSec: 3, ShadowDeniedPerSec: 1.5},
	}
	health := &fakeHealth{
		Shards: 8, Buckets: 250, MaxBuckets: 1000, FullDenials: 3, Evictions: 4, Restarts: 1,
		SweepRounds: 42, SweepLast: 1500 * time.Microsecond, CheckP50: 20 * time.Microsecond, CheckP99: 2 * time.Millisecond,
		Journal: &JournalHealth{SyncMode: "interval", Bytes: 64 << 20, LastSnapshot: time.UnixMilli(1_740_000_000_123), Snapshots: 2, SnapshotErrors: 1, Errors: 5, TornTails: 1},
		Cluster: &ClusterHealth{Self: "n1", VShards: 64, Members: []ClusterMember{{ID: "n1", Address: "10.0.0.1:7000", Alive: true, VShards: 32}, {ID: "n2", Address: "10.0.0.2:7000", VShards: 32}}},
	}
	srv, _ := server(t, Options{Rules: rules, Health: health})
	if body, want := getJSON(t, srv.URL+PathRules, http.StatusOK, nil), `{"rules":[`+
		`{"name":"api","policy":"100/1s","shadow":false,"over_ms":60000,"checks_per_sec":12.5,"denied_per_sec":0.25,"shadow_denied_per_sec":0},`+
		`{"name":"login","policy":"5/1m0s/token_bucket","shadow":true,"over_ms":60000,"checks_per_sec":3,"denied_per_sec":0,"shadow_denied_per_sec":1.5}]}`+"\n"; body != want {
		t.Errorf("rules:\n got %s\nwant %s", body, want)
	}
	if body, want := getJSON(t, srv.URL+PathHealth, http.StatusOK, nil), `{"shards":8,"buckets":250,"max_buckets":1000,"buckets_pct":25,`+
		`"full_denials":3,"evictions":4,"restarts":1,"sweep_rounds":42,"sweep_last_ms":1.5,"check_p50_ms":0.02,"check_p99_ms":2,`+
		`"journal":{"sync_mode":"interval","bytes":67108864,"last_snapshot_ms":1740000000123,"snapshots":2,"snapshot_errors":1,"errors":5,"torn_tails":1},`+
		`"cluster":{"self":"n1","vshards":64,"members":[{"id":"n1","address":"10.0.0.1:7000","alive":true,"vshards":32},{"id":"n2","address":"10.0.0.2:7000","alive":false,"vshards":32}]}}`+"\n"; body != want {
		t.Errorf("health:\n got %s\nwant %s", body, want)
	}
	// No journal, no cluster: journal is null, cluster left out.
	*health = fakeHealth{Shards: 1}
	if body, want := getJSON(t, srv.URL+PathHealth, http.StatusOK, nil), `{"shards":1,"buckets":0,"max_buckets":0,"buckets_pct":0,`+
		`"full_denials":0,"evictions":0,"restarts":0,"sweep_rounds":0,"sweep_last_ms":0,"check_p50_ms":0,"check_p99_ms":0,"journal":null}`+"\n"; body != want {
		t.Errorf("health without journal:\n got %s\nwant %s", body, want)
	}
	resp, body := do(t, nil, http.MethodGet, srv.URL+PathHealth+"?x=1", "", bearer)
	wantFieldError(t, "health?x=1", resp, body, "x")

	bare, _ := server(t, Options{})
	for p, what := range map[string]string{PathTop: "top keys", PathTraffic: "traffic", PathRules: "rules", PathHealth: "health"} {
		var e apiError
		getJSON(t, bare.URL+p, http.StatusNotFound, &e)
		if e.Error != what+" is not available here" {
			t.Errorf("%s without a provider: %+v", p, e)
		}
	}
}

// TestNext: paths the dashboard does not serve go to Next, with the
// security headers set; without Next they are 404.
func TestNext(t *testing.T) {
	t.Parallel()
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Next", r.URL.Path)
		w.WriteHeader(http.StatusTeapot)
	})
	srv, _ := server(t, Options{Next: next})
	resp, _ := do(t, nil, http.MethodGet, srv.URL+"/rules", "", nil)
	if resp.StatusCode != http.StatusTeapot || resp.Header.Get("X-Next") != "/rules" || resp.Header.Get("Content-Security-Policy") != ContentSecurityPolicy {
		t.Errorf("GET /rules: %d %v, want Next's 418 with the CSP", resp.StatusCode, resp.Header)
	}
	bare, _ := server(t, Options{})
	var e apiError
	resp, body := do(t, nil, http.MethodGet, bare.URL+"/rules", "", nil)
	_ = json.Unmarshal([]byte(body), &e)
	if resp.StatusCode != http.StatusNotFound || e.Error != "no such path: /rules" {
		t.Errorf("GET /rules without Next: %d %s", resp.StatusCode, body)
	}
}
