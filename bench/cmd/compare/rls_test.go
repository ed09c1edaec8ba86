package main

import "testing"

// TestRLSShownEnv: RESULTS.md shows the reference's environment without
// the run's free ports and directory.
func TestRLSShownEnv(t *testing.T) {
	got := rlsShownEnv([]string{"USE_STATSD=false", "REDIS_URL=127.0.0.1:41719", "RUNTIME_ROOT=/tmp/x/rt", "GRPC_PORT=35667", "GRPC_HOST=127.0.0.1"}, "/tmp/x/rt")
	if want := "USE_STATSD=false REDIS_URL=127.0.0.1:PORT RUNTIME_ROOT=$TMP/rls-ref-runtime GRPC_PORT=PORT GRPC_HOST=127.0.0.1"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := rlsConfigFile(); got != "domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 4294967295}\n" {
		t.Errorf("config %q", got)
	}
}
