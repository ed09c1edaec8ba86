package metrics_test

import (
	"sync/atomic"
	"testing"

	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/metrics"
)

// TestMetricsConns: ObserveConns exports a listener's connection stats,
// labelled by listener, read at every scrape.
func TestMetricsConns(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	var open atomic.Int64
	open.Store(3)
	m.ObserveConns("public", func() metrics.ConnStats {
		return metrics.ConnStats{Open: open.Load(), Max: 8, CapReached: 5, IdleClosed: 2}
	})
	m.ObserveConns("admin", func() metrics.ConnStats { return metrics.ConnStats{Open: 1, Max: 4} })
	srv := apitest.StartServer(t, &apitest.FakeChecker{}, httpapi.Options{Metrics: m})

	want := map[string]string{
		`ratelimitd_connections{listener="public"}`:                   "3",
		`ratelimitd_connections_max{listener="public"}`:               "8",
		`ratelimitd_connections_cap_reached_total{listener="public"}`: "5",
		`ratelimitd_connections_idle_closed_total{listener="public"}`: "2",
		`ratelimitd_connections{listener="admin"}`:                    "1",
		`ratelimitd_connections_max{listener="admin"}`:                "4",
		`ratelimitd_connections_cap_reached_total{listener="admin"}`:  "0",
		`ratelimitd_connections_idle_closed_total{listener="admin"}`:  "0",
	}
	got := apitest.Scrape(t, srv.URL)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("got %s %q, want %q", k, got[k], v)
		}
	}
	open.Store(7)
	if got := apitest.Scrape(t, srv.URL)[`ratelimitd_connections{listener="public"}`]; got != "7" {
		t.Errorf("after a change: got ratelimitd_connections %q, want \"7\"", got)
	}
}
