//go:build unix

package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/metrics"
)

// TestConnLimiterUnderTLS: over TLS (HTTP/2 by ALPN), the connection cap
// holds and, at the cap, an idle keep-alive connection is closed to make
// room for the next one, as over plain TCP.
func TestConnLimiterUnderTLS(t *testing.T) {
	t.Parallel()
	ca := actorstest.NewCA(t, "ca")
	certPath, keyPath := writePair(t, t.TempDir(), issueLocal(t, ca, 1), time.Now())
	discard := slog.New(slog.DiscardHandler)
	lt, err := loadListenerTLS(tlsConfig{certFile: certPath, keyFile: keyPath}, time.Now, discard)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s tls=%t", r.Proto, r.TLS != nil)
	}), discard)
	prom := metrics.New()
	capped := limitConns(ln, srv, 2, "test", discard, prom, lt.config(alpnHTTP))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(capped) }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served
	})

	get := func(c *http.Client, who string) {
		t.Helper()
		resp, err := c.Get("https://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "HTTP/2.0 tls=true" {
			t.Fatalf("%s: got %q, want HTTP/2.0 tls=true", who, b)
		}
	}
	client := func() *http.Client {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, ForceAttemptHTTP2: true}}
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	a, b, c := client(), client(), client()
	get(a, "a")
	get(b, "b")
	// a and b hold the two slots, idle: c gets one of them.
	get(c, "c")

	// Then, before its next Accept, the listener closes the other idle
	// one ahead of need (see connLimiter): two closed, one open.
	want := map[string]float64{
		`ratelimitd_connections{listener="test"}`:                   1,
		`ratelimitd_connections_cap_reached_total{listener="test"}`: 2,
		`ratelimitd_connections_idle_closed_total{listener="test"}`: 2,
	}
	var got map[string]float64
	for deadline := time.Now().Add(pollTimeout); ; time.Sleep(pollInterval) {
		rec := httptest.NewRecorder()
		prom.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		got = samples(t, rec.Body.Bytes())
		if equalOn(got, want) {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: got %v, want %v", name, got[name], w)
		}
	}
}

// equalOn reports whether got has want's values for want's keys.
func equalOn(got, want map[string]float64) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
