package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/actors"
)

// startDashDaemon starts the daemon with the admin token (so the
// dashboard), the rules of rulesV1 and flags; it returns the daemon and
// the admin listener's base URL.
func startDashDaemon(t *testing.T, flags ...string) (*daemon, string) {
	t.Helper()
	d, _, admin := startRulesDaemon(t, flags...)
	return d, admin
}

// dashGet sends GET u with the admin token as a bearer token, and decodes
// a 200 JSON answer into v.
func dashGet(t *testing.T, u string, v any) response {
	t.Helper()
	r := adminDo(t, http.MethodGet, u, adminToken, "")
	if v != nil && r.status == http.StatusOK {
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatalf("GET %s: %v in %s", u, err, r.body)
		}
	}
	return r
}

// dashPoll polls GET u (bearer) into v until cond holds, for at most 15 s:
// the rates and series count whole seconds only, so a check shows once its
// second is over.
func dashPoll[T any](t *testing.T, u string, cond func(*T) bool) *T {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		v := new(T)
		if r := dashGet(t, u, v); r.status != http.StatusOK {
			t.Fatalf("GET %s: %v", u, r)
		}
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: still %+v after 15 s", u, v)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// trafficJSON is the dashboard's live traffic: a series per result.
type trafficJSON struct {
	Allowed, Denied, ShadowDenied, Errors []uint64
}

// sum is the total of a series.
func sum(xs []uint64) (n uint64) {
	for _, x := range xs {
		n += x
	}
	return n
}

type topJSON struct {
	By, Window   string
	Total, Bound uint64
	Sample       int
	Sampled      bool
	Keys         []struct {
		ID, Label string
		Count     uint64
	}
}

// TestE2EDashboard: with --admin-token-file the admin listener serves the
// dashboard in front of the admin API, whose routes all still answer; the
// top keys, traffic, rules and health come from the checks the public
// listener answered, with exact counts; the public listener serves none of
// it.
func TestE2EDashboard(t *testing.T) {
	t.Parallel()
	d, admin := startDashDaemon(t, "--shards", "2", "--journal-segment-size", "64KiB", "--max-buckets", "5000")

	// The admin API behind it.
	if r := adminDo(t, http.MethodGet, admin+"/rules", adminToken, ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"login"`) {
		t.Fatalf("admin GET /rules: %v", r)
	}
	if r := adminDo(t, http.MethodGet, admin+"/rules", "", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("admin GET /rules without the token: %v, want 401", r)
	}
	if r := adminDo(t, http.MethodGet, admin+"/healthz", "", ""); r.status != http.StatusOK {
		t.Fatalf("admin GET /healthz: %v", r)
	}
	if r := adminDo(t, http.MethodGet, admin+"/nope", adminToken, ""); r.status != http.StatusNotFound {
		t.Fatalf("admin GET /nope: %v, want 404", r)
	}
	// The page, without a session: the login form.
	for _, p := range []string{"/", "/dashboard"} {
		r := adminDo(t, http.MethodGet, admin+p, "", "")
		if r.status != http.StatusOK || !strings.Contains(string(r.body), `action="/login"`) || r.header.Get("Content-Security-Policy") == "" {
			t.Fatalf("GET %s without a session: %v, want the login form", p, r)
		}
	}
	// The public listener serves none of it.
	for _, p := range []string{"/", "/dashboard", "/dashboard/static/app.js", "/dashboard/traffic", "/dashboard/rules", "/dashboard/health", "/top", "/login"} {
		if r := d.get(t, p); r.status != http.StatusNotFound {
			t.Fatalf("public GET %s: %v, want 404", p, r)
		}
	}

	// Load: the rule login (3 an hour) for hammer, 10 times; an ad-hoc
	// limit for calm, 4 times; one bad request.
	for i := range 10 {
		want := http.StatusOK
		if i >= 3 {
			want = http.StatusRequestEntityTooLarge
		}
		if r := d.checkRule(t, "login", "hammer"); r.status != want {
			t.Fatalf("hammer check %d: %v, want %d", i, r, want)
		}
	}
	for range 4 {
		if r := d.check(t, "calm", 3_600_000, 100, 2); r.status != http.StatusOK {
			t.Fatalf("calm: %v", r)
		}
	}
	if r := d.get(t, "/check_rate?id=bad&scale=0&limit=1"); r.status != http.StatusBadRequest {
		t.Fatalf("a bad check: %v, want 400", r)
	}

	var den topJSON
	dashGet(t, admin+"/top?by=denials&window=1m&n=5", &den)
	if den.By != "denials" || den.Total != 7 || len(den.Keys) != 1 || den.Keys[0].ID != "hammer" || den.Keys[0].Label != "login" || den.Keys[0].Count != 7 {
		t.Errorf("top by denials: %+v, want hammer (login) 7 of 7", den)
	}
	var hits topJSON
	dashGet(t, admin+"/top?by=hits&window=15m", &hits)
	type key struct {
		id, label string
		count     uint64
	}
	var got []key
	for _, k := range hits.Keys {
		got = append(got, key{k.ID, k.Label, k.Count})
	}
	// So few checks are counted exactly (no shard comes near
	// actors.TopKeysSampleAbove checks a second): not sampled.
	if want := []key{{"hammer", "login", 10}, {"calm", "100/1h0m0s", 8}}; !slices.Equal(got, want) || hits.Total != 18 || hits.Bound != 0 ||
		hits.Sample != actors.DefaultTopKeysSample || hits.Sampled {
		t.Errorf("top by hits: %+v (total %d, bound %d, sample %d, sampled %v), want %+v (total 18, bound 0, sample %d, not sampled)",
			got, hits.Total, hits.Bound, hits.Sample, hits.Sampled, want, actors.DefaultTopKeysSample)
	}

	dashPoll(t, admin+"/dashboard/traffic", func(tr *trafficJSON) bool {
		return sum(tr.Allowed) == 7 && sum(tr.Denied) == 7 && sum(tr.Errors) == 1 && sum(tr.ShadowDenied) == 0
	})
	type ruleJSON struct {
		Name, Policy string
		Shadow       bool
		OverMs       int64   `json:"over_ms"`
		Checks       float64 `json:"checks_per_sec"`
		Denied       float64 `json:"denied_per_sec"`
		ShadowDenied float64 `json:"shadow_denied_per_sec"`
	}
	type rulesJSON struct {
		Rules []ruleJSON `json:"rules"`
	}
	rules := dashPoll(t, admin+"/dashboard/rules", func(rs *rulesJSON) bool {
		return len(rs.Rules) == 2 && rs.Rules[1].Checks == 1
	})
	// 10 checks of login, 7 denied, in the last 10 whole seconds; none of api.
	want := []ruleJSON{{Name: "api", Policy: "60/1m0s/token_bucket/5", OverMs: 10_000}, {Name: "login", Policy: "3/1h0m0s", OverMs: 10_000, Checks: 1, Denied: 0.7}}
	if !slices.Equal(rules.Rules, want) {
		t.Errorf("rules: %+v, want %+v", rules.Rules, want)
	}

	var health struct {
		Shards     int     `json:"shards"`
		MaxBuckets int64   `json:"max_buckets"`
		Buckets    int64   `json:"buckets"`
		CheckP50Ms float64 `json:"check_p50_ms"`
		CheckP99Ms float64 `json:"check_p99_ms"`
		Journal    *struct {
			SyncMode       string `json:"sync_mode"`
			Bytes          int64  `json:"bytes"`
			LastSnapshotMs int64  `json:"last_snapshot_ms"`
		} `json:"journal"`
	}
	dashGet(t, admin+"/dashboard/health", &health)
	if health.Shards != 2 || health.MaxBuckets != 5000 || health.Buckets != 2 {
		t.Errorf("health: %+v, want 2 shards, 2 of 5000 buckets", health)
	}
	// 15 checks timed: each took more than 0 and less than a minute.
	if health.CheckP50Ms <= 0 || health.CheckP99Ms < health.CheckP50Ms || health.CheckP99Ms > 60_000 {
		t.Errorf("check latency p50 %v ms, p99 %v ms", health.CheckP50Ms, health.CheckP99Ms)
	}
	// Each shard's journal: one preallocated segment of 64 KiB, no snapshot.
	if j := health.Journal; j == nil || j.SyncMode != "interval" || j.Bytes != 2*64<<10 || j.LastSnapshotMs != 0 {
		t.Errorf("journal health: %+v, want interval, %d bytes, no snapshot", j, 2*64<<10)
	}

	// The browser's way in: the login form sets the session cookie.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(admin+"/login", url.Values{"token": {adminToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Secure {
		t.Fatalf("login: %d with cookies %+v, want 303 and one HttpOnly SameSite=Strict cookie (not Secure over plain HTTP)", resp.StatusCode, cookies)
	}
	req, _ := http.NewRequest(http.MethodGet, admin+"/dashboard", nil)
	req.AddCookie(cookies[0])
	page, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != http.StatusOK || !strings.Contains(string(body), "Live traffic") {
		t.Errorf("the page with the session: %d %.200s", page.StatusCode, body)
	}
	wrong, err := noRedirect.PostForm(admin+"/login", url.Values{"token": {"wrong-token-of-some-length"}})
	if err != nil {
		t.Fatal(err)
	}
	wrong.Body.Close()
	if wrong.StatusCode != http.StatusUnauthorized || len(wrong.Cookies()) != 0 {
		t.Errorf("a wrong token: %d with cookies %+v, want 401 and none", wrong.StatusCode, wrong.Cookies())
	}
}

// TestE2EDashboardOff: --dashboard=false leaves the admin API alone on its
// listener; --top-keys=false serves the dashboard without top keys.
func TestE2EDashboardOff(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		flag                 string
		rootStatus, topState int
	}{
		{"--dashboard=false", http.StatusNotFound, http.StatusNotFound},
		{"--top-keys=false", http.StatusOK, http.StatusNotFound},
	} {
		t.Run(c.flag, func(t *testing.T) {
			t.Parallel()
			d, admin := startDashDaemon(t, c.flag)
			if r := adminDo(t, http.MethodGet, admin+"/", adminToken, ""); r.status != c.rootStatus {
				t.Errorf("GET / with the token: %v, want %d", r, c.rootStatus)
			}
			r := adminDo(t, http.MethodGet, admin+"/top", adminToken, "")
			if r.status != c.topState {
				t.Errorf("GET /top: %v, want %d", r, c.topState)
			}
			if c.flag == "--top-keys=false" && !strings.Contains(string(r.body), "top keys is not available") {
				t.Errorf("GET /top: %s, want the panel not available", r.body)
			}
			if r := adminDo(t, http.MethodGet, admin+"/rules", adminToken, ""); r.status != http.StatusOK {
				t.Errorf("admin GET /rules: %v", r)
			}
			if r := d.get(t, "/"); r.status != http.StatusNotFound {
				t.Errorf("public GET /: %v, want 404", r)
			}
		})
	}
}

// TestReadJournalUsage: the health panel's journal bytes are the segments'
// and snapshots' sizes in the shard directories, its last snapshot the
// newest snapshot's time; other files do not count.
func TestReadJournalUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]int{
		"shard-000/seg-0000000000000001.log":        100,
		"shard-000/snap-0000000000000009.snap":      30,
		"shard-001/seg-0000000000000001.log":        50,
		"shard-001/seg-0000000000000001.log.broken": 7,
		"shard-001/LOCK":                            3,
		"META":                                      11,
	}
	for name, size := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, strings.Repeat("x", size))
	}
	snapAt := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(dir, "shard-000/snap-0000000000000009.snap"), snapAt, snapAt); err != nil {
		t.Fatal(err)
	}
	bytes, last := readJournalUsage(dir)
	if bytes != 180 || !last.Equal(snapAt) {
		t.Errorf("readJournalUsage: %d bytes, last snapshot %v; want 180, %v", bytes, last, snapAt)
	}
	if b, l := readJournalUsage(filepath.Join(dir, "missing")); b != 0 || !l.IsZero() {
		t.Errorf("a missing directory: %d, %v; want 0, zero", b, l)
	}
}

// TestE2EDashboardOtherTransports: the live traffic counts the checks of
// the Redis protocol (each check command, by its result; not PING) and of
// Envoy's Rate Limit Service (each call, by its overall code; a bad
// request as an error), beside check_rate's.
func TestE2EDashboardOtherTransports(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), yearLimit("a", "2"))
	d, admin := startDashDaemon(t, "--redis-listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--rls-config", dir)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: d.redisAddr(t), PoolSize: 1, MaxRetries: -1})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// A bucket of 1 refilled once a minute: allowed, then denied twice.
	for i := range 3 {
		v, err := rdb.Do(ctx, "CL.THROTTLE", "dash", 0, 1, 60).Int64Slice()
		if err != nil || len(v) != 5 || v[0] != int64(min(i, 1)) {
			t.Fatalf("CL.THROTTLE %d: %v %v", i, v, err)
		}
	}
	if err := rdb.Do(ctx, "CL.THROTTLE", "dash", 0, 0, 60).Err(); err == nil {
		t.Fatal("CL.THROTTLE with a zero rate: no error")
	}

	line, err := d.logs.waitLine(startTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == "grpc listening" })
	if err != nil {
		t.Fatalf("no grpc listening line: %v\n%s", err, d.logs)
	}
	conn, err := grpc.NewClient(line["addr"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc := rlsv3.NewRateLimitServiceClient(conn)
	// 2 a year: OK, OK, OVER_LIMIT; and a request without a domain.
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		resp, err := rc.ShouldRateLimit(ctx, rlsRequest("a", 0, "k=x"))
		if err != nil || resp.OverallCode != want {
			t.Fatalf("ShouldRateLimit %d: %v %v, want %v", i, resp, err, want)
		}
	}
	if _, err := rc.ShouldRateLimit(ctx, rlsRequest("", 0, "k=x")); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("ShouldRateLimit without a domain: %v, want InvalidArgument", err)
	}

	// Redis: 1 allowed, 2 denied, 1 error; RLS: 2 allowed, 1 denied, 1 error.
	dashPoll(t, admin+"/dashboard/traffic", func(tr *trafficJSON) bool {
		return sum(tr.Allowed) == 3 && sum(tr.Denied) == 3 && sum(tr.Errors) == 2 && sum(tr.ShadowDenied) == 0
	})
}
