package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/client"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
)

// outage is a way for the service to be unavailable: the URL of a server
// that fails so.
type outage struct {
	name string
	url  func(t testing.TB) string
}

// answering returns an outage of a server that answers every request with
// status, header Retry-After retry (if not empty) and body.
func answering(name string, status int, retry, body string) outage {
	return outage{name, func(t testing.TB) string {
		return apitest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if retry != "" {
				w.Header().Set("Retry-After", retry)
			}
			writeJSON(w, status, body)
		})).URL
	}}
}

// outages returns the kinds of outage the tests go through.
func outages() []outage {
	return []outage{
		{"connection refused", deadURL},
		answering("503 full table", 503, "2", `{"error":"the rate limiter is full (max buckets); retry","field":""}`),
		answering("503 shutting down", 503, "1", `{"error":"the rate limiter is shutting down; retry","field":""}`),
		answering("500", 500, "", `oops`),
		answering("404 not ratelimitd", 404, "", `404 page not found`),
		answering("302 redirect", 302, "", ``),
		answering("200 not JSON", 200, "", `<html>hello</html>`),
		answering("200 without allowed", 200, "", `{"count":1,"checks":[]}`),
		answering("413 from a proxy", 413, "", `request entity too large`),
	}
}

// TestUnavailable: every kind of outage is ErrUnavailable under
// FailClosed and an allowed, degraded decision under FailOpen; a refund
// is ErrUnavailable under both.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	l := client.Limit{Rule: "login"}
	for _, o := range outages() {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			u := o.url(t)
			ctx := context.Background()

			closed := newClient(t, client.Options{BaseURL: u})
			if d, err := closed.Check(ctx, "a", l, 1); !errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrInvalid) || d != (client.Decision{}) {
				t.Errorf("FailClosed Check: got %+v, %v; want ErrUnavailable", d, err)
			}
			if ds, ok, err := closed.CheckAll(ctx, []client.Check{{ID: "a", Limit: l, Hits: 1}}); !errors.Is(err, client.ErrUnavailable) || ok || ds != nil {
				t.Errorf("FailClosed CheckAll: got %+v, %v, %v; want ErrUnavailable", ds, ok, err)
			}

			open := newClient(t, client.Options{BaseURL: u, Failure: client.FailOpen})
			want := client.Decision{Allowed: true, Rule: "login", Degraded: true}
			if d, err := open.Check(ctx, "a", l, 1); err != nil || d != want {
				t.Errorf("FailOpen Check: got %+v, %v; want %+v", d, err, want)
			}
			ds, ok, err := open.CheckAll(ctx, []client.Check{{ID: "a", Limit: l, Hits: 1}, {ID: "b", Hits: 1}})
			if wantAll := []client.Decision{want, {Allowed: true, Degraded: true}}; err != nil || !ok || len(ds) != 2 || ds[0] != wantAll[0] || ds[1] != wantAll[1] {
				t.Errorf("FailOpen CheckAll: got %+v, %v, %v; want %+v, true", ds, ok, err, wantAll)
			}

			for _, c := range []*client.Client{closed, open} {
				if _, err := c.Refund(ctx, "a", l, 1); !errors.Is(err, client.ErrUnavailable) {
					t.Errorf("Refund: got %v, want ErrUnavailable", err)
				}
			}
		})
	}
}

// TestOutageLogged: each outage is logged once when it starts and once
// when it ends, however many calls fail meanwhile.
func TestOutageLogged(t *testing.T) {
	t.Parallel()
	h, err := httpapi.NewHandler(actorstest.StartSystem(t), httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	srv := apitest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, 503, `{"error":"the rate limiter is temporarily unavailable; retry","field":""}`)
			return
		}
		h.ServeHTTP(w, r)
	}))
	logs := &logRecorder{}
	c := newClient(t, client.Options{BaseURL: srv.URL, Failure: client.FailOpen, Logger: slogOf(logs)})
	l := client.Limit{Policy: client.Policy{Scale: longScale, Limit: 100}}
	check := func(wantDegraded bool) {
		t.Helper()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				d, err := c.Check(context.Background(), "a", l, 1)
				if err != nil || !d.Allowed || d.Degraded != wantDegraded {
					t.Errorf("got %+v, %v; want allowed, degraded %v", d, err, wantDegraded)
				}
			})
		}
		wg.Wait()
	}
	check(false)
	down.Store(true)
	check(true)
	check(true)
	down.Store(false)
	check(false)
	down.Store(true)
	check(true)
	want := "WARN ratelimitd unavailable; failing open\n" +
		"INFO ratelimitd available again\n" +
		"WARN ratelimitd unavailable; failing open"
	if got := logs.lines(); got != want {
		t.Errorf("got logs\n%s\nwant\n%s", got, want)
	}
}

// TestTimeout: a service that never answers is unavailable after
// Options.Timeout; the caller's own deadline is not an outage.
func TestTimeout(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	srv := apitest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() { close(stop) }) // before srv.Close, which waits for handlers
	l := client.Limit{Policy: client.Policy{Scale: time.Second, Limit: 1}}
	const timeout = 100 * time.Millisecond

	t.Run("Options.Timeout", func(t *testing.T) {
		t.Parallel()
		for _, policy := range []client.FailurePolicy{client.FailClosed, client.FailOpen} {
			c := newClient(t, client.Options{BaseURL: srv.URL, Timeout: timeout, Failure: policy})
			begin := time.Now()
			d, err := c.Check(context.Background(), "a", l, 1)
			elapsed := time.Since(begin)
			if policy == client.FailClosed && !errors.Is(err, client.ErrUnavailable) ||
				policy == client.FailOpen && (err != nil || !d.Degraded) {
				t.Errorf("%v: got %+v, %v; want the policy's answer to an outage", policy, d, err)
			}
			if elapsed < timeout || elapsed > 50*timeout {
				t.Errorf("%v: returned after %v, want about %v", policy, elapsed, timeout)
			}
		}
	})
	t.Run("caller deadline", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, client.Options{BaseURL: srv.URL, Timeout: time.Minute, Failure: client.FailOpen})
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		d, err := c.Check(ctx, "a", l, 1)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, client.ErrUnavailable) || d.Allowed {
			t.Errorf("got %+v, %v; want context.DeadlineExceeded, not an outage", d, err)
		}
	})
}

// TestClose: Close closes the idle connection, is idempotent, and every
// later call returns ErrClosed.
func TestClose(t *testing.T) {
	t.Parallel()
	h, err := httpapi.NewHandler(actorstest.StartSystem(t), httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	connClosed := make(chan struct{}, 16)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			connClosed <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := client.New(client.Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := client.Limit{Policy: client.Policy{Scale: longScale, Limit: 10}}
	if _, err := c.Check(ctx, "a", l, 1); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := c.Close(); err != nil {
			t.Errorf("Close: got %v, want nil", err)
		}
	}
	select {
	case <-connClosed:
	case <-time.After(10 * time.Second):
		t.Error("the server did not see the connection closed")
	}
	calls := map[string]func() error{
		"Check":    func() error { _, err := c.Check(ctx, "a", l, 1); return err },
		"CheckAll": func() error { _, _, err := c.CheckAll(ctx, []client.Check{{ID: "a", Limit: l}}); return err },
		"Refund":   func() error { _, err := c.Refund(ctx, "a", l, 1); return err },
		"Wait":     func() error { return c.Wait(ctx, "a", l) },
	}
	for name, call := range calls {
		if err := call(); err != client.ErrClosed {
			t.Errorf("%s after Close: got %v, want ErrClosed", name, err)
		}
	}
}

// TestCloseConcurrent closes the client while calls are in flight: each
// gets a decision or ErrClosed, and nothing races.
func TestCloseConcurrent(t *testing.T) {
	t.Parallel()
	srv := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{})
	c := newClient(t, client.Options{BaseURL: srv.URL})
	l := client.Limit{Policy: client.Policy{Scale: longScale, Limit: 1 << 40}}
	var wg sync.WaitGroup
	var checks atomic.Int64
	for range 8 {
		wg.Go(func() {
			for {
				d, err := c.Check(context.Background(), "a", l, 1)
				if err == client.ErrClosed {
					return
				}
				if err != nil || !d.Allowed {
					t.Errorf("got %+v, %v; want allowed or ErrClosed", d, err)
					return
				}
				checks.Add(1)
			}
		})
	}
	for checks.Load() < 50 {
		runtime.Gosched()
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
}

// TestServerStopped stops the service under clients that hold a
// keep-alive connection to it: each then gets its policy's answer, and a
// Wait under FailClosed retries until its context ends.
func TestServerStopped(t *testing.T) {
	t.Parallel()
	srv := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{})
	ctx := context.Background()
	l := client.Limit{Policy: client.Policy{Scale: longScale, Limit: 100}}
	clk, waitCtx := newFakeClock(t, 10*time.Second)
	closed := newClient(t, client.Options{BaseURL: srv.URL, Clock: clk})
	open := newClient(t, client.Options{BaseURL: srv.URL, Failure: client.FailOpen})
	for _, c := range []*client.Client{closed, open} {
		if d, err := c.Check(ctx, "a", l, 1); err != nil || !d.Allowed || d.Degraded {
			t.Fatalf("before the stop: got %+v, %v; want allowed", d, err)
		}
	}
	srv.Close()

	if d, err := closed.Check(ctx, "a", l, 1); !errors.Is(err, client.ErrUnavailable) || d.Allowed {
		t.Errorf("FailClosed: got %+v, %v; want ErrUnavailable", d, err)
	}
	if d, err := open.Check(ctx, "a", l, 1); err != nil || !d.Allowed || !d.Degraded {
		t.Errorf("FailOpen: got %+v, %v; want allowed and degraded", d, err)
	}
	if err := closed.Wait(waitCtx, "a", l); err != context.Canceled {
		t.Errorf("FailClosed Wait: got %v, want context.Canceled", err)
	}
	if n := len(clk.slept()); n < 10 {
		t.Errorf("FailClosed Wait: got %d retries in 10s, want at least 10", n)
	}
}
