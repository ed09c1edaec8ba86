package client_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/client"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
)

// TestWaitPacing paces 2,000 sequential Waits with a leaky bucket of 500
// per second, the server and the client sharing one manual clock: they
// span 4 s of clock time, and no second holds more than 500.
func TestWaitPacing(t *testing.T) {
	t.Parallel()
	const (
		n    = 2000
		rate = 500
	)
	sys, clk := actorstest.StartClocked(t)
	srv := apitest.StartServer(t, sys, httpapi.Options{})
	c := newClient(t, client.Options{BaseURL: srv.URL, Clock: manualClock{clk}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := client.Limit{Policy: client.Policy{Scale: time.Second, Limit: rate, Algorithm: "leaky_bucket"}}

	at := make([]time.Time, 0, n)
	for i := range n {
		if err := c.Wait(ctx, "worker", l); err != nil {
			t.Fatalf("Wait %d: %v", i, err)
		}
		at = append(at, clk.Now())
	}

	// The span, counting the last admission's own slot of 1s/rate.
	span := at[n-1].Sub(at[0]) + time.Second/rate
	if want := 4 * time.Second; span < want*99/100 || span > want*101/100 {
		t.Errorf("got %d admissions over %v, want %v ± 1%%", n, span, want)
	}
	// No window of one second, wherever it starts, holds more than rate+1.
	most := 0
	for i, j := 0, 0; i < n; i++ {
		for j < n && at[j].Sub(at[i]) < time.Second {
			j++
		}
		most = max(most, j-i)
	}
	if most > rate+1 {
		t.Errorf("got %d admissions within one second, want at most %d", most, rate+1)
	}
	// Nor does any second of the clock.
	perSecond := map[int64]int{}
	for _, a := range at {
		perSecond[a.Unix()]++
	}
	for s, k := range perSecond {
		if k > rate+1 {
			t.Errorf("second %d: got %d admissions, want at most %d", s-actorstest.ClockStart().Unix(), k, rate+1)
		}
	}
}

// TestWaitRealTime paces 100 Waits at 1,000 per second on the system
// clock, sequentially and from 4 workers: none is lost, each worker's
// hits are admitted in order, and the pace holds (at least 99 ms for 100).
func TestWaitRealTime(t *testing.T) {
	t.Parallel()
	srv := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{})
	c := newClient(t, client.Options{BaseURL: srv.URL})
	tests := []struct {
		name    string
		workers int
	}{
		{"sequential", 1},
		{"4 workers", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const n = 100
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			l := client.Limit{Policy: client.Policy{Scale: time.Second, Limit: 1000, Algorithm: "leaky_bucket"}}
			id := "rt-" + tt.name
			done := make([][]int, tt.workers)
			errs := make([]error, tt.workers)
			var wg sync.WaitGroup
			begin := time.Now()
			for w := range tt.workers {
				wg.Go(func() {
					for i := w; i < n; i += tt.workers {
						if err := c.Wait(ctx, id, l); err != nil {
							errs[w] = err
							return
						}
						done[w] = append(done[w], i)
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(begin)
			total := 0
			for w := range tt.workers {
				if errs[w] != nil {
					t.Fatalf("worker %d: %v", w, errs[w])
				}
				if !slices.IsSorted(done[w]) {
					t.Errorf("worker %d: got order %v, want ascending", w, done[w])
				}
				total += len(done[w])
			}
			if total != n {
				t.Errorf("got %d admitted, want %d", total, n)
			}
			if least := (n - 1) * time.Millisecond; elapsed < least {
				t.Errorf("got %d admitted in %v, want at least %v at 1000/s", n, elapsed, least)
			}
		})
	}
}

// TestWaitFailClosed waits on a service that is down: Wait retries with a
// capped exponential backoff until its context ends, then returns its
// error; the outage is logged once.
func TestWaitFailClosed(t *testing.T) {
	t.Parallel()
	clk, ctx := newFakeClock(t, 30*time.Second)
	logs := &logRecorder{}
	c := newClient(t, client.Options{BaseURL: deadURL(t), Clock: clk, Logger: slogOf(logs)})
	err := c.Wait(ctx, "a", client.Limit{Policy: client.Policy{Scale: time.Second, Limit: 1}})
	if !errors.Is(err, context.Canceled) || err != ctx.Err() {
		t.Fatalf("got %v, want ctx.Err() (context canceled)", err)
	}
	sleeps := clk.slept()
	if len(sleeps) < 30 {
		t.Fatalf("got %d retries in 30s, want at least 30", len(sleeps))
	}
	for i, s := range sleeps {
		d := min(10*time.Millisecond<<min(i, 10), time.Second)
		if s < d/2 || s > d {
			t.Errorf("retry %d: got a backoff of %v, want it in [%v, %v]", i, s, d/2, d)
		}
	}
	if got, want := logs.lines(), "WARN ratelimitd unavailable; failing closed"; got != want {
		t.Errorf("got logs %q, want %q", got, want)
	}
}

// TestWaitFailOpen: a service that is down lets Wait through at once.
func TestWaitFailOpen(t *testing.T) {
	t.Parallel()
	clk, ctx := newFakeClock(t, 0)
	c := newClient(t, client.Options{BaseURL: deadURL(t), Clock: clk, Failure: client.FailOpen})
	if err := c.Wait(ctx, "a", client.Limit{Policy: client.Policy{Scale: time.Second, Limit: 1}}); err != nil {
		t.Fatalf("got %v, want nil", err)
	}
	if s := clk.slept(); len(s) != 0 {
		t.Errorf("got sleeps %v, want none", s)
	}
}

// TestWaitRetryAfter answers twice 503 (or 413 for a denial), then admits:
// Wait sleeps what the service said, or backs off when it said nothing.
func TestWaitRetryAfter(t *testing.T) {
	t.Parallel()
	const errJSON = `{"error":"the rate limiter is full (max buckets); retry","field":""}`
	deny0 := `{"allowed":false,"id":"x","count":1,"limit":1,"remaining":0,"reset_ms":0,"retry_after_ms":0}`
	deny7 := `{"allowed":false,"id":"x","count":1,"limit":1,"remaining":0,"reset_ms":7,"retry_after_ms":7}`
	tests := []struct {
		name       string
		status     int
		retryAfter func(now time.Time) string // the header, given the client's clock
		body       string
		want       func(i int, got time.Duration) bool // sleep i
	}{
		{"503 seconds", 503, fixed("3"), errJSON, func(_ int, got time.Duration) bool { return got == 3*time.Second }},
		{"503 http date", 503, func(now time.Time) string { return now.Add(5 * time.Second).Format(http.TimeFormat) }, errJSON,
			func(_ int, got time.Duration) bool { return got == 5*time.Second }},
		{"503 without Retry-After", 503, fixed(""), errJSON, func(i int, got time.Duration) bool {
			d := 10 * time.Millisecond << i
			return got >= d/2 && got <= d
		}},
		{"502 from a proxy", 502, fixed(""), "bad gateway", func(i int, got time.Duration) bool {
			d := 10 * time.Millisecond << i
			return got >= d/2 && got <= d
		}},
		{"denial with a retry", 413, fixed("1"), deny7, func(_ int, got time.Duration) bool { return got == 7*time.Millisecond }},
		{"denial without a retry", 413, fixed("1"), deny0, func(_ int, got time.Duration) bool { return got == time.Millisecond }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			clk, ctx := newFakeClock(t, 0)
			srv := apitest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) > 2 {
					writeJSON(w, 200, decisionJSON)
					return
				}
				if v := tt.retryAfter(clk.Now()); v != "" {
					w.Header().Set("Retry-After", v)
				}
				writeJSON(w, tt.status, tt.body)
			}))
			c := newClient(t, client.Options{BaseURL: srv.URL, Clock: clk})
			if err := c.Wait(ctx, "a", client.Limit{Policy: client.Policy{Scale: time.Second, Limit: 1}}); err != nil {
				t.Fatalf("Wait: %v", err)
			}
			sleeps := clk.slept()
			if len(sleeps) != 2 || calls.Load() != 3 {
				t.Fatalf("got sleeps %v over %d calls, want 2 over 3", sleeps, calls.Load())
			}
			for i, s := range sleeps {
				if !tt.want(i, s) {
					t.Errorf("sleep %d: got %v", i, s)
				}
			}
		})
	}
}

// fixed returns a Retry-After of v, whatever the time.
func fixed(v string) func(time.Time) string { return func(time.Time) string { return v } }

// TestWaitContext: a context that has ended stops Wait before any request;
// one that ends while a request is in flight gets that request's answer,
// so a hit the service admitted is never lost.
func TestWaitContext(t *testing.T) {
	t.Parallel()
	deny := `{"allowed":false,"id":"x","count":1,"limit":1,"remaining":0,"reset_ms":5,"retry_after_ms":5}`
	tests := []struct {
		name    string
		status  int
		answer  string
		wantErr error
	}{
		{"admitted in flight", 200, decisionJSON, nil},
		{"denied in flight", 413, deny, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			arrived, release := make(chan struct{}), make(chan struct{})
			srv := apitest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(arrived)
				<-release
				writeJSON(w, tt.status, tt.answer)
			}))
			clk, _ := newFakeClock(t, 0)
			c := newClient(t, client.Options{BaseURL: srv.URL, Clock: clk})
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- c.Wait(ctx, "a", client.Limit{Policy: client.Policy{Scale: time.Second, Limit: 1}}) }()
			<-arrived
			cancel()
			close(release)
			if err := <-errc; err != tt.wantErr {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
			if s := clk.slept(); len(s) != 0 {
				t.Errorf("got sleeps %v, want none", s)
			}
		})
	}

	t.Run("ended before", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := apitest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			writeJSON(w, 200, decisionJSON)
		}))
		c := newClient(t, client.Options{BaseURL: srv.URL})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := c.Wait(ctx, "a", client.Limit{Policy: client.Policy{Scale: time.Second, Limit: 1}}); err != context.Canceled {
			t.Errorf("got %v, want context.Canceled", err)
		}
		if n := calls.Load(); n != 0 {
			t.Errorf("got %d requests, want none", n)
		}
	})
}
