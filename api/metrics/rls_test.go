package metrics_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/api/rls"
)

// TestRLSSeries: the RLS recorder's series, fed events directly: per
// call, per descriptor key, the global shadow, the reloads.
func TestRLSSeries(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	r := metrics.NewRLS(m)
	r.ObserveCall(rls.CallEvent{Domain: "edge", Transport: rls.TransportGRPC, Outcome: rls.OutcomeOK, Latency: 2 * time.Millisecond})
	r.ObserveCall(rls.CallEvent{Domain: "edge", Transport: rls.TransportGRPC, Outcome: rls.OutcomeOK, Latency: time.Millisecond, GlobalShadow: true})
	r.ObserveCall(rls.CallEvent{Domain: "", Transport: rls.TransportJSON, Outcome: rls.OutcomeInvalid})
	r.ObserveCall(rls.CallEvent{Domain: "edge", Transport: rls.TransportJSON, Outcome: rls.OutcomeOverLimit, Latency: time.Millisecond})
	r.ObserveLimit(rls.LimitEvent{Domain: "edge", Key: "remote_address", Hits: 3, WithinLimit: 3, NearLimit: 1})
	r.ObserveLimit(rls.LimitEvent{Domain: "edge", Key: "remote_address", Hits: 2, OverLimit: 2, ShadowMode: 2})
	r.ObserveLimit(rls.LimitEvent{Domain: "edge", Key: rls.OtherMetricKey, Hits: 1, WithinLimit: 1})
	r.ConfigReloaded(true, true)
	r.ConfigReloaded(true, false)
	r.ConfigReloaded(true, false)
	r.ConfigReloaded(false, false)
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	got := apitest.Scrape(t, srv.URL)
	want := map[string]string{
		`ratelimitd_rls_requests_total{domain="edge",outcome="ok",transport="grpc"}`:         "2",
		`ratelimitd_rls_requests_total{domain="",outcome="invalid",transport="json"}`:        "1",
		`ratelimitd_rls_requests_total{domain="edge",outcome="over_limit",transport="json"}`: "1",
		`ratelimitd_rls_request_duration_seconds_count{transport="grpc"}`:                    "2",
		`ratelimitd_rls_request_duration_seconds_sum{transport="grpc"}`:                      "0.003",
		`ratelimitd_rls_request_duration_seconds_count{transport="json"}`:                    "1",
		`ratelimitd_rls_global_shadow_total{domain="edge"}`:                                  "1",
		`ratelimitd_rls_hits_total{domain="edge",key="remote_address"}`:                      "5",
		`ratelimitd_rls_within_limit_total{domain="edge",key="remote_address"}`:              "3",
		`ratelimitd_rls_near_limit_total{domain="edge",key="remote_address"}`:                "1",
		`ratelimitd_rls_over_limit_total{domain="edge",key="remote_address"}`:                "2",
		`ratelimitd_rls_shadow_mode_total{domain="edge",key="remote_address"}`:               "2",
		`ratelimitd_rls_hits_total{domain="edge",key="_other"}`:                              "1",
		`ratelimitd_rls_config_reloads_total{result="changed"}`:                              "1",
		`ratelimitd_rls_config_reloads_total{result="unchanged"}`:                            "2",
		`ratelimitd_rls_config_reloads_total{result="error"}`:                                "1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("got %s %q, want %q", k, got[k], v)
		}
	}
}

// TestRLSServiceMetrics: a real Service counting on a System reports its
// calls through the recorder, with runtime values in the key only where
// the config asks (detailed_metric), and the label set bounded.
func TestRLSServiceMetrics(t *testing.T) {
	t.Parallel()
	cfg, err := rls.Parse(rls.File{Name: "edge.yaml", Data: []byte(`domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: year, requests_per_unit: 2}
  - key: user
    detailed_metric: true
    rate_limit: {unit: year, requests_per_unit: 10}
`)})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	svc, err := rls.NewService(actorstest.StartSystem(t), rls.NewStore(cfg), rls.Options{Observer: metrics.NewRLS(m), MaxMetricKeys: 3})
	if err != nil {
		t.Fatal(err)
	}
	call := func(domain, key, value string) {
		t.Helper()
		_, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*rlcommon.RateLimitDescriptor{{
			Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: key, Value: value}},
		}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, ip := range []string{"10.0.0.1", "10.0.0.1", "10.0.0.1", "10.0.0.2"} {
		call("edge", "remote_address", ip)
	}
	for _, u := range []string{"alice", "bob", "carol", "dave"} {
		call("edge", "user", u)
	}
	call("unknown", "remote_address", "10.0.0.1")
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	got := apitest.Scrape(t, srv.URL)
	want := map[string]string{
		`ratelimitd_rls_requests_total{domain="edge",outcome="ok",transport="grpc"}`:         "7",
		`ratelimitd_rls_requests_total{domain="edge",outcome="over_limit",transport="grpc"}`: "1",
		`ratelimitd_rls_requests_total{domain="",outcome="ok",transport="grpc"}`:             "1",
		`ratelimitd_rls_request_duration_seconds_count{transport="grpc"}`:                    "9",
		`ratelimitd_rls_hits_total{domain="edge",key="remote_address"}`:                      "4",
		`ratelimitd_rls_over_limit_total{domain="edge",key="remote_address"}`:                "1",
		`ratelimitd_rls_within_limit_total{domain="edge",key="remote_address"}`:              "3",
		`ratelimitd_rls_hits_total{domain="edge",key="user_alice"}`:                          "1",
		`ratelimitd_rls_hits_total{domain="edge",key="user_bob"}`:                            "1",
		`ratelimitd_rls_hits_total{domain="edge",key="_other"}`:                              "2",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("got %s %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if strings.Contains(k, "10.0.0.") || strings.Contains(k, "user_carol") || strings.Contains(k, "user_dave") {
			t.Errorf("series %s: a runtime value past the bound, or where the config did not ask for one", k)
		}
	}
}
