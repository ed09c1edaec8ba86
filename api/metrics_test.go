package api_test

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api"
)

// scrape returns the sample lines of GET /metrics, keyed by series.
func scrape(t *testing.T, url string) map[string]string {
	t.Helper()
	r := do(t, http.DefaultClient, "GET", url+"/metrics", "")
	if r.status != 200 {
		t.Fatalf("GET /metrics: got status %d, want 200", r.status)
	}
	samples := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		samples[line[:i]] = line[i+1:]
	}
	return samples
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	sys := startSystem(t)
	m := api.NewMetrics()
	srv := startServer(t, sys, api.Options{Metrics: m})

	before := scrape(t, srv.URL)
	if _, ok := before["ratelimitd_buckets"]; ok {
		t.Errorf("got ratelimitd_buckets before Observe, want it absent")
	}
	m.Observe(sys)
	m.Observe(sys) // a second call replaces the source, no panic

	get := func(q string) { do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?"+q, "") }
	for range 3 {
		get("id=m&scale=" + longScale + "&limit=3")
	}
	get("id=m&scale=" + longScale + "&limit=3")                   // denied
	get("id=m&scale=0&limit=3")                                   // invalid
	get("id=m&scale=1000&limit=3&bogus=1")                        // invalid
	do(t, http.DefaultClient, "POST", srv.URL+"/check_rate", "{") // invalid
	get("id=other&scale=" + longScale + "&limit=3&hits=0")        // allowed peek, no bucket
	do(t, http.DefaultClient, "GET", srv.URL+"/healthz", "")      // not a check

	var sweeper actors.SweepObserver = m
	sweeper.SweepDone(actors.SweepReport{Deleted: 5, Duration: 3 * time.Millisecond})
	sweeper.SweepDone(actors.SweepReport{Deleted: 2, Duration: time.Millisecond})

	got := scrape(t, srv.URL)
	want := map[string]string{
		`ratelimitd_checks_total{result="allowed"}`:           "4",
		`ratelimitd_checks_total{result="denied"}`:            "1",
		`ratelimitd_checks_total{result="invalid"}`:           "3",
		`ratelimitd_checks_total{result="error"}`:             "0",
		`ratelimitd_check_duration_seconds_count`:             "8",
		`ratelimitd_buckets`:                                  "1",
		`ratelimitd_owner_restarts_total`:                     "0",
		`ratelimitd_sweeps_total`:                             "2",
		`ratelimitd_swept_buckets_total`:                      "7",
		`ratelimitd_sweep_duration_seconds_count`:             "2",
		`ratelimitd_sweep_duration_seconds_sum`:               "0.004",
		`ratelimitd_sweep_duration_seconds_bucket{le="+Inf"}`: "2",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("got %s %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"go_goroutines", "process_start_time_seconds"} {
		if _, ok := got[k]; !ok {
			t.Errorf("got no %s series, want the Go and process collectors", k)
		}
	}
	// Two Metrics never share a registry.
	other := startServer(t, &fakeChecker{}, api.Options{Metrics: api.NewMetrics()})
	if got := scrape(t, other.URL)[`ratelimitd_checks_total{result="allowed"}`]; got != "0" {
		t.Errorf("fresh Metrics: got allowed %q, want \"0\"", got)
	}
}

func TestMetricsCheckerError(t *testing.T) {
	t.Parallel()
	m := api.NewMetrics()
	srv := startServer(t, &fakeChecker{err: actors.ErrUnavailable}, api.Options{Metrics: m})
	do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?id=a&scale=1000&limit=1", "")
	if got := scrape(t, srv.URL)[`ratelimitd_checks_total{result="error"}`]; got != "1" {
		t.Errorf("got error count %q, want \"1\"", got)
	}
}
