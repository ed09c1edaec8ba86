//go:build unix

package main

// End-to-end tests: each one starts the built daemon as a child process on a
// free loopback port, talks HTTP to it, and stops it with SIGTERM, asserting
// a clean exit. They are skipped with -short.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Bounds on waiting for the daemon.
const (
	startTimeout = 10 * time.Second // until the listening line
	stopTimeout  = 10 * time.Second // from SIGTERM until exit
	pollTimeout  = 10 * time.Second // for a metric to reach a value
	pollInterval = 10 * time.Millisecond
)

// daemonBin builds the daemon, once, on first use (so that go test -list or
// -run '^$' -bench do not build it), and returns its path. It is nil with
// -short. Set by TestMain before any test runs.
var daemonBin func() (string, error)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "ratelimitd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	daemonBin = sync.OnceValues(func() (string, error) { return buildDaemon(dir) })
	return m.Run()
}

// buildDaemon builds this package into dir, with -race when this test
// binary has it, and returns the binary's path.
func buildDaemon(dir string) (string, error) {
	bin := filepath.Join(dir, "ratelimitd")
	// -buildvcs=false: the test binary needs no VCS stamp, nor a working git.
	args := []string{"build", "-buildvcs=false", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if mode := testing.CoverMode(); mode != "" && coverDir() != "" {
		// go test -cover: the daemon writes its coverage data beside this
		// binary's (see daemonEnv). go test's own percentage ignores it;
		// make cover merges both with go tool covdata.
		args = append(args, "-cover", "-covermode="+mode)
	}
	args = append(args, ".")
	// go test puts its own GOROOT/bin first in PATH, so this is the same go.
	build := exec.Command("go", args...)
	out, err := build.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// needDaemon returns the path of the built daemon; it skips the test with
// -short and fails it if the daemon does not build.
func needDaemon(t *testing.T) string {
	t.Helper()
	if daemonBin == nil {
		t.Skip("end-to-end test: skipped with -short")
	}
	bin, err := daemonBin()
	if err != nil {
		t.Fatalf("building the daemon: %v", err)
	}
	return bin
}

// daemonEnv returns the environment for the daemon: this process's, with the
// race runtime's one-second sleep at exit turned off (a daemon built with
// -race would otherwise take a second to exit). A race the daemon detects
// still makes it exit with status 66, which the tests report. Under
// go test -cover it also sets GOCOVERDIR, for make cover.
func daemonEnv() []string {
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	env := append(os.Environ(), "GORACE="+gorace)
	if dir := coverDir(); dir != "" && testing.CoverMode() != "" {
		env = append(env, "GOCOVERDIR="+dir)
	}
	return env
}

// coverDir returns where go test -cover collects coverage data, if anywhere.
func coverDir() string {
	if f := flag.Lookup("test.gocoverdir"); f != nil {
		return f.Value.String()
	}
	return ""
}

// ---------------------------------------------------------------------------
// The daemon under test.

// daemon is one running ratelimitd child process.
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string     // http://127.0.0.1:PORT
	logs   *logBuffer // its stderr
	stdout *logBuffer
	client *http.Client

	exited  chan struct{} // closed when the process has exited
	waitErr error         // cmd.Wait's result, set before exited is closed

	termSent atomic.Bool // whether the test sent SIGTERM
	killed   atomic.Bool // whether the test sent SIGKILL: any exit is expected
	stopOnce sync.Once
}

// kill sends SIGKILL to the daemon and waits for it to exit.
func (d *daemon) kill() {
	d.t.Helper()
	d.killed.Store(true)
	if err := d.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		d.t.Errorf("SIGKILL: %v", err)
	}
	<-d.exited
	d.client.CloseIdleConnections()
}

// startDaemon starts the daemon with --listen 127.0.0.1:0 and flags, and
// waits for its listening line to learn the address. A cleanup stops it with
// SIGTERM and asserts a clean exit.
func startDaemon(t *testing.T, flags ...string) *daemon {
	t.Helper()
	return startDaemonVia(t, nil, flags...)
}

// startDaemonVia is startDaemon through the command prefix, which is given
// the daemon's path and arguments after its own, and must exec the daemon
// (as sh -c 'ulimit …; exec "$0" "$@"' does), so that the child is the
// daemon itself.
func startDaemonVia(t *testing.T, prefix []string, flags ...string) *daemon {
	t.Helper()
	bin := needDaemon(t)
	d := &daemon{
		t:      t,
		logs:   newLogBuffer(),
		stdout: newLogBuffer(),
		exited: make(chan struct{}),
		client: &http.Client{
			Timeout:   10 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: 16},
		},
	}
	if !slices.ContainsFunc(flags, func(f string) bool { return strings.HasPrefix(strings.TrimLeft(f, "-"), "data-dir") }) {
		flags = append(flags, "--data-dir", t.TempDir())
	}
	args := append([]string{bin, "--listen", "127.0.0.1:0"}, flags...)
	if len(prefix) > 0 {
		args = append(slices.Clone(prefix), args...)
	}
	d.cmd = exec.Command(args[0], args[1:]...)
	d.cmd.Env = daemonEnv()
	d.cmd.Dir = t.TempDir() // so that no relative path lands in the repository
	d.cmd.Stdout = d.stdout
	d.cmd.Stderr = d.logs
	d.cmd.WaitDelay = stopTimeout
	killWithParent(d.cmd)
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		d.stop()
		d.client.CloseIdleConnections()
	})

	line, err := d.logs.waitLine(startTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == "listening" })
	if err != nil {
		t.Fatalf("daemon %v: no listening line: %v; stderr so far:\n%s", d.cmd.Args, err, d.logs)
	}
	addr := line["addr"]
	if _, _, err := net.SplitHostPort(addr); err != nil {
		t.Fatalf("listening line has addr %q: %v", addr, err)
	}
	d.base = "http://" + addr
	return d
}

// terminate sends SIGTERM to the daemon.
func (d *daemon) terminate() {
	d.t.Helper()
	d.termSent.Store(true)
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		d.t.Errorf("SIGTERM: %v", err)
	}
}

// stop sends SIGTERM (if the daemon still runs), waits at most stopTimeout
// for it to exit, and asserts exit status 0 and an empty stdout. It returns
// how long the exit took. Only the first call does anything.
func (d *daemon) stop() (took time.Duration) {
	d.stopOnce.Do(func() {
		d.t.Helper()
		if d.killed.Load() {
			<-d.exited
			return
		}
		start := time.Now()
		select {
		case <-d.exited:
			if !d.termSent.Load() {
				d.t.Errorf("daemon exited before it was stopped: %v; stderr:\n%s", d.waitErr, d.logs)
				return
			}
		default:
			d.terminate()
		}
		select {
		case <-d.exited:
		case <-time.After(stopTimeout):
			_ = d.cmd.Process.Kill()
			<-d.exited
			d.t.Errorf("daemon did not exit within %v of SIGTERM; stderr:\n%s", stopTimeout, d.logs)
			return
		}
		took = time.Since(start)
		if d.waitErr != nil {
			d.t.Errorf("daemon exit after SIGTERM: got %v, want exit status 0; stderr:\n%s", d.waitErr, d.logs)
		}
		if s := d.stdout.String(); s != "" {
			d.t.Errorf("daemon stdout: got %q, want nothing (logs go to stderr)", s)
		}
	})
	return took
}

// response is one HTTP answer, read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string {
	return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body))
}

// do sends req to the daemon. It reports failures with t.Errorf, so it is
// safe to call from several goroutines; ok is false on failure.
func (d *daemon) do(t *testing.T, method, pathAndQuery, contentType string, body io.Reader) (response, bool) {
	t.Helper()
	req, err := http.NewRequest(method, d.base+pathAndQuery, body)
	if err != nil {
		t.Errorf("%s %s: %v", method, pathAndQuery, err)
		return response{}, false
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		t.Errorf("%s %.200s: %v", method, pathAndQuery, err)
		return response{}, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Errorf("%s %.200s: reading the body: %v", method, pathAndQuery, err)
		return response{}, false
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}, true
}

// get is do for a GET, failing the test at once on a transport error.
func (d *daemon) get(t *testing.T, pathAndQuery string) response {
	t.Helper()
	r, ok := d.do(t, http.MethodGet, pathAndQuery, "", nil)
	if !ok {
		t.FailNow()
	}
	return r
}

// check sends GET /check_rate with the given parameters.
func (d *daemon) check(t *testing.T, id string, scaleMs, limit, hits int64) response {
	t.Helper()
	return d.get(t, checkQuery(id, scaleMs, limit, hits))
}

func checkQuery(id string, scaleMs, limit, hits int64) string {
	q := url.Values{}
	q.Set("id", id)
	q.Set("scale", strconv.FormatInt(scaleMs, 10))
	q.Set("limit", strconv.FormatInt(limit, 10))
	q.Set("hits", strconv.FormatInt(hits, 10))
	return "/check_rate?" + q.Encode()
}

// metric returns the sum of the samples of the Prometheus series name (all
// label sets, or the one given, as in name{label="value"}) on /metrics;
// found is false when there is none.
func (d *daemon) metric(t *testing.T, name string) (value float64, found bool) {
	t.Helper()
	r := d.get(t, "/metrics")
	if r.status != http.StatusOK {
		t.Fatalf("GET /metrics: got %v, want 200", r)
	}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		series, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if n, _, _ := strings.Cut(series, "{"); n != name && series != name {
			continue
		}
		valueText, _, _ := strings.Cut(rest, " ") // drop a timestamp
		v, err := strconv.ParseFloat(valueText, 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		value += v
		found = true
	}
	return value, found
}

// pollMetrics calls cond with a metric reader until it returns true or
// pollTimeout passes; then it fails the test with cond's last description.
func (d *daemon) pollMetrics(t *testing.T, what string, cond func(get func(string) float64) (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for {
		ok, state := cond(func(name string) float64 {
			v, _ := d.metric(t, name)
			return v
		})
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v; last: %s", what, pollTimeout, state)
		}
		// A poll interval, not synchronization: the state is checked again.
		<-time.After(pollInterval)
	}
}

// decision is the JSON body of an answered check.
type decision struct {
	Allowed      bool   `json:"allowed"`
	ID           string `json:"id"`
	Count        int64  `json:"count"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	ResetMs      int64  `json:"reset_ms"`
	RetryAfterMs int64  `json:"retry_after_ms"`
}

// decodeDecision parses a check answer, asserting that every member is present.
func decodeDecision(t *testing.T, r response) (decision, bool) {
	t.Helper()
	var members map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &members); err != nil {
		t.Errorf("check answer %v: not a JSON object: %v", r, err)
		return decision{}, false
	}
	for _, k := range []string{"allowed", "id", "count", "limit", "remaining", "reset_ms", "retry_after_ms"} {
		if _, ok := members[k]; !ok {
			t.Errorf("check answer %v: no member %q", r, k)
			return decision{}, false
		}
	}
	var dec decision
	if err := json.Unmarshal(r.body, &dec); err != nil {
		t.Errorf("check answer %v: %v", r, err)
		return decision{}, false
	}
	return dec, true
}

// assertDenied asserts that r is a denial with status wantStatus, an integer
// Retry-After of at least 1 second, and a body with allowed false and count
// wantCount.
func assertDenied(t *testing.T, r response, wantStatus int, wantCount int64) {
	t.Helper()
	if r.status != wantStatus {
		t.Errorf("denied check: got %v, want status %d", r, wantStatus)
		return
	}
	ra := r.header.Get("Retry-After")
	if secs, err := strconv.Atoi(ra); err != nil || secs < 1 {
		t.Errorf("denied check: got Retry-After %q, want an integer number of seconds ≥ 1", ra)
	}
	dec, ok := decodeDecision(t, r)
	if !ok {
		return
	}
	if dec.Allowed || dec.Count != wantCount || dec.RetryAfterMs <= 0 || dec.Remaining != 0 {
		t.Errorf("denied check: got %+v, want allowed false, count %d, remaining 0, retry_after_ms > 0", dec, wantCount)
	}
}

// ---------------------------------------------------------------------------
// Logs.

// logBuffer collects a child's output; it is an io.Writer safe for
// concurrent use that wakes waiters at every write.
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced at every Write
}

func newLogBuffer() *logBuffer { return &logBuffer{changed: make(chan struct{})} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	close(b.changed)
	b.changed = make(chan struct{})
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines returns the complete lines written so far and a channel closed at
// the next write.
func (b *logBuffer) lines() ([]string, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	} else {
		s = ""
	}
	if s == "" {
		return nil, b.changed
	}
	return strings.Split(s, "\n"), b.changed
}

// waitLine waits until a complete log line parses and satisfies match, at
// most timeout, and not past exited being closed.
func (b *logBuffer) waitLine(timeout time.Duration, exited <-chan struct{}, match func(logRecord) bool) (logRecord, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	find := func() (logRecord, <-chan struct{}) {
		lines, changed := b.lines()
		for _, l := range lines {
			if rec, err := parseLogLine(l); err == nil && match(rec) {
				return rec, nil
			}
		}
		return nil, changed
	}
	for {
		rec, changed := find()
		if rec != nil {
			return rec, nil
		}
		select {
		case <-changed:
		case <-exited:
			// cmd.Wait has returned, so all of stderr is in: one last look.
			if rec, _ := find(); rec != nil {
				return rec, nil
			}
			return nil, errors.New("the daemon exited")
		case <-timer.C:
			return nil, fmt.Errorf("timed out after %v", timeout)
		}
	}
}

// ---------------------------------------------------------------------------
// Tests.

// TestE2ESeed is the seed's own test: 110 requests, 10 at a time, against a
// limit of 100 in one window are answered exactly 100 times 200 and 10 times
// 413, each 413 with Retry-After ≥ 1 s and count 100.
func TestE2ESeed(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	scale := stableScaleMs(time.Now())
	const (
		total       = 110
		concurrency = 10
		limit       = 100
	)
	query := checkQuery("seed-client", scale, limit, 1)

	jobs := make(chan int)
	answers := make(chan response, total)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for range jobs {
				if r, ok := d.do(t, http.MethodGet, query, "", nil); ok {
					answers <- r
				}
			}
		})
	}
	for i := range total {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(answers)

	var allowed, denied int
	for r := range answers {
		switch r.status {
		case http.StatusOK:
			allowed++
			if dec, ok := decodeDecision(t, r); ok && (!dec.Allowed || dec.Limit != limit || dec.Count < 1 || dec.Count > limit || dec.Remaining != limit-dec.Count || dec.ID != "seed-client") {
				t.Errorf("allowed check: got %+v, want allowed, id seed-client, count in [1,%d], remaining limit-count", dec, limit)
			}
		case http.StatusRequestEntityTooLarge:
			denied++
			assertDenied(t, r, http.StatusRequestEntityTooLarge, limit)
		default:
			t.Errorf("check: got %v, want 200 or 413", r)
		}
	}
	if allowed != limit || denied != total-limit {
		t.Errorf("%d checks against limit %d: got %d allowed and %d denied, want %d and %d",
			total, limit, allowed, denied, limit, total-limit)
	}
}

// TestE2EBadInput: every kind of bad input is answered 400 with a JSON error
// naming the field, and the server keeps answering good requests.
func TestE2EBadInput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	long := strings.Repeat("a", 1025)
	bigBody := `{"id":"` + strings.Repeat("a", 260<<10) + `","scale":1000,"limit":5}`
	tests := []struct {
		name  string
		post  string // the JSON body of a POST; a GET with query when empty
		query string
		field string
	}{
		{name: "missing id", query: "scale=1000&limit=5", field: "id"},
		{name: "empty id", query: "id=&scale=1000&limit=5", field: "id"},
		{name: "id of 1025 bytes", query: "id=" + long + "&scale=1000&limit=5", field: "id"},
		{name: "missing scale", query: "id=a&limit=5", field: "scale"},
		{name: "missing limit", query: "id=a&scale=1000", field: "limit"},
		{name: "scale 0", query: "id=a&scale=0&limit=5", field: "scale"},
		{name: "scale -5", query: "id=a&scale=-5&limit=5", field: "scale"},
		{name: "scale 1.5", query: "id=a&scale=1.5&limit=5", field: "scale"},
		{name: "scale abc", query: "id=a&scale=abc&limit=5", field: "scale"},
		{name: "scale overflow", query: "id=a&scale=99999999999999999999&limit=5", field: "scale"},
		{name: "limit 0", query: "id=a&scale=1000&limit=0", field: "limit"},
		{name: "limit -1", query: "id=a&scale=1000&limit=-1", field: "limit"},
		{name: "limit 1.5", query: "id=a&scale=1000&limit=1.5", field: "limit"},
		{name: "limit 1e3", query: "id=a&scale=1000&limit=1e3", field: "limit"},
		{name: "limit overflow", query: "id=a&scale=1000&limit=99999999999999999999", field: "limit"},
		{name: "hits -1", query: "id=a&scale=1000&limit=5&hits=-1", field: "hits"},
		{name: "algorithm nope", query: "id=a&scale=1000&limit=5&algorithm=nope", field: "algorithm"},
		{name: "unknown parameter", query: "id=a&scale=1000&limit=5&colour=blue", field: "colour"},
		{name: "POST malformed JSON", post: `{"id":"a","scale":`, field: "body"},
		{name: "POST unknown field", post: `{"id":"a","scale":1000,"limit":5,"colour":"blue"}`, field: "colour"},
		{name: "POST body over 256 KiB", post: bigBody, field: "body"},
		{name: "POST trailing garbage", post: `{"id":"a","scale":1000,"limit":5} x`, field: "body"},
	}
	for _, tt := range tests {
		var r response
		var ok bool
		if tt.post != "" {
			r, ok = d.do(t, http.MethodPost, "/check_rate", "application/json", strings.NewReader(tt.post))
		} else {
			r, ok = d.do(t, http.MethodGet, "/check_rate?"+tt.query, "", nil)
		}
		if !ok {
			continue
		}
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: got %.300v, want status 400", tt.name, r)
			continue
		}
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: got Content-Type %q, want application/json", tt.name, ct)
		}
		var body struct {
			Error *string `json:"error"`
			Field *string `json:"field"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil || body.Error == nil || body.Field == nil {
			t.Errorf("%s: got body %.300s (%v), want JSON with error and field", tt.name, r.body, err)
			continue
		}
		if *body.Field != tt.field || *body.Error == "" {
			t.Errorf("%s: got field %q, error %q; want field %q and an error message", tt.name, *body.Field, *body.Error, tt.field)
		}
	}

	// The same server still answers good requests, GET and POST.
	if r := d.check(t, "good", 1000, 5, 1); r.status != http.StatusOK {
		t.Errorf("good GET after bad input: got %v, want 200", r)
	}
	r, ok := d.do(t, http.MethodPost, "/check_rate", "application/json", strings.NewReader(`{"id":"good-post","scale":1000,"limit":5}`))
	if ok && r.status != http.StatusOK {
		t.Errorf("good POST after bad input: got %v, want 200", r)
	}
}

// TestE2EDenyStatus429: with --deny-status 429 a denial is 429 with
// Retry-After.
func TestE2EDenyStatus429(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--deny-status", "429")
	scale := stableScaleMs(time.Now())
	if r := d.check(t, "k", scale, 1, 1); r.status != http.StatusOK {
		t.Fatalf("first check: got %v, want 200", r)
	}
	assertDenied(t, d.check(t, "k", scale, 1, 1), http.StatusTooManyRequests, 1)
}

// TestE2ESweepKeepsOpenWindow: sweeps (every 20 ms) never reset a window
// that is still open: an exhausted key stays denied, count unchanged, after
// several sweeps.
func TestE2ESweepKeepsOpenWindow(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--sweep-interval", "20ms")
	scale := stableScaleMs(time.Now())
	const limit = 5
	for i := range limit {
		if r := d.check(t, "exhausted", scale, limit, 1); r.status != http.StatusOK {
			t.Fatalf("check %d of %d: got %v, want 200", i+1, limit, r)
		}
	}
	assertDenied(t, d.check(t, "exhausted", scale, limit, 1), http.StatusRequestEntityTooLarge, limit)

	base, found := d.metric(t, "ratelimitd_sweeps_total")
	if !found {
		t.Fatalf("/metrics has no ratelimitd_sweeps_total")
	}
	d.pollMetrics(t, "3 more sweeps", func(get func(string) float64) (bool, string) {
		n := get("ratelimitd_sweeps_total")
		return n >= base+3, fmt.Sprintf("ratelimitd_sweeps_total %v, started at %v", n, base)
	})

	assertDenied(t, d.check(t, "exhausted", scale, limit, 1), http.StatusRequestEntityTooLarge, limit)
	// A peek (hits=0) sees the same count.
	r := d.check(t, "exhausted", scale, limit, 0)
	if dec, ok := decodeDecision(t, r); ok && (dec.Allowed || dec.Count != limit) {
		t.Errorf("peek after sweeps: got %v, want allowed false and count %d", r, limit)
	}
	if n, _ := d.metric(t, "ratelimitd_buckets"); n < 1 {
		t.Errorf("ratelimitd_buckets after sweeps: got %v, want ≥ 1 (the open window)", n)
	}
}

// TestE2ESweepDeletesExpired: buckets whose window has ended are swept: the
// bucket gauge falls to 0 and the swept counter counts them.
func TestE2ESweepDeletesExpired(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--sweep-interval", "20ms")
	const ids = 100
	for i := range ids {
		if r := d.check(t, fmt.Sprintf("short-lived-%d", i), 50, 10, 1); r.status != http.StatusOK {
			t.Fatalf("check %d: got %v, want 200", i, r)
		}
	}
	d.pollMetrics(t, "all expired buckets swept", func(get func(string) float64) (bool, string) {
		buckets, swept, slices, backlog := get("ratelimitd_buckets"), get("ratelimitd_swept_buckets_total"), get("ratelimitd_sweep_slices_total"), get("ratelimitd_sweep_backlog_shards")
		// 100 buckets fit one slice of each shard: swept, no backlog left.
		return buckets == 0 && swept >= ids && slices >= 1 && backlog == 0, fmt.Sprintf("ratelimitd_buckets %v, ratelimitd_swept_buckets_total %v, ratelimitd_sweep_slices_total %v, ratelimitd_sweep_backlog_shards %v (want 0, ≥ %d, ≥ 1, 0)", buckets, swept, slices, backlog, ids)
	})
}

// forged is a value that would forge a log line if it were logged raw.
const forged = "\nlevel=ERROR msg=forged"

// TestE2ELogInjection: client-supplied values holding a newline and a fake
// log record (an id, a path) are logged, at debug level, as escaped
// attribute values and never produce a log line of their own, in text or
// JSON format; every stderr line is a whole record of the chosen format.
func TestE2ELogInjection(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t, "--log-level", "debug", "--log-format", format)
			scale := stableScaleMs(time.Now())
			id := "victim" + forged
			// Allowed, denied and invalid checks, by GET and POST, and an
			// unknown path: whatever the server logs, it sees these values.
			d.check(t, id, scale, 1, 1)
			d.check(t, id, scale, 1, 1)
			d.get(t, "/check_rate?"+url.Values{"id": {id}, "scale": {"1000"}, "limit": {"0"}}.Encode())
			body, _ := json.Marshal(map[string]any{"id": id, "scale": scale, "limit": 1})
			d.do(t, http.MethodPost, "/check_rate", "application/json", bytes.NewReader(body))
			d.do(t, http.MethodPost, "/check_rate", "application/json", strings.NewReader(`{"id":`+strconv.Quote(id)+`,"colour":1}`))
			d.get(t, "/nowhere"+url.PathEscape(forged))
			d.stop() // flush every log line

			logs := d.logs.String()
			if !strings.HasSuffix(logs, "\n") {
				t.Errorf("stderr does not end with a newline:\n%s", logs)
			}
			var sawID, sawPath bool
			for _, line := range strings.Split(strings.TrimSuffix(logs, "\n"), "\n") {
				if strings.HasPrefix(line, "level=ERROR msg=forged") || strings.HasPrefix(line, `{"level":"ERROR","msg":"forged"`) {
					t.Errorf("forged log line: %q", line)
				}
				rec, err := parseLogLine(line)
				if err == nil && strings.HasPrefix(line, "{") != (format == "json") {
					err = errors.New("wrong format")
				}
				if err != nil {
					t.Errorf("stderr line %q is not a %s log record: %v", line, format, err)
					continue
				}
				sawID = sawID || rec["id"] == id
				sawPath = sawPath || rec["path"] == "/nowhere"+forged
			}
			// The request log (at debug) logs them: they went through the
			// logger and came out escaped, each inside its own record.
			if !sawID {
				t.Errorf("no log record has id %q; stderr:\n%s", id, logs)
			}
			if !sawPath {
				t.Errorf("no log record has path %q; stderr:\n%s", "/nowhere"+forged, logs)
			}
		})
	}
}

// TestE2EGracefulShutdown: /healthz answers 200; SIGTERM makes the daemon
// log each shutdown step and exit 0 promptly, not held up by an idle
// keep-alive connection.
func TestE2EGracefulShutdown(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--shutdown-timeout", "30s")
	r := d.get(t, "/healthz")
	if r.status != http.StatusOK {
		t.Fatalf("GET /healthz: got %v, want 200", r)
	}
	// The client keeps the connection of /healthz open and idle across the
	// signal: the server must close it rather than wait for it.
	took := d.stop()
	if t.Failed() {
		return
	}
	if took > 5*time.Second {
		t.Errorf("exit after SIGTERM took %v; want well under --shutdown-timeout (an idle connection must not hold it)", took)
	}
	// Each step is logged, in order.
	lines, _ := d.logs.lines()
	want := []string{"shutting down", "HTTP server stopped", "actor system stopped", "stopped"}
	i := 0
	for _, l := range lines {
		if rec, err := parseLogLine(l); err == nil && i < len(want) && rec["msg"] == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("shutdown log: missing %q (in order %q); stderr:\n%s", want[i], want, d.logs)
	}
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(d.base, "http://"), time.Second); err == nil {
		t.Errorf("after exit, %s still accepts connections", d.base)
	}
}

// TestE2EGracefulShutdownDrains: a request in flight when SIGTERM arrives is
// answered in full; meanwhile the listener is closed; then the daemon exits 0.
func TestE2EGracefulShutdownDrains(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--shutdown-timeout", "30s")
	addr := strings.TrimPrefix(d.base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(stopTimeout)); err != nil {
		t.Fatal(err)
	}
	body := `{"id":"in-flight","scale":60000,"limit":5}`
	half := len(body) / 2
	// With Expect: 100-continue the server answers 100 when the handler
	// starts reading the body: from then on the request is in flight.
	fmt.Fprintf(conn, "POST /check_rate HTTP/1.1\r\nHost: ratelimitd\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n%s", len(body), body[:half])
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading 100 Continue: %v", err)
	}
	if resp.StatusCode != http.StatusContinue {
		t.Fatalf("got status %d, want 100 Continue", resp.StatusCode)
	}

	d.terminate()
	if _, err := d.logs.waitLine(stopTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == "shutting down" }); err != nil {
		t.Fatalf("no shutting down line: %v; stderr:\n%s", err, d.logs)
	}
	// The listener closes while the request is still in flight.
	deadline := time.Now().Add(pollTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the listener still accepts %v after SIGTERM", pollTimeout)
		}
		<-time.After(pollInterval)
	}
	select {
	case <-d.exited:
		t.Fatalf("the daemon exited with a request in flight: %v; stderr:\n%s", d.waitErr, d.logs)
	default:
	}

	if _, err := io.WriteString(conn, body[half:]); err != nil {
		t.Fatalf("sending the rest of the body: %v", err)
	}
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer of the in-flight request: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := response{status: resp.StatusCode, header: resp.Header, body: b}
	if dec, ok := decodeDecision(t, r); ok && (r.status != http.StatusOK || !dec.Allowed || dec.Count != 1) {
		t.Errorf("in-flight request: got %v, want 200 with allowed true and count 1", r)
	}
	if resp.Header.Get("Connection") != "close" && !resp.Close {
		t.Errorf("in-flight request during shutdown: want Connection: close")
	}
	d.stop() // asserts exit 0 within stopTimeout (a second SIGTERM, if sent, is harmless)
	if lines, _ := d.logs.lines(); !strings.Contains(strings.Join(lines, "\n"), "msg=stopped exit_code=0") {
		t.Errorf("no stopped line; stderr:\n%s", d.logs)
	}
}

// runDaemonOnce runs the daemon with args to completion (bounded) and
// returns its exit code, stdout and stderr.
func runDaemonOnce(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runDaemonOnceVia(t, nil, args...)
}

// runDaemonOnceVia is runDaemonOnce through a command prefix, as
// startDaemonVia.
func runDaemonOnceVia(t *testing.T, prefix []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	bin := needDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	args = append(append(slices.Clone(prefix), bin), args...)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = daemonEnv()
	cmd.Dir = t.TempDir() // the default ./data lands there
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	killWithParent(cmd)
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("ratelimitd %q did not exit within %v; stderr:\n%s", args, startTimeout, errb.String())
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		code = 0
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("ratelimitd %q: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// TestE2EBadFlags: an invalid flag or value exits 2 with a message naming
// the flag, and starts nothing. Each case also asks for a free port, so a
// flag wrongly accepted would show up as a listening line (and a timeout).
func TestE2EBadFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		name string // what stderr must name
	}{
		{[]string{"--deny-status", "500"}, "deny-status"},
		{[]string{"--listen", "garbage"}, "listen"},
		{[]string{"--listen", "127.0.0.1:99999"}, "listen"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"--log-format", "xml"}, "log-format"},
		{[]string{"--log-level", "loud"}, "log-level"},
		{[]string{"--sweep-interval", "0"}, "sweep-interval"},
		{[]string{"--shards", "-1"}, "shards"},
		{[]string{"--shutdown-timeout", "soon"}, "shutdown-timeout"},
		{[]string{"stray-argument"}, "stray-argument"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			args := tt.args
			if tt.args[0] != "--listen" {
				args = append([]string{"--listen", "127.0.0.1:0"}, tt.args...)
			}
			code, stdout, stderr := runDaemonOnce(t, args...)
			if code != 2 {
				t.Errorf("exit code: got %d, want 2; stderr:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, tt.name) {
				t.Errorf("stderr does not name %q:\n%s", tt.name, stderr)
			}
			if !strings.Contains(stderr, "Usage:") {
				t.Errorf("stderr has no usage:\n%s", stderr)
			}
			if strings.Contains(stderr, "listening") || strings.Contains(stderr, "starting") {
				t.Errorf("the daemon started:\n%s", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout: got %q, want nothing", stdout)
			}
		})
	}
}

// TestE2EListenFailure: an address that cannot be bound is a start failure
// (exit 1, logged), not a usage error.
func TestE2EListenFailure(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, stderr := runDaemonOnce(t, "--listen", ln.Addr().String())
	if code != 1 {
		t.Errorf("exit code with the port taken: got %d, want 1; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "cannot listen") || strings.Contains(stderr, "msg=listening") {
		t.Errorf("stderr: want a cannot-listen error and no listening line:\n%s", stderr)
	}
}

// TestE2EVersion: --version prints the version to stdout and exits 0.
func TestE2EVersion(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runDaemonOnce(t, "--version")
	if code != 0 || !strings.HasPrefix(stdout, "ratelimitd ") || stderr != "" {
		t.Errorf("--version: got exit %d, stdout %q, stderr %q; want 0, \"ratelimitd …\", nothing", code, stdout, stderr)
	}
}

// TestE2EProtocolErrors: requests that break HTTP itself, sent raw over TCP,
// get exactly the statuses README documents for Go's HTTP server (the only
// 5xx among them are 501 and 505, which RFC 9112 prescribes), each closing
// the connection; the daemon goes on answering.
func TestE2EProtocolErrors(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t)
	addr := strings.TrimPrefix(d.base, "http://")
	tests := []struct {
		name   string
		raw    string
		status int
		readme string // what README says of it
	}{
		{"HTTP/9.9", "GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", 505, "**505** for an HTTP major version other than 1"},
		{"HTTP/2.0 as text", "GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 505, "(`HTTP/2.0` sent as HTTP/1 text, `HTTP/9.9`)"},
		{"Transfer-Encoding gzip", "POST /check_rate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "**501** for a `Transfer-Encoding` other than\n  `chunked`"},
		{"Transfer-Encoding gzip, chunked", "POST /check_rate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501, "**501** for a `Transfer-Encoding` other than\n  `chunked`"},
		{"malformed request line", "HELLO\r\n\r\n", 400, "**400** for a\n  malformed request line"},
		{"malformed header", "GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n", 400, "header, `Host` or `Content-Length`"},
		{"no Host", "GET /healthz HTTP/1.1\r\n\r\n", 400, "header, `Host` or `Content-Length`"},
		{"malformed Content-Length", "POST /check_rate HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400, "header, `Host` or `Content-Length`"},
		{"unknown Expect", "POST /check_rate HTTP/1.1\r\nHost: x\r\nExpect: coffee\r\nContent-Length: 2\r\n\r\n{}", 417, "**417** for an `Expect` other than\n  `100-continue`"},
		{"headers over 64 KiB", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", 431, "**431** for headers over 64 KiB"},
	}
	for _, tt := range tests {
		if !bytes.Contains(readme, []byte(tt.readme)) {
			t.Errorf("%s: README does not say %q", tt.name, tt.readme)
		}
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, tt.raw); err != nil {
			t.Errorf("%s: writing: %v", tt.name, err)
			conn.Close()
			continue
		}
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Errorf("%s: reading the answer: %v", tt.name, err)
			conn.Close()
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s: got status %d, want %d", tt.name, resp.StatusCode, tt.status)
		}
		if !resp.Close {
			t.Errorf("%s: the answer does not close the connection", tt.name)
		}
		if n, err := br.Read(make([]byte, 1)); err == nil || n != 0 {
			t.Errorf("%s: the connection is still open after the answer (read %d bytes, %v)", tt.name, n, err)
		}
		conn.Close()
	}
	if r := d.get(t, "/healthz"); r.status != http.StatusOK {
		t.Errorf("GET /healthz after the protocol errors: got %v, want 200", r)
	}
}
