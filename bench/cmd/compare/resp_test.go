package main

import (
	"strings"
	"testing"
	"time"
)

// TestParseBenchCSV reads redis-benchmark 7.0's --csv output, and refuses
// what it cannot read.
func TestParseBenchCSV(t *testing.T) {
	out := `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"CL.THROTTLE user:__rand_int__ 999999 1000 3600 1","100502.52","7.418","0.024","4.231","26.367","50.495","52.991"
`
	res, err := parseBenchCSV([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if res.rps != 100502.52 || res.p50 != 4231*time.Microsecond || res.p99 != 50495*time.Microsecond {
		t.Errorf("got %+v, want 100502.52 rps, p50 4.231 ms, p99 50.495 ms", res)
	}
	for name, bad := range map[string]string{
		"empty":     "",
		"no result": `"test","rps","p50_latency_ms","p99_latency_ms"` + "\n",
		"no p99":    `"test","rps","p50_latency_ms"` + "\n" + `"X","1","2"` + "\n",
		"zero rps":  `"test","rps","p50_latency_ms","p99_latency_ms"` + "\n" + `"X","0","2","3"` + "\n",
		"not a rps": `"test","rps","p50_latency_ms","p99_latency_ms"` + "\n" + `"X","fast","2","3"` + "\n",
		"two":       `"test","rps","p50_latency_ms","p99_latency_ms"` + "\n" + `"X","1","2","3"` + "\n" + `"Y","1","2","3"` + "\n",
	} {
		if _, err := parseBenchCSV([]byte(bad)); err == nil || !strings.Contains(err.Error(), "CSV") {
			t.Errorf("%s: got %v, want an error about its CSV", name, err)
		}
	}
}

// TestRunAcc: the rounds of a run add up (requests, time at each round's
// rate, CPU) and its latencies are the rounds' medians.
func TestRunAcc(t *testing.T) {
	var a runAcc
	for _, r := range []benchResult{
		{requests: 1000, rps: 1000, p50: 3 * time.Millisecond, p99: 9 * time.Millisecond, serverCPU: 0.5, clientCPU: 0.25},
		{requests: 4000, rps: 2000, p50: time.Millisecond, p99: 7 * time.Millisecond, serverCPU: 1, clientCPU: 0.5},
		{requests: 3000, rps: 1000, p50: 2 * time.Millisecond, p99: 8 * time.Millisecond, serverCPU: 1, clientCPU: 0.5},
	} {
		a.add(r)
	}
	got := a.result(16)
	if got.Pipeline != 16 || got.Requests != 8000 || got.Elapsed != 6*time.Second || got.P50 != 2*time.Millisecond || got.P99 != 8*time.Millisecond ||
		got.ServerCPU != 2.5 || got.ClientCPU != 1.25 || got.Error != "" || !got.OK() || got.ReqPerSec() != 8000.0/6 {
		t.Errorf("got %+v", got)
	}
	if r := (*runAcc)(nil).result(1); r.OK() || r.Error == "" {
		t.Errorf("no accumulator: got %+v, want a run that is not OK", r)
	}
}

// TestCalibrated: a warm-up's rate sizes a run to its duration, within
// bounds.
func TestCalibrated(t *testing.T) {
	for _, c := range []struct {
		rps  float64
		d    time.Duration
		want int
	}{{250_000, 2 * time.Second, 500_000}, {1000, 2 * time.Second, 10_000}, {1e9, 2 * time.Second, 20_000_000}} {
		if got := calibrated(c.rps, c.d); got != c.want {
			t.Errorf("calibrated(%v, %v) = %d, want %d", c.rps, c.d, got, c.want)
		}
	}
	if got, want := versionOf("redis-benchmark 7.0.15\n"), "7.0.15"; got != want {
		t.Errorf("versionOf: got %q, want %q", got, want)
	}
}
