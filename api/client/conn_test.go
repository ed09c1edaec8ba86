package client_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/client"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
)

// countingServer serves the api handler of a fresh system and counts the
// connections it accepts.
func countingServer(t testing.TB) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	h, err := httpapi.NewHandler(actorstest.StartSystem(t), httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// TestKeepAlive: sequential calls of every kind, allowed and denied,
// reuse their connection.
func TestKeepAlive(t *testing.T) {
	t.Parallel()
	srv, conns := countingServer(t)
	c := newClient(t, client.Options{BaseURL: srv.URL})
	ctx := context.Background()
	l := client.Limit{Policy: client.Policy{Scale: longScale, Limit: 100}}
	allowed := 0
	for i := range 300 {
		d, err := c.Check(ctx, "a", l, 1)
		if err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
		if d.Allowed {
			allowed++
		}
		if i%50 == 0 {
			if _, err := c.Refund(ctx, "b", l, 1); err != nil {
				t.Fatalf("refund %d: %v", i, err)
			}
			if _, _, err := c.CheckAll(ctx, []client.Check{{ID: "c", Limit: l, Hits: 1}}); err != nil {
				t.Fatalf("batch %d: %v", i, err)
			}
		}
	}
	if allowed != 100 {
		t.Errorf("got %d allowed, want 100", allowed)
	}
	// One connection, or very few: net/http returns a connection to its
	// idle pool from another goroutine, so under load the next call can
	// start before it is back and dial once more.
	if n := conns.Load(); n < 1 || n > 3 {
		t.Errorf("got %d connections for 318 calls, want 1 (at most 3)", n)
	}
}

// TestConcurrentExact: 16 goroutines × 100 checks of one key with a limit
// of 500 get exactly 500 admissions, over reused connections.
func TestConcurrentExact(t *testing.T) {
	t.Parallel()
	const (
		workers = 16
		each    = 100
		limit   = 500
	)
	srv, conns := countingServer(t)
	c := newClient(t, client.Options{BaseURL: srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := client.Limit{Policy: client.Policy{Scale: longScale, Limit: limit}}
	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				d, err := c.Check(ctx, "hot", l, 1)
				switch {
				case err != nil:
					t.Errorf("Check: %v", err)
					return
				case d.Allowed:
					allowed.Add(1)
				default:
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if a, d := allowed.Load(), denied.Load(); a != limit || d != workers*each-limit {
		t.Errorf("got %d allowed and %d denied, want %d and %d", a, d, limit, workers*each-limit)
	}
	// Connections are reused. (A few more than workers may be dialed: a
	// request that finds none idle dials, and may then take one that
	// became idle meanwhile, the dialed one joining the pool.)
	if n := conns.Load(); n > workers*2 {
		t.Errorf("got %d connections for %d requests from %d goroutines, want at most %d", n, workers*each, workers, 2*workers)
	}
}
