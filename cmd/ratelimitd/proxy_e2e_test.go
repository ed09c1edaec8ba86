package main

// End-to-end tests of proxy mode: the built daemon in front of a real
// upstream on loopback.

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// countingUpstream answers every request with its method, path and the
// SHA-256 of its body, and counts the requests.
func countingUpstream(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %x xff=%s", r.Method, r.URL.RequestURI(), sha256.Sum256(body), r.Header.Get("X-Forwarded-For"))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func (d *daemon) proxyDo(t *testing.T, method, path string, body []byte, hdr map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(method, d.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// TestE2EProxy: limited requests never reach the upstream; admitted ones
// arrive byte for byte (a 5 MB body included); spoofed X-Forwarded-For
// from an untrusted peer mints no new budget.
func TestE2EProxy(t *testing.T) {
	t.Parallel()
	up, hits := countingUpstream(t)
	d := startDaemon(t, "--proxy-upstream", up.URL, "--client-limit", "3/1h", "--global-limit", "1000/1h")
	for i := range 5 {
		r := d.proxyDo(t, "GET", fmt.Sprintf("/items?n=%d", i), nil, map[string]string{"X-Forwarded-For": fmt.Sprintf("10.0.0.%d", i)})
		want := http.StatusOK
		if i >= 3 {
			want = http.StatusRequestEntityTooLarge
		}
		if r.status != want {
			t.Fatalf("request %d: got %v, want %d (spoofed X-Forwarded-For must not mint budgets)", i, r, want)
		}
		if want == http.StatusOK && !strings.HasPrefix(string(r.body), fmt.Sprintf("GET /items?n=%d ", i)) {
			t.Fatalf("request %d: the upstream answered %q", i, r.body)
		}
		if want != http.StatusOK && r.header.Get("Retry-After") == "" {
			t.Fatalf("request %d: a denial without Retry-After", i)
		}
	}
	if got := hits.Load(); got != 3 {
		t.Fatalf("the upstream saw %d requests, want 3", got)
	}
}

func TestE2EProxyBody(t *testing.T) {
	t.Parallel()
	up, _ := countingUpstream(t)
	d := startDaemon(t, "--proxy-upstream", up.URL, "--client-limit", "10/1h")
	body := bytes.Repeat([]byte("ratelimitd"), 5<<20/10)
	r := d.proxyDo(t, "POST", "/upload?x=%2F", body, nil)
	want := fmt.Sprintf("POST /upload?x=%%2F %x xff=127.0.0.1", sha256.Sum256(body))
	if r.status != http.StatusOK || string(r.body) != want {
		t.Fatalf("got %v, want 200 %q", r, want)
	}
}

// TestE2EProxyTrustedForwarding: behind a trusted proxy (the loopback
// peer), the client is the right-most untrusted X-Forwarded-For hop, so two
// clients behind it have two budgets.
func TestE2EProxyTrustedForwarding(t *testing.T) {
	t.Parallel()
	up, _ := countingUpstream(t)
	d := startDaemon(t, "--proxy-upstream", up.URL, "--client-limit", "2/1h", "--trusted-proxies", "127.0.0.0/8")
	xff := func(chain string) map[string]string { return map[string]string{"X-Forwarded-For": chain} }
	steps := []struct {
		chain  string
		status int
	}{
		{"6.6.6.6, 198.51.100.7", 200}, {"7.7.7.7, 198.51.100.7", 200}, // spoofed left hops ignored
		{"198.51.100.7", 413},
		{"198.51.100.8", 200},
	}
	for i, s := range steps {
		if r := d.proxyDo(t, "GET", "/", nil, xff(s.chain)); r.status != s.status {
			t.Fatalf("step %d (%s): got %v, want %d", i, s.chain, r, s.status)
		}
	}
}

func TestE2EProxyUpstreamDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	d := startDaemon(t, "--proxy-upstream", dead, "--client-limit", "2/1h")
	for i, want := range []int{502, 502, 413} {
		if r := d.proxyDo(t, "GET", "/", nil, nil); r.status != want {
			t.Fatalf("request %d: got %v, want %d", i, r, want)
		}
	}
}
