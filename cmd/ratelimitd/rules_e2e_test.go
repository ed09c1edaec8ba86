package main

// End-to-end tests of the algorithms, named rules, the admin API and
// bounded memory: the built daemon, real files, real listeners.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// checkAlg sends GET /check_rate with an algorithm and burst.
func (d *daemon) checkAlg(t *testing.T, id, alg string, scaleMs, limit, burst, hits int64) response {
	t.Helper()
	q := url.Values{}
	q.Set("id", id)
	q.Set("scale", fmt.Sprint(scaleMs))
	q.Set("limit", fmt.Sprint(limit))
	q.Set("hits", fmt.Sprint(hits))
	q.Set("algorithm", alg)
	if burst > 0 {
		q.Set("burst", fmt.Sprint(burst))
	}
	return d.get(t, "/check_rate?"+q.Encode())
}

// TestE2EAlgorithms: every algorithm through the built daemon, by GET and
// by POST, with exact counts, statuses and retry times.
func TestE2EAlgorithms(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	hour := stableScaleMs(time.Now())
	type step struct {
		status             int
		count, remaining   int64
		retryMs, retryMsHi int64 // retry_after_ms within [retryMs, retryMsHi]
	}
	cases := []struct {
		alg          string
		scale, limit int64
		burst        int64
		steps        []step
	}{
		{"fixed_window", hour, 2, 0, []step{{200, 1, 1, 0, 0}, {200, 2, 0, 0, 0}, {413, 2, 0, 60_000, hour}}},
		{"sliding_window", hour, 3, 0, []step{{200, 1, 2, 0, 0}, {200, 2, 1, 0, 0}, {200, 3, 0, 0, 0}, {413, 3, 0, 60_000, 2 * hour}}},
		// 10 per hour, a bucket of 2: one token every 6 minutes.
		{"token_bucket", 3_600_000, 10, 2, []step{{200, 1, 1, 0, 0}, {200, 2, 0, 0, 0}, {413, 2, 0, 359_000, 360_000}}},
		// 2 per hour, paced: the next turn is half an hour after the first
		// (less the time between the requests; the unit tests pace exactly).
		{"leaky_bucket", 3_600_000, 2, 0, []step{{200, 1, 0, 0, 0}, {413, 1, 0, 1_790_000, 1_800_000}}},
	}
	for _, c := range cases {
		for _, method := range []string{"GET", "POST"} {
			id := c.alg + "-" + method
			for i, s := range c.steps {
				var r response
				if method == "GET" {
					r = d.checkAlg(t, id, c.alg, c.scale, c.limit, c.burst, 1)
				} else {
					body := fmt.Sprintf(`{"id":%q,"scale":%d,"limit":%d,"algorithm":%q`, id, c.scale, c.limit, c.alg)
					if c.burst > 0 {
						body += fmt.Sprintf(`,"burst":%d`, c.burst)
					}
					r, _ = d.do(t, http.MethodPost, "/check_rate", "application/json", strings.NewReader(body+"}"))
				}
				dec, ok := decodeDecision(t, r)
				if !ok {
					t.FailNow()
				}
				if r.status != s.status || dec.Count != s.count || dec.Remaining != s.remaining || dec.RetryAfterMs < s.retryMs || dec.RetryAfterMs > s.retryMsHi {
					t.Fatalf("%s %s step %d: got %v, want status %d, count %d, remaining %d, retry_after_ms in [%d, %d]", c.alg, method, i, r, s.status, s.count, s.remaining, s.retryMs, s.retryMsHi)
				}
				if s.status == 413 && r.header.Get("Retry-After") == "" {
					t.Fatalf("%s %s step %d: a denial without Retry-After", c.alg, method, i)
				}
			}
		}
	}
}

// TestE2EMaxBuckets: a flood of distinct ids against --max-buckets: the
// overflow is refused with 503 and Retry-After, counted exactly.
func TestE2EMaxBuckets(t *testing.T) {
	t.Parallel()
	const bound, flood = 500, 800
	d := startDaemon(t, "--max-buckets", fmt.Sprint(bound), "--shards", "1")
	scale := stableScaleMs(time.Now())
	refused := 0
	for i := range flood {
		r := d.check(t, fmt.Sprint("id-", i), scale, 5, 1)
		switch r.status {
		case http.StatusOK:
		case http.StatusServiceUnavailable:
			if r.header.Get("Retry-After") == "" {
				t.Fatalf("503 without Retry-After: %v", r)
			}
			refused++
		default:
			t.Fatalf("check %d: got %v", i, r)
		}
	}
	if refused != flood-bound {
		t.Fatalf("refused %d, want %d", refused, flood-bound)
	}
	if v, _ := d.metric(t, "ratelimitd_buckets"); v != bound {
		t.Fatalf("ratelimitd_buckets %v, want %d", v, bound)
	}
	// A known id is still served at the bound.
	if r := d.check(t, "id-0", scale, 5, 1); r.status != http.StatusOK {
		t.Fatalf("a known id at the bound: got %v, want 200", r)
	}
}

const rulesV1 = `rules:
  - name: login
    scale: 1h
    limit: 3
  - name: api
    algorithm: token_bucket
    scale: 60000
    limit: 60
    burst: 5
    match:
      prefix: /api
`

// adminToken is the admin token of startRulesDaemon: at least 16 bytes, as
// the daemon requires.
const adminToken = "s3cret-admin-token"

// startRulesDaemon writes rulesV1 and an admin token, and starts the daemon
// with both; it returns the daemon, the rules file and the admin base URL.
func startRulesDaemon(t *testing.T, flags ...string) (d *daemon, rulesFile, admin string) {
	t.Helper()
	dir := t.TempDir()
	rulesFile = filepath.Join(dir, "rules.yaml")
	writeFile(t, rulesFile, rulesV1)
	tokenFile := filepath.Join(dir, "token")
	writeFile(t, tokenFile, adminToken+"\n") // writeFile makes it 0600, as the daemon requires
	d = startDaemon(t, append([]string{"--rules", rulesFile, "--admin-token-file", tokenFile, "--admin-listen", "127.0.0.1:0"}, flags...)...)
	return d, rulesFile, adminURL(t, d)
}

// adminURL waits for d's admin listener and returns its base URL.
func adminURL(t *testing.T, d *daemon) string {
	t.Helper()
	line, err := d.logs.waitLine(startTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == "admin listening" })
	if err != nil {
		t.Fatalf("no admin listening line: %v\n%s", err, d.logs)
	}
	return "http://" + line["addr"]
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	// Write and rename, as editors do, so the watcher never sees half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// checkRule sends GET /check_rate?rule=…&id=….
func (d *daemon) checkRule(t *testing.T, rule, id string) response {
	t.Helper()
	return d.get(t, "/check_rate?"+url.Values{"rule": {rule}, "id": {id}}.Encode())
}

// adminDo sends an admin request with token tok ("" for none).
func adminDo(t *testing.T, method, u, tok, body string) response {
	t.Helper()
	r, err := adminSend(method, u, tok, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	return r
}

// adminSend is adminDo returning its error, for a goroutine other than
// the test's.
func adminSend(method, u, tok, body string) (response, error) {
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		return response{}, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// TestE2ERules: named rules from a file; a broken reload keeps the old
// rules; a changed limit keeps the counts (no fresh budget); SIGHUP
// reloads; the admin API needs its token, changes rules for the very next
// check, resets and inspects; the public listener serves none of it.
func TestE2ERules(t *testing.T) {
	t.Parallel()
	d, rulesFile, admin := startRulesDaemon(t, "--log-level", "debug")
	for i := range 3 {
		if r := d.checkRule(t, "login", "bob"); r.status != http.StatusOK {
			t.Fatalf("login %d: got %v, want 200", i+1, r)
		}
	}
	assertDenied(t, d.checkRule(t, "login", "bob"), http.StatusRequestEntityTooLarge, 3)

	// A broken file: the old rules stay, the failure is logged and counted.
	writeFile(t, rulesFile, "rules:\n  - name: login\n    scale: forever\n    limit: 3\n")
	if _, err := d.logs.waitLine(pollTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == "rules reload failed; keeping the last good rules" }); err != nil {
		t.Fatalf("no reload failure logged: %v\n%s", err, d.logs)
	}
	assertDenied(t, d.checkRule(t, "login", "bob"), http.StatusRequestEntityTooLarge, 3)
	if v, _ := d.metric(t, "ratelimitd_rules_reloads_total"); v < 1 {
		t.Fatalf("ratelimitd_rules_reloads_total %v, want ≥ 1", v)
	}

	// A good file raising the limit to 5: bob's count goes on from 3.
	writeFile(t, rulesFile, strings.Replace(rulesV1, "limit: 3", "limit: 5", 1))
	if _, err := d.logs.waitLine(pollTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == "rules reloaded" }); err != nil {
		t.Fatalf("no reload logged: %v\n%s", err, d.logs)
	}
	r := d.checkRule(t, "login", "bob")
	if dec, ok := decodeDecision(t, r); !ok || r.status != http.StatusOK || dec.Count != 4 || dec.Limit != 5 {
		t.Fatalf("after raising the limit: got %v, want 200 with count 4 of 5", r)
	}

	// SIGHUP reloads on demand (the file is unchanged: nothing changes).
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if _, err := d.logs.waitLine(pollTimeout, d.exited, func(rec logRecord) bool {
		return rec["trigger"] == "signal" && strings.HasPrefix(rec["msg"], "rules")
	}); err != nil {
		t.Fatalf("SIGHUP: no reload logged: %v\n%s", err, d.logs)
	}

	// The admin API: its token, or 401.
	for _, tok := range []string{"", "wrong"} {
		if r := adminDo(t, "GET", admin+"/rules", tok, ""); r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") == "" {
			t.Fatalf("GET /rules with token %q: got %v, want 401 with WWW-Authenticate", tok, r)
		}
	}
	if r := adminDo(t, "GET", admin+"/rules", adminToken, ""); r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`"login"`)) {
		t.Fatalf("GET /rules: got %v, want 200 listing login", r)
	}
	// The public listener serves no admin endpoint.
	for _, p := range []string{"/rules", "/buckets?id=bob", "/reset?id=bob&rule=login"} {
		if r := d.get(t, p); r.status != http.StatusNotFound {
			t.Fatalf("public GET %s: got %v, want 404", p, r)
		}
	}
	// PUT a rule: the very next check uses it.
	if r := adminDo(t, "PUT", admin+"/rules/burst", adminToken, `{"algorithm":"fixed_window","scale":"1h","limit":1}`); r.status != http.StatusOK {
		t.Fatalf("PUT /rules/burst: got %v, want 200", r)
	}
	if r := d.checkRule(t, "burst", "carol"); r.status != http.StatusOK {
		t.Fatalf("first check by the new rule: got %v, want 200", r)
	}
	assertDenied(t, d.checkRule(t, "burst", "carol"), http.StatusRequestEntityTooLarge, 1)
	// Inspect and reset.
	if r := adminDo(t, "GET", admin+"/buckets?id=carol", adminToken, ""); r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`"burst"`)) {
		t.Fatalf("GET /buckets: got %v, want carol's bucket under rule burst", r)
	}
	if r := adminDo(t, "POST", admin+"/reset?id=carol&rule=burst", adminToken, ""); r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`"deleted":1`)) {
		t.Fatalf("POST /reset: got %v, want 1 deleted", r)
	}
	if r := d.checkRule(t, "burst", "carol"); r.status != http.StatusOK {
		t.Fatalf("after reset: got %v, want 200", r)
	}
	// DELETE it: the next check by it is refused as unknown.
	if r := adminDo(t, "DELETE", admin+"/rules/burst", adminToken, ""); r.status != http.StatusOK {
		t.Fatalf("DELETE /rules/burst: got %v, want 200", r)
	}
	if r := d.checkRule(t, "burst", "carol"); r.status != http.StatusBadRequest {
		t.Fatalf("check by a deleted rule: got %v, want 400", r)
	}
}

// TestE2EBadRulesFileRefusesStart: a rules file that does not validate
// stops the start, before any journal is recovered, with a message naming
// the rule, the field and the line.
func TestE2EBadRulesFileRefusesStart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, "rules:\n  - name: login\n    scale: 1h\n    limit: -2\n")
	code, _, stderr := runDaemonOnce(t, "--listen", "127.0.0.1:0", "--rules", path)
	if code != exitFailure || !strings.Contains(stderr, `login`) || !strings.Contains(stderr, "limit: must not be negative") || strings.Contains(stderr, "journal recovered") {
		t.Fatalf("bad rules file: exit %d, stderr:\n%s\nwant exit 1 naming rule login and field limit", code, stderr)
	}
}

// TestE2ERulesFileTruncated: a rules file truncated in place (by a writer
// that does not rename) and written only later never leaves the daemon
// without rules: the empty file is a failed reload, logged and counted, the
// checks by rule go on answering 200 and 413 (not 400), and the new content,
// once written, is in force.
func TestE2ERulesFileTruncated(t *testing.T) {
	t.Parallel()
	d, rulesFile, _ := startRulesDaemon(t)
	for i := range 3 {
		if r := d.checkRule(t, "login", "bob"); r.status != http.StatusOK {
			t.Fatalf("login %d: got %v, want 200", i+1, r)
		}
	}
	assertDenied(t, d.checkRule(t, "login", "bob"), http.StatusRequestEntityTooLarge, 3)

	if err := os.Truncate(rulesFile, 0); err != nil {
		t.Fatal(err)
	}
	line, err := d.logs.waitLine(pollTimeout, d.exited, func(rec logRecord) bool {
		return rec["msg"] == "rules reload failed; keeping the last good rules" && rec["trigger"] == "file"
	})
	if err != nil {
		t.Fatalf("no failed reload logged after truncating the rules file: %v\n%s", err, d.logs)
	}
	if !strings.Contains(line["err"], `"rules: []"`) {
		t.Errorf("failed reload logged with err %q, want it to say how to write an empty rule set (\"rules: []\")", line["err"])
	}
	if v, _ := d.metric(t, `ratelimitd_rules_reloads_total{result="error"}`); v != 1 {
		t.Errorf(`ratelimitd_rules_reloads_total{result="error"}: got %v, want 1`, v)
	}
	if v, _ := d.metric(t, "ratelimitd_rules"); v != 2 {
		t.Errorf("ratelimitd_rules after the truncation: got %v, want 2 (the last good rules)", v)
	}
	// The rules are still in force: bob is still denied, alice allowed.
	assertDenied(t, d.checkRule(t, "login", "bob"), http.StatusRequestEntityTooLarge, 3)
	if r := d.checkRule(t, "login", "alice"); r.status != http.StatusOK {
		t.Fatalf("check by rule after the truncation: got %v, want 200", r)
	}

	// The writer writes the new content into the same file, in place.
	f, err := os.OpenFile(rulesFile, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(rulesV1 + "  - name: signup\n    scale: 1h\n    limit: 1\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.logs.waitLine(pollTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == "rules reloaded" && rec["rules"] == "3" }); err != nil {
		t.Fatalf("no reload of the new content logged: %v\n%s", err, d.logs)
	}
	if r := d.checkRule(t, "signup", "carol"); r.status != http.StatusOK {
		t.Fatalf("first check by the new rule: got %v, want 200", r)
	}
	assertDenied(t, d.checkRule(t, "signup", "carol"), http.StatusRequestEntityTooLarge, 1)
	assertDenied(t, d.checkRule(t, "login", "bob"), http.StatusRequestEntityTooLarge, 3)
}

// TestE2EEmptyRulesFile: at start, a rules file with no rule refuses the
// start unless it says "rules: []", which starts with no rule.
func TestE2EEmptyRulesFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.yaml")
	writeFile(t, empty, "")
	code, _, stderr := runDaemonOnce(t, "--listen", "127.0.0.1:0", "--rules", empty)
	if code != exitFailure || !strings.Contains(stderr, empty) || !strings.Contains(stderr, `rules: []`) || strings.Contains(stderr, "msg=listening") {
		t.Fatalf("empty rules file: exit %d, stderr:\n%s\nwant exit 1 naming the file and \"rules: []\"", code, stderr)
	}

	explicit := filepath.Join(dir, "none.yaml")
	writeFile(t, explicit, "rules: []\n")
	d := startDaemon(t, "--rules", explicit)
	if v, found := d.metric(t, "ratelimitd_rules"); !found || v != 0 {
		t.Errorf("ratelimitd_rules with rules: []: got %v (found %v), want 0", v, found)
	}
	if r := d.checkRule(t, "login", "bob"); r.status != http.StatusBadRequest {
		t.Errorf("check by an unknown rule: got %v, want 400", r)
	}
}

// TestE2EAdminAuthFailures: with --admin-auth-failures 2, the second
// wrong token from an address locks it out, logged with the address and
// no token: its next request, with the right token, is 429 with
// Retry-After 30 (2 attempts a minute), without a token still 401; the
// dashboard counts its own; /metrics counts both.
func TestE2EAdminAuthFailures(t *testing.T) {
	t.Parallel()
	const tok = "right-token-0123456789abcdef"
	path := filepath.Join(t.TempDir(), "token")
	writeFile(t, path, tok+"\n")
	d := startDaemon(t, "--admin-token-file", path, "--admin-listen", "127.0.0.1:0", "--admin-auth-failures", "2")
	base := adminURL(t, d)
	for i := range 2 {
		if r := adminDo(t, "GET", base+"/stats", "wrong-token-0123456789abcdef", ""); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, r.status)
		}
	}
	r := adminDo(t, "GET", base+"/stats", tok, "")
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "30" ||
		!strings.Contains(string(r.body), `"error":"too many requests with a wrong admin token from this address; retry in 30 s"`) {
		t.Errorf("the right token after 2 wrong ones: %d Retry-After %q %s; want 429, 30 and the JSON error", r.status, r.header.Get("Retry-After"), r.body)
	}
	if r := adminDo(t, "GET", base+"/stats", "", ""); r.status != http.StatusUnauthorized {
		t.Errorf("no token while locked out: %d, want 401", r.status)
	}
	rec, err := d.logs.waitLine(pollTimeout, d.exited, func(rec logRecord) bool {
		return rec["msg"] == "admin: requests with a token refused for a while after too many wrong ones from one address"
	})
	if err != nil {
		t.Fatalf("no lock-out line: %v\n%s", err, d.logs)
	}
	if rec["client"] != "127.0.0.1" || rec["level"] != "WARN" || strings.Contains(d.logs.String(), "wrong-token") {
		t.Errorf("the lock-out line %v: want client 127.0.0.1 at WARN, and no token in the logs", rec)
	}
	// The dashboard's bearer tokens count apart, and so do its series.
	if r := adminDo(t, "GET", base+"/dashboard/health", "wrong-token-0123456789abcdef", ""); r.status != http.StatusUnauthorized {
		t.Errorf("a wrong token on the dashboard: %d, want 401", r.status)
	}
	m := adminDo(t, "GET", d.base+"/metrics", "", "")
	for _, want := range []string{
		`ratelimitd_admin_token_failures_total{path="api",result="wrong"} 2`,
		`ratelimitd_admin_token_failures_total{path="api",result="limited"} 1`,
		`ratelimitd_admin_token_failures_total{path="dashboard",result="wrong"} 1`,
		`ratelimitd_admin_token_failures_total{path="dashboard",result="limited"} 0`,
	} {
		if !strings.Contains(string(m.body), want+"\n") {
			t.Errorf("GET /metrics: no %s", want)
		}
	}
}

// TestE2EAdminTokenRotation: a rewritten admin token file is taken without
// a restart, by the admin API and the dashboard alike: a second line is a
// second token, and a dropped token is refused, its dashboard session
// ended, while the new token's session goes on.
func TestE2EAdminTokenRotation(t *testing.T) {
	t.Parallel()
	const oldTok, newTok = "old-token-0123456789abcdef", "new-token-0123456789abcdef"
	path := filepath.Join(t.TempDir(), "token")
	writeFile(t, path, oldTok+"\n")
	// The test polls with a token until the reload takes it or drops it:
	// wrong tokens, which the limit of failures would soon refuse.
	d := startDaemon(t, "--admin-token-file", path, "--admin-listen", "127.0.0.1:0", "--admin-auth-failures", "0")
	base := adminURL(t, d)
	status := func(tok string) int { return adminDo(t, "GET", base+"/stats", tok, "").status }
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login := func(tok string) *http.Cookie {
		t.Helper()
		resp, err := client.PostForm(base+"/login", url.Values{"token": {tok}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			if c.Name == "ratelimitd_dashboard" {
				return c
			}
		}
		t.Fatalf("login with a token: %d, no session cookie", resp.StatusCode)
		return nil
	}
	session := func(c *http.Cookie) int {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/dashboard/health", nil)
		req.AddCookie(c)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(newTok); got != http.StatusUnauthorized {
		t.Fatalf("the new token before the rotation: %d, want 401", got)
	}
	oldSession := login(oldTok)

	writeFile(t, path, oldTok+"\n"+newTok+"\n")
	waitFor(t, pollTimeout, "the new token accepted", func() bool { return status(newTok) == http.StatusOK })
	newSession := login(newTok)
	if got := status(oldTok); got != http.StatusOK {
		t.Errorf("the old token during the rotation: %d, want 200", got)
	}

	writeFile(t, path, newTok+"\n")
	waitFor(t, pollTimeout, "the old token refused", func() bool { return status(oldTok) == http.StatusUnauthorized })
	if got := status(newTok); got != http.StatusOK {
		t.Errorf("the new token after the rotation: %d, want 200", got)
	}
	if got := session(oldSession); got != http.StatusUnauthorized {
		t.Errorf("the old token's dashboard session after the rotation: %d, want 401", got)
	}
	if got := session(newSession); got != http.StatusOK {
		t.Errorf("the new token's dashboard session after the rotation: %d, want 200", got)
	}

	// A token the start would refuse keeps the last good ones, logged.
	writeFile(t, path, "short\n")
	waitFor(t, pollTimeout, "the refused reload logged", func() bool {
		status(newTok) // the file is looked at on a request
		logs := d.logs.String()
		return strings.Contains(logs, "admin token file reload failed; keeping the last good ones") && strings.Contains(logs, "line 1, holds a token of 5 bytes")
	})
	if got := status(newTok); got != http.StatusOK {
		t.Errorf("the new token after a refused rewrite: %d, want 200", got)
	}
	if strings.Contains(d.logs.String(), oldTok) || strings.Contains(d.logs.String(), newTok) {
		t.Errorf("a token is in the log:\n%s", d.logs)
	}
}

// TestE2EAdminTokenFile: like ssh with a private key, the daemon refuses an
// admin token file that group or others may access, or a token shorter than
// 16 bytes (after the trailing newline is trimmed), naming the file and the
// rule; a 0600 file with a long enough token starts the admin API.
func TestE2EAdminTokenFile(t *testing.T) {
	t.Parallel()
	long := "0123456789abcdef" // 16 bytes
	tests := []struct {
		name    string
		mode    os.FileMode
		content string
		want    []string // in stderr; nil: the daemon starts
	}{
		{"0644", 0o644, long + "\n", []string{"is accessible by group or others (mode 0644)", "chmod 600"}},
		{"0640", 0o640, long + "\n", []string{"is accessible by group or others (mode 0640)"}},
		{"0604", 0o604, long, []string{"is accessible by group or others (mode 0604)"}},
		{"15 bytes", 0o600, long[:15], []string{"holds a token of 15 bytes", "at least 16"}},
		{"15 bytes and a newline", 0o600, long[:15] + "\n", []string{"holds a token of 15 bytes", "at least 16"}},
		{"16 bytes and a newline, 0600", 0o600, long + "\n", nil},
		{"16 bytes, 0400", 0o400, long, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil { // WriteFile's mode is masked by the umask
				t.Fatal(err)
			}
			if tt.want == nil {
				d := startDaemon(t, "--admin-token-file", path, "--admin-listen", "127.0.0.1:0")
				if r := adminDo(t, "GET", adminURL(t, d)+"/rules", long, ""); r.status != http.StatusOK {
					t.Fatalf("GET /rules with the token: got %v, want 200", r)
				}
				return
			}
			code, _, stderr := runDaemonOnce(t, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--admin-token-file", path, "--admin-listen", "127.0.0.1:0")
			if code != exitFailure {
				t.Errorf("exit code: got %d, want %d; stderr:\n%s", code, exitFailure, stderr)
			}
			for _, w := range append([]string{path}, tt.want...) {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, "listening") || strings.Contains(stderr, "journal recovered") {
				t.Errorf("the daemon went on starting before refusing the token file:\n%s", stderr)
			}
		})
	}
}
