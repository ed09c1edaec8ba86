package admin_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/admin"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
)

// profilingAdmin serves an admin handler with Options.Profiling set as
// given (and Options.Done, if given) and returns its URL.
func profilingAdmin(t *testing.T, on bool, done ...chan struct{}) string {
	t.Helper()
	sys, _ := actorstest.StartClocked(t)
	opts := admin.Options{Backend: backend{sys}, Token: adminToken, AuthFailures: -1, Profiling: on}
	if len(done) > 0 {
		opts.Done = done[0]
	}
	h, err := admin.NewHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func authorized(t *testing.T, method, u string) apitest.Response {
	t.Helper()
	return apitest.DoHeader(t, method, u, "", "Authorization", "Bearer "+adminToken)
}

// gunzipped returns the decompressed body of a profile in its binary
// format (a gzipped protocol buffer), failing the test if it is not one.
func gunzipped(t *testing.T, what string, r apitest.Response) []byte {
	t.Helper()
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("%s: %d %s, want 200 application/octet-stream", what, r.Status, r.Header.Get("Content-Type"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatalf("%s: not gzip: %v", what, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil || len(b) == 0 {
		t.Fatalf("%s: %d bytes after gunzip, %v", what, len(b), err)
	}
	return b
}

// TestProfilingOff: without Options.Profiling the profile paths are the
// admin API's JSON 404, behind the token like every other path.
func TestProfilingOff(t *testing.T) {
	t.Parallel()
	base := profilingAdmin(t, false)
	for _, p := range []string{"/debug/pprof", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
		path, _, _ := strings.Cut(p, "?")
		wantError(t, authorized(t, "GET", base+p), http.StatusNotFound, apitest.ErrorBody{Error: "no such path: " + path})
		if r := apitest.Do(t, http.DefaultClient, "GET", base+p, ""); r.Status != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", p, r.Status)
		}
	}
}

// TestProfiles: the list, a text and a binary runtime profile, the
// parameters' rules, unknown names and other methods.
func TestProfiles(t *testing.T) {
	t.Parallel()
	base := profilingAdmin(t, true)
	if r := apitest.Do(t, http.DefaultClient, "GET", base+"/debug/pprof/heap", ""); r.Status != http.StatusUnauthorized {
		t.Errorf("GET /debug/pprof/heap without the token: %d, want 401", r.Status)
	}
	if r := apitest.DoHeader(t, "GET", base+"/debug/pprof/goroutine?debug=1", "", "Authorization", "Bearer wrong-token-0123456789"); r.Status != http.StatusUnauthorized {
		t.Errorf("a goroutine dump with a wrong token: %d, want 401", r.Status)
	}

	r := authorized(t, "GET", base+"/debug/pprof")
	var list struct {
		Profiles []struct {
			Name  string `json:"name"`
			Count *int   `json:"count"`
			Path  string `json:"path"`
		} `json:"profiles"`
	}
	apitest.DecodeStrict(t, r.Body, &list)
	if r.Status != http.StatusOK || len(list.Profiles) < 7 {
		t.Fatalf("GET /debug/pprof: %d %s", r.Status, r.Body)
	}
	if p := list.Profiles[0]; p.Name != "profile" || p.Count != nil || p.Path != "/debug/pprof/profile?seconds=30" {
		t.Errorf("the first profile listed: %+v, want the CPU's, with no count", p)
	}
	if p := list.Profiles[1]; p.Name != "trace" || p.Count != nil || p.Path != "/debug/pprof/trace?seconds=1" {
		t.Errorf("the second profile listed: %+v, want the execution trace, with no count", p)
	}
	seen := map[string]bool{}
	for i, p := range list.Profiles[2:] {
		seen[p.Name] = true
		if p.Count == nil || *p.Count < 0 || p.Path != "/debug/pprof/"+p.Name {
			t.Errorf("profile %+v: want a count and its path", p)
		}
		if i > 0 && list.Profiles[i+1].Name >= p.Name {
			t.Errorf("profiles %q then %q: want them by name", list.Profiles[i+1].Name, p.Name)
		}
		if p.Name == "goroutine" && *p.Count < 2 {
			t.Errorf("goroutine count %d: this test and its server run more", *p.Count)
		}
	}
	for _, name := range []string{"allocs", "block", "goroutine", "heap", "mutex", "threadcreate"} {
		if !seen[name] {
			t.Errorf("GET /debug/pprof lists no %s", name)
		}
	}

	r = authorized(t, "GET", base+"/debug/pprof/goroutine?debug=1")
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "text/plain; charset=utf-8" ||
		!bytes.HasPrefix(r.Body, []byte("goroutine profile: total ")) || !bytes.Contains(r.Body, []byte("TestProfiles")) {
		t.Errorf("goroutine?debug=1: %d %q %.80q; want the text dump, with this test in it", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	r = authorized(t, "GET", base+"/debug/pprof/goroutine?debug=2")
	if r.Status != http.StatusOK || !bytes.HasPrefix(r.Body, []byte("goroutine ")) || !bytes.Contains(r.Body, []byte("admin_test.TestProfiles")) {
		t.Errorf("goroutine?debug=2: %d %.80q; want every goroutine's stack", r.Status, r.Body)
	}
	r = authorized(t, "GET", base+"/debug/pprof/heap?gc=1")
	gunzipped(t, "heap?gc=1", r)
	if cd := r.Header.Get("Content-Disposition"); cd != `attachment; filename="heap.pb.gz"` || r.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("heap: Content-Disposition %q, Cache-Control %q", cd, r.Header.Get("Cache-Control"))
	}

	const (
		ruleDebug   = "must be 0 (gzipped protocol buffer, for go tool pprof), 1 or 2 (text)"
		ruleSeconds = "must be a whole number of seconds from 1 to 300"
	)
	for _, tc := range []struct{ query, field, msg string }{
		{"heap?debug=3", "debug", ruleDebug},
		{"goroutine?debug=-1", "debug", ruleDebug},
		{"heap?debug=x", "debug", ruleDebug},
		{"heap?gc=2", "gc", "must be 0 or 1"},
		{"profile?seconds=0", "seconds", ruleSeconds},
		{"profile?seconds=301", "seconds", ruleSeconds},
		{"profile?seconds=1.5", "seconds", ruleSeconds},
		{"trace?seconds=0", "seconds", ruleSeconds},
		{"trace?seconds=x", "seconds", ruleSeconds},
	} {
		t.Run(tc.query, func(t *testing.T) {
			wantError(t, authorized(t, "GET", base+"/debug/pprof/"+tc.query), http.StatusBadRequest, apitest.ErrorBody{Error: tc.msg, Field: tc.field})
		})
	}
	wantError(t, authorized(t, "GET", base+"/debug/pprof/nope"), http.StatusNotFound, apitest.ErrorBody{Error: `no profile "nope": GET /debug/pprof lists them`})
	wantError(t, authorized(t, "GET", base+"/debug/pprof/heap/x"), http.StatusNotFound, apitest.ErrorBody{Error: "no such path: /debug/pprof/heap/x"})
	for _, m := range []string{"POST", "DELETE", "HEAD"} {
		r := authorized(t, m, base+"/debug/pprof/heap")
		if r.Status != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET" {
			t.Errorf("%s /debug/pprof/heap: %d Allow %q, want 405 Allow GET", m, r.Status, r.Header.Get("Allow"))
		}
	}
}

// TestCPUProfile: a CPU profile of one second; a second one while the
// runtime's profiler is taken is 409; a client that leaves ends its
// profile, so the next one can be taken; the server's stop (Options.Done)
// ends one, answered with what it holds.
func TestCPUProfile(t *testing.T) {
	// Not parallel with the other tests that use the process's one CPU
	// profiler: there are none.
	done := make(chan struct{})
	base := profilingAdmin(t, true, done)
	start := time.Now()
	r := authorized(t, "GET", base+"/debug/pprof/profile?seconds=1")
	if took := time.Since(start); took < time.Second {
		t.Errorf("a 1-second profile answered after %v", took)
	}
	if gunzipped(t, "profile?seconds=1", r); r.Header.Get("Content-Disposition") != `attachment; filename="profile.pb.gz"` {
		t.Errorf("Content-Disposition %q", r.Header.Get("Content-Disposition"))
	}

	if err := pprof.StartCPUProfile(io.Discard); err != nil {
		t.Skipf("the CPU profiler is taken (go test -cpuprofile?): %v", err)
	}
	r = authorized(t, "GET", base+"/debug/pprof/profile?seconds=1")
	pprof.StopCPUProfile()
	wantError(t, r, http.StatusConflict, apitest.ErrorBody{Error: "a CPU profile is being taken already; ask again when it ends"})

	// A client that gives up on a 300-second profile frees the profiler.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/debug/pprof/profile?seconds=300", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if resp, err := http.DefaultClient.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			resp.Body.Close()
		}
		t.Fatalf("a 300-second profile given up after 200 ms: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = authorized(t, "GET", base+"/debug/pprof/profile?seconds=1")
		if r.Status == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	gunzipped(t, "a profile after one given up", r)

	// The server stops 200 ms into a 300-second profile: the profile is
	// answered (the client waits at most a minute for it).
	// The client gives up after a minute, which ends the profile too.
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	answered := getAsync(ctx, base+"/debug/pprof/profile?seconds=300")
	time.Sleep(200 * time.Millisecond)
	close(done)
	a := <-answered
	if a.err != nil {
		t.Fatalf("a 300-second profile 200 ms before the server's stop: %v, want it answered at the stop", a.err)
	}
	gunzipped(t, "a profile the server's stop ended", a.r)
}

// asyncAnswer is the outcome of getAsync.
type asyncAnswer struct {
	r   apitest.Response
	err error
}

// getAsync sends an authorized GET from a goroutine of its own (which
// must not fail the test itself) and delivers its answer.
func getAsync(ctx context.Context, u string) <-chan asyncAnswer {
	c := make(chan asyncAnswer, 1)
	go func() {
		var a asyncAnswer
		req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+adminToken)
			var resp *http.Response
			if resp, err = http.DefaultClient.Do(req); err == nil {
				a.r.Status, a.r.Header = resp.StatusCode, resp.Header
				a.r.Body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
		}
		a.err = err
		c <- a
	}()
	return c
}

// TestExecTrace: an execution trace of one second, streamed in go tool
// trace's format; a second one while the first runs is 409.
func TestExecTrace(t *testing.T) {
	// Not parallel: the process has one tracer (see TestCPUProfile).
	base := profilingAdmin(t, true)
	r := authorized(t, "GET", base+"/debug/pprof/trace")
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/octet-stream" ||
		r.Header.Get("Content-Disposition") != `attachment; filename="trace.out"` || !bytes.HasPrefix(r.Body, []byte("go 1.")) {
		t.Fatalf("GET /debug/pprof/trace: %d %q %q %.20q; want 200 and a trace", r.Status, r.Header.Get("Content-Type"), r.Header.Get("Content-Disposition"), r.Body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := getAsync(ctx, base+"/debug/pprof/trace?seconds=2")
	for deadline := time.Now().Add(10 * time.Second); !trace.IsEnabled(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first trace did not start within 10 s")
		}
	}
	wantError(t, authorized(t, "GET", base+"/debug/pprof/trace?seconds=1"), http.StatusConflict, apitest.ErrorBody{Error: "an execution trace is being taken already; ask again when it ends"})
	a := <-first
	if a.err != nil || a.r.Status != http.StatusOK || !bytes.HasPrefix(a.r.Body, []byte("go 1.")) {
		t.Errorf("the first trace: %v %d %.20q; want 200 and a trace", a.err, a.r.Status, a.r.Body)
	}
}
