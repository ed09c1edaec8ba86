package load

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCompare(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	get := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.RequestURI()]++
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	defer get.Close()
	post := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || !strings.HasPrefix(string(b), "body") || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer post.Close()
	cpuCalls := 0
	targets := []*Target{
		{Name: "get", Base: get.URL, Method: http.MethodGet, Paths: []string{"/a", "/b"}, ChecksPerRequest: 1,
			CPU: func() (float64, error) { cpuCalls++; return float64(cpuCalls), nil }},
		{Name: "post", Base: post.URL, Method: http.MethodPost, Paths: []string{"/p"}, Bodies: [][]byte{[]byte("body1"), []byte("body2")}, ChecksPerRequest: 10},
	}
	res := Compare(context.Background(), Plan{Conns: 4, Rounds: 2, PerRound: 50 * time.Millisecond, Warmup: 10 * time.Millisecond}, targets)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("target %d: %v", i, r.Err)
		}
		if r.Requests == 0 || int64(len(r.Lat)) != r.Requests {
			t.Errorf("target %d: %d requests, %d latencies", i, r.Requests, len(r.Lat))
		}
		if r.Elapsed < 100*time.Millisecond || r.Elapsed > 2*time.Second {
			t.Errorf("target %d: elapsed %v, want about 2 × 50ms", i, r.Elapsed)
		}
		for j := 1; j < len(r.Lat); j++ {
			if r.Lat[j] < r.Lat[j-1] {
				t.Fatalf("target %d: latencies not sorted", i)
			}
		}
	}
	// CPU is read before and after each of 3 runs (warm-up included), each
	// read one more than the last: 1 per measured round.
	if got := res[0].ServerCPU; got != 2 {
		t.Errorf("server CPU = %v, want 2 (1 per round)", got)
	}
	if seen["/a"] == 0 || seen["/b"] == 0 {
		t.Errorf("paths requested: %v, want both", seen)
	}
}

func TestRunStopsOnFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	var r Result
	start := time.Now()
	Run(context.Background(), NewTransport(2), &Target{Name: "failing", Base: srv.URL, Method: http.MethodGet, Paths: []string{"/"}}, 2, 5*time.Second, &r, true)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "503") {
		t.Errorf("Err = %v, want a 503", r.Err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("a failing round ran for %v", time.Since(start))
	}
	// A target with OK sees the body.
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"error":"x"}`) }))
	defer ok.Close()
	r = Result{}
	Run(context.Background(), NewTransport(1), &Target{Name: "body", Base: ok.URL, Method: http.MethodGet, Paths: []string{"/"},
		OK: func(status int, body []byte) bool { return !strings.Contains(string(body), "error") }}, 1, time.Second, &r, false)
	if r.Err == nil || !strings.Contains(r.Err.Error(), `{"error":"x"}`) {
		t.Errorf("Err = %v, want the body", r.Err)
	}
}

func TestQuantile(t *testing.T) {
	lat := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for q, want := range map[float64]time.Duration{0: 1, 0.5: 5, 0.99: 9, 1: 10} {
		if got := Quantile(lat, q); got != want {
			t.Errorf("Quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("Quantile(nil) != 0")
	}
}
