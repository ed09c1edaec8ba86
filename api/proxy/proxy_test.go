package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/api/proxy"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// upstream is a real HTTP server on loopback that records what reaches it.
type upstream struct {
	*httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	last *http.Request
	body []byte
}

func startUpstream(t testing.TB) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.hits.Add(1)
		u.mu.Lock()
		u.last, u.body = r.Clone(context.Background()), body
		u.mu.Unlock()
		w.Header().Set("X-Upstream", "yes")
		sum := sha256.Sum256(body)
		fmt.Fprintf(w, "%s %s?%s %x", r.Method, r.URL.Path, r.URL.RawQuery, sum[:8])
	}))
	t.Cleanup(u.Close)
	return u
}

// startProxy serves NewProxy over a real System on loopback. The client key
// is the X-Test-Client header when present (each test's "address"), else
// the peer.
func startProxy(t testing.TB, upstreamURL string, opts proxy.Options) *httptest.Server {
	t.Helper()
	sys := actorstest.StartSystem(t)
	u, err := url.Parse(upstreamURL)
	if err != nil {
		t.Fatal(err)
	}
	opts.Upstream = u
	if opts.ClientKey == nil {
		opts.ClientKey = func(r *http.Request) string {
			if c := r.Header.Get("X-Test-Client"); c != "" {
				return c
			}
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			return host
		}
	}
	h, err := proxy.New(sys, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func proxyGet(t testing.TB, srv *httptest.Server, path string, hdr map[string]string) apitest.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func TestProxyLimitsBeforeTheUpstream(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	srv := startProxy(t, up.URL, proxy.Options{PerClient: &table.Policy{Scale: time.Hour, Limit: 3}})
	for i := range 5 {
		r := proxyGet(t, srv, "/page", map[string]string{"X-Test-Client": "203.0.113.7"})
		switch {
		case i < 3 && (r.Status != 200 || r.Header.Get("X-Upstream") != "yes" || r.Header.Get("RateLimit") == ""):
			t.Fatalf("request %d: got %d %s, want 200 from the upstream with RateLimit", i+1, r.Status, r.Body)
		case i >= 3 && (r.Status != 413 || r.Header.Get("Retry-After") == "" || r.Header.Get("X-Upstream") != ""):
			t.Fatalf("request %d: got %d %s, want 413 with Retry-After, not from the upstream", i+1, r.Status, r.Body)
		}
	}
	if got := up.hits.Load(); got != 3 {
		t.Fatalf("the upstream saw %d requests, want 3", got)
	}
	var d apitest.DecisionBody
	apitest.DecodeStrict(t, proxyGet(t, srv, "/page", map[string]string{"X-Test-Client": "203.0.113.7"}).Body, &d)
	if d.Allowed || d.Count != 3 || d.Limit != 3 || d.ID != "203.0.113.7" {
		t.Fatalf("denial body: got %+v, want count 3 of 3 for 203.0.113.7", d)
	}
	// Another client has its own budget.
	if r := proxyGet(t, srv, "/page", map[string]string{"X-Test-Client": "198.51.100.1"}); r.Status != 200 {
		t.Fatalf("another client: got %d, want 200", r.Status)
	}
}

// TestProxyForwardsByteForByte: method, path, query, headers and a 5 MB
// body arrive at the upstream as sent; the answer comes back as written.
func TestProxyForwardsByteForByte(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	srv := startProxy(t, up.URL, proxy.Options{Global: &table.Policy{Scale: time.Hour, Limit: 100}})
	body := bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16)
	req, _ := http.NewRequest("PUT", srv.URL+"/a/b%20c?x=1&y=%C3%A9&x=2", bytes.NewReader(body))
	req.Header.Set("X-Custom", "v1")
	req.Header.Add("X-Custom", "v2")
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sum := sha256.Sum256(body)
	want := fmt.Sprintf("PUT /a/b c?x=1&y=%%C3%%A9&x=2 %x", sum[:8])
	if resp.StatusCode != 200 || string(got) != want {
		t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, got, want)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if !bytes.Equal(up.body, body) {
		t.Fatalf("the upstream got %d body bytes, not the %d sent", len(up.body), len(body))
	}
	if h := up.last.Header; !slices.Equal(h.Values("X-Custom"), []string{"v1", "v2"}) || h.Get("Content-Type") != "application/octet-stream" || h.Get("X-Forwarded-For") != "127.0.0.1" {
		t.Fatalf("upstream headers: %v", h)
	}
}

// TestProxyLayersAllOrNothing: the global ceiling denies once spent, and a
// request it denies spends nothing of its client's budget.
func TestProxyLayersAllOrNothing(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	srv := startProxy(t, up.URL, proxy.Options{
		PerClient: &table.Policy{Scale: time.Hour, Limit: 2},
		Global:    &table.Policy{Scale: time.Hour, Limit: 3},
	})
	steps := []struct {
		client string
		status int
	}{
		{"a", 200}, {"a", 200}, {"a", 413}, // a's own limit
		{"b", 200}, {"c", 413}, // the global ceiling: 3 admitted
		{"b", 413}, {"c", 413},
	}
	for i, s := range steps {
		if r := proxyGet(t, srv, "/", map[string]string{"X-Test-Client": s.client}); r.Status != s.status {
			t.Fatalf("step %d (%s): got %d %s, want %d", i, s.client, r.Status, r.Body, s.status)
		}
	}
	if got := up.hits.Load(); got != 3 {
		t.Fatalf("the upstream saw %d requests, want 3", got)
	}
}

func TestProxyURLRules(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	st, err := rules.NewStore([]rules.Rule{
		{Name: "api", Policy: table.Policy{Scale: time.Hour, Limit: 2}, Key: "header:X-API-Key", Match: rules.Match{Prefix: "/api"}},
		{Name: "watch", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Shadow: true, Match: rules.Match{Prefix: "/watch"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := startProxy(t, up.URL, proxy.Options{Rules: st})
	key := func(k string) map[string]string { return map[string]string{"X-API-Key": k} }
	for i, want := range []int{200, 200, 413} {
		if r := proxyGet(t, srv, "/api/items", key("k1")); r.Status != want {
			t.Fatalf("k1 request %d: got %d, want %d", i, r.Status, want)
		}
	}
	if r := proxyGet(t, srv, "/API/items", key("k2")); r.Status != 200 {
		t.Fatalf("k2 (its own budget; prefix matched case-insensitively): got %d, want 200", r.Status)
	}
	for range 3 {
		if r := proxyGet(t, srv, "/elsewhere", key("k1")); r.Status != 200 {
			t.Fatalf("a path no rule matches: got %d, want 200", r.Status)
		}
		if r := proxyGet(t, srv, "/watch", nil); r.Status != 200 {
			t.Fatalf("a shadow rule: got %d, want 200", r.Status)
		}
	}
	// Deleting the rule lifts it at once.
	if _, err := st.Delete("api"); err != nil {
		t.Fatal(err)
	}
	if r := proxyGet(t, srv, "/api/items", key("k1")); r.Status != 200 {
		t.Fatalf("after deleting the rule: got %d, want 200", r.Status)
	}
}

func TestProxyUpstreamDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	srv := startProxy(t, dead, proxy.Options{PerClient: &table.Policy{Scale: time.Hour, Limit: 2}})
	for i, want := range []int{502, 502, 413} {
		r := proxyGet(t, srv, "/", map[string]string{"X-Test-Client": "x"})
		if r.Status != want {
			t.Fatalf("request %d: got %d %s, want %d", i, r.Status, r.Body, want)
		}
		if want == 502 {
			var e apitest.ErrorBody
			apitest.DecodeStrict(t, r.Body, &e)
			if !strings.Contains(e.Error, "upstream") {
				t.Fatalf("502 body %q does not name the upstream", r.Body)
			}
		}
	}
}

// TestProxyForwardedFor: X-Forwarded-For from an untrusted peer is
// replaced by the peer; a trusted peer's chain gets the peer appended.
func TestProxyForwardedFor(t *testing.T) {
	t.Parallel()
	for _, trusted := range []bool{false, true} {
		up := startUpstream(t)
		srv := startProxy(t, up.URL, proxy.Options{TrustedPeer: func(*http.Request) bool { return trusted }})
		proxyGet(t, srv, "/", map[string]string{"X-Forwarded-For": "10.9.9.9, 203.0.113.5", "Forwarded": "for=10.9.9.9", "X-Real-IP": "10.9.9.9"})
		up.mu.Lock()
		got := up.last.Header.Get("X-Forwarded-For")
		fwd, real := up.last.Header.Get("Forwarded"), up.last.Header.Get("X-Real-IP")
		up.mu.Unlock()
		if fwd != "" || trusted != (real != "") {
			t.Errorf("trusted=%v: upstream got Forwarded %q, X-Real-IP %q", trusted, fwd, real)
		}
		want := "127.0.0.1"
		if trusted {
			want = "10.9.9.9, 203.0.113.5, 127.0.0.1"
		}
		if got != want {
			t.Errorf("trusted=%v: upstream got X-Forwarded-For %q, want %q", trusted, got, want)
		}
	}
}

// TestProxyExactUnderLoad: 8 clients × 40 requests through the proxy with a
// global ceiling of 100: exactly 100 reach the upstream.
func TestProxyExactUnderLoad(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	srv := startProxy(t, up.URL, proxy.Options{Global: &table.Policy{Scale: time.Hour, Limit: 100}})
	var ok, denied atomic.Int64
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for range 40 {
				switch proxyGet(t, srv, "/", map[string]string{"X-Test-Client": fmt.Sprint("c", c)}).Status {
				case 200:
					ok.Add(1)
				case 413:
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != 100 || denied.Load() != 220 || up.hits.Load() != 100 {
		t.Fatalf("got %d admitted, %d denied, %d at the upstream; want 100, 220, 100", ok.Load(), denied.Load(), up.hits.Load())
	}
}

func TestProxyOptions(t *testing.T) {
	t.Parallel()
	sys := actorstest.StartSystem(t)
	u, _ := url.Parse("http://127.0.0.1:1")
	for name, opts := range map[string]proxy.Options{
		"no upstream":   {},
		"bad scheme":    {Upstream: &url.URL{Scheme: "ftp", Host: "x"}},
		"bad limit":     {Upstream: u, Global: &table.Policy{Scale: time.Hour, Limit: -1}},
		"bad scale":     {Upstream: u, PerClient: &table.Policy{Scale: time.Nanosecond, Limit: 1}},
		"deny status":   {Upstream: u, DenyStatus: 500},
		"bad algorithm": {Upstream: u, PerHost: &table.Policy{Scale: time.Hour, Limit: 1, Algorithm: table.Algorithm(9)}},
	} {
		if _, err := proxy.New(sys, opts); err == nil {
			t.Errorf("%s: NewProxy accepted %+v", name, opts)
		}
	}
}

// BenchmarkProxy compares the limiting proxy (per-client and global
// layers, with metrics) with httputil.ReverseProxy alone, to the same
// trivial upstream, same connections, alternating rounds in one run.
func BenchmarkProxy(b *testing.B) {
	const conns, rounds = 64, 4
	d := 2 * time.Second
	if testing.Short() {
		d = 200 * time.Millisecond
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	bare := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() },
		Transport: &http.Transport{MaxIdleConnsPerHost: 256},
	})
	defer bare.Close()
	sys := actorstest.StartSystem(b)
	m := metrics.New()
	h, err := proxy.New(sys, proxy.Options{
		Upstream:  u,
		PerClient: &table.Policy{Scale: time.Hour, Limit: 1 << 40},
		Global:    &table.Policy{Scale: time.Hour, Limit: 1 << 40},
		Metrics:   m,
	})
	if err != nil {
		b.Fatal(err)
	}
	limited := httptest.NewServer(h)
	defer limited.Close()
	rb, rl := apitest.CompareLoad(b, bare.URL, []string{"/"}, limited.URL, []string{"/"}, conns, rounds, d)
	b.ReportMetric(rb.Rate(), "reverseproxy-req/s")
	b.ReportMetric(rl.Rate(), "ratelimitd-req/s")
	b.ReportMetric(rl.Rate()/rb.Rate(), "ratelimitd/reverseproxy")
	b.ReportMetric(rb.Micros(0.99), "reverseproxy-p99-µs")
	b.ReportMetric(rl.Micros(0.99), "ratelimitd-p99-µs")
	b.ReportMetric(0, "ns/op")
}

// TestProxyBadInput: malformed and oversized requests and garbage in
// forwarding headers get a 4xx or go through keyed by the peer, never a
// panic or a 5xx.
func TestProxyBadInput(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	sys := actorstest.StartSystem(t)
	u, _ := url.Parse(up.URL)
	h, err := proxy.New(sys, proxy.Options{Upstream: u, PerClient: &table.Policy{Scale: time.Hour, Limit: 1000}, PerHost: &table.Policy{Scale: time.Hour, Limit: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.MaxHeaderBytes = 4 << 10
	srv.Start()
	defer srv.Close()
	raw := []string{
		"GET / HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 8<<10) + "\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: \r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: not-an-ip, , [::1\r\nForwarded: for=\"garbage\r\n\r\n",
		"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n",
	}
	for i, req := range raw {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if resp.StatusCode >= 500 {
			t.Fatalf("request %d: got %d, want a 4xx or 200", i, resp.StatusCode)
		}
	}
}

// TestProxyKeyMustBeUTF8: a ClientKey that is not valid UTF-8 is an unusable
// client address (400, upstream untouched); a rule's header key that is not
// valid UTF-8 falls back to the client's key.
func TestProxyKeyMustBeUTF8(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	st := apitest.NewStore(t, rules.Rule{Name: "api", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Key: "header:X-API-Key", Match: rules.Match{Prefix: "/api"}})
	srv := startProxy(t, up.URL, proxy.Options{Rules: st})
	r := proxyGet(t, srv, "/api/x", map[string]string{"X-Test-Client": "203.0.113.7\xff"})
	if want := `{"error":"the client address is unusable","field":""}`; r.Status != http.StatusBadRequest || string(r.Body) != want {
		t.Errorf("client key not UTF-8: got %d %s, want 400 %s", r.Status, r.Body, want)
	}
	steps := []struct {
		client, key string
		status      int
		id          string // the id of the denial's body
	}{
		{"203.0.113.7", "k\xff", 200, ""},
		{"203.0.113.7", "k\xfe", 413, "203.0.113.7"}, // the same client's budget, spent
		{"198.51.100.1", "k\xff", 200, ""},
	}
	for i, s := range steps {
		r := proxyGet(t, srv, "/api/x", map[string]string{"X-Test-Client": s.client, "X-API-Key": s.key})
		if r.Status != s.status {
			t.Fatalf("step %d: got %d %s, want %d", i, r.Status, r.Body, s.status)
		}
		if s.id != "" {
			var d apitest.RuleDecision
			apitest.DecodeStrict(t, r.Body, &d)
			if d.ID != s.id || d.Rule != "api" || d.Count != 1 || d.Limit != 1 {
				t.Errorf("step %d: got %+v, want count 1 of 1 for %q under api", i, d, s.id)
			}
		}
	}
	if got := up.hits.Load(); got != 2 {
		t.Errorf("the upstream saw %d requests, want 2", got)
	}
}
