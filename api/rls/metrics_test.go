package rls

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMetricKeysBounded: detailed_metric puts runtime values in keys, but
// past MaxMetricKeys distinct keys the rest are reported as OtherMetricKey.
func TestMetricKeysBounded(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	svc, _, _ := newService(t, mustParse(t, "domain: m\ndescriptors:\n  - {key: user, detailed_metric: true, rate_limit: {unit: minute, requests_per_unit: 5}}\n"),
		Options{Observer: rec, MaxMetricKeys: 3})
	for i := range 5 {
		for range 2 {
			if _, err := svc.ShouldRateLimit(context.Background(), rq("m", 0, ds(fmt.Sprintf("user=u%d", i)))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, want := range []uint64{2, 2, 2, 0, 0} {
		if got := rec.totals("m", fmt.Sprintf("user_u%d", i)).Hits; got != want {
			t.Errorf("user_u%d: %d hits reported, want %d", i, got, want)
		}
	}
	if got := rec.totals("m", OtherMetricKey); got.Hits != 4 || got.WithinLimit != 4 {
		t.Errorf("%s: %+v, want 4 hits within the limit", OtherMetricKey, got)
	}
}

// TestCallEvents: each call is reported once with its domain (empty for
// an unknown one), transport and outcome; the global shadow mode is flagged.
func TestCallEvents(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	svc, _, _ := newService(t, loadFiles(t, "ported/service.yaml"), Options{Observer: rec, ShadowMode: true})
	client, _ := serveGRPC(t, svc)
	ctx := context.Background()
	_, _ = client.ShouldRateLimit(ctx, rq("service", 0, ds("foo=bar")))
	_, _ = client.ShouldRateLimit(ctx, rq("service", 11, ds("foo=bar")))
	_, _ = client.ShouldRateLimit(ctx, rq("nope", 0, ds("foo=bar")))
	_, _ = client.ShouldRateLimit(ctx, rq("", 0, ds("foo=bar")))
	srv := httptest.NewServer(svc.JSONHandler())
	t.Cleanup(srv.Close)
	resp, err := http.Post(srv.URL+JSONPath, "application/json", strings.NewReader(`{"domain":"service","descriptors":[{"entries":[{"key":"foo","value":"bar"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := []CallEvent{
		{Domain: "service", Transport: TransportGRPC, Outcome: OutcomeOK},
		{Domain: "service", Transport: TransportGRPC, Outcome: OutcomeOK, GlobalShadow: true},
		{Domain: "", Transport: TransportGRPC, Outcome: OutcomeOK},
		{Domain: "", Transport: TransportGRPC, Outcome: OutcomeInvalid},
		{Domain: "service", Transport: TransportJSON, Outcome: OutcomeOK},
	}
	if fmt.Sprint(rec.calls) != fmt.Sprint(want) {
		t.Errorf("calls\n got %+v\nwant %+v", rec.calls, want)
	}
	// 1 hit within, then 11 over a count of 1 (2 past the limit, 2 near it), then 1 within.
	if got := rec.totals("service", "foo_bar"); got != (LimitEvent{Domain: "service", Key: "foo_bar", Hits: 13, WithinLimit: 2, NearLimit: 2, OverLimit: 2}) {
		t.Errorf("foo_bar totals %+v", got)
	}
}
