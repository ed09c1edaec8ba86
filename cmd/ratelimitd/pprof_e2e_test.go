package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2EAdminPprof: with --admin-pprof the admin listener serves the Go
// runtime's profiles behind its token, a CPU profile longer than the
// listener's write timeout (10 s) included; without it they are 404; the
// flag without --admin-token-file refuses to start.
func TestE2EAdminPprof(t *testing.T) {
	t.Parallel()
	const tok = "pprof-token-0123456789abcdef"
	path := filepath.Join(t.TempDir(), "token")
	writeFile(t, path, tok+"\n")

	code, _, stderr := runDaemonOnce(t, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--admin-pprof")
	if code != 2 || !strings.Contains(stderr, "--admin-pprof needs --admin-token-file") {
		t.Errorf("--admin-pprof alone: exit %d, stderr %q; want 2 and the flag named", code, stderr)
	}

	off := startDaemon(t, "--admin-token-file", path, "--admin-listen", "127.0.0.1:0")
	if r := adminDo(t, "GET", adminURL(t, off)+"/debug/pprof/heap", tok, ""); r.status != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/heap without --admin-pprof: %d, want 404", r.status)
	}

	d := startDaemon(t, "--admin-token-file", path, "--admin-listen", "127.0.0.1:0", "--admin-pprof")
	base := adminURL(t, d)
	if r := adminDo(t, "GET", d.base+"/debug/pprof/heap", tok, ""); r.status != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/heap on the public listener: %d, want 404", r.status)
	}
	if r := adminDo(t, "GET", base+"/debug/pprof/heap", "", ""); r.status != http.StatusUnauthorized {
		t.Errorf("GET /debug/pprof/heap without the token: %d, want 401", r.status)
	}
	r := adminDo(t, "GET", base+"/debug/pprof/goroutine?debug=1", tok, "")
	if r.status != http.StatusOK || !bytes.HasPrefix(r.body, []byte("goroutine profile: total ")) ||
		!bytes.Contains(r.body, []byte("net/http.(*Server).Serve")) {
		t.Errorf("goroutine?debug=1: %d %.100q; want the daemon's goroutines", r.status, r.body)
	}
	wantProfile(t, "heap", adminDo(t, "GET", base+"/debug/pprof/heap", tok, ""))
	if r := adminDo(t, "GET", base+"/debug/pprof/trace?seconds=1", tok, ""); r.status != http.StatusOK || !bytes.HasPrefix(r.body, []byte("go 1.")) {
		t.Errorf("trace?seconds=1: %d %.40q; want an execution trace", r.status, r.body)
	}
	if testing.Short() {
		return
	}
	// 11 s: past the admin listener's 10-second write timeout, which the
	// profile moves.
	wantProfile(t, "profile?seconds=11", adminDo(t, "GET", base+"/debug/pprof/profile?seconds=11", tok, ""))

	// SIGTERM during a 60-second profile: it ends and is answered, and the
	// daemon exits cleanly, without waiting out its 10-second shutdown
	// timeout (after which the profile's connection would be cut: no
	// answer).
	type answer struct {
		r   response
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		r, err := adminSend("GET", base+"/debug/pprof/profile?seconds=60", tok, "")
		answered <- answer{r, err}
	}()
	for deadline := time.Now().Add(pollTimeout); ; time.Sleep(20 * time.Millisecond) {
		r := adminDo(t, "GET", base+"/debug/pprof/goroutine?debug=1", tok, "")
		if bytes.Contains(r.body, []byte("admin.(*admin).cpuProfile")) {
			break // the profile is under way
		}
		if time.Now().After(deadline) {
			t.Fatalf("no profile under way after %v:\n%s", pollTimeout, r.body)
		}
	}
	d.stop()
	a := <-answered
	if a.err != nil {
		t.Fatalf("a profile under way at SIGTERM: %v (cut off at the shutdown timeout?)", a.err)
	}
	wantProfile(t, "a profile SIGTERM ended", a.r)
}

// wantProfile checks that r is a profile in go tool pprof's format: a
// gzipped protocol buffer.
func wantProfile(t *testing.T, what string, r response) {
	t.Helper()
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("%s: %d %s %.200q; want 200 application/octet-stream", what, r.status, r.header.Get("Content-Type"), r.body)
	}
	zr, err := gzip.NewReader(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("%s: not gzip: %v", what, err)
	}
	if b, err := io.ReadAll(zr); err != nil || len(b) == 0 {
		t.Fatalf("%s: %d bytes after gunzip, %v", what, len(b), err)
	}
}
