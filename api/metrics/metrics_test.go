package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

func TestMetrics(t *testing.T) {
	t.Parallel()
	sys := actorstest.StartSystem(t)
	m := metrics.New()
	srv := apitest.StartServer(t, sys, httpapi.Options{Metrics: m})

	before := apitest.Scrape(t, srv.URL)
	if _, ok := before["ratelimitd_buckets"]; ok {
		t.Errorf("got ratelimitd_buckets before Observe, want it absent")
	}
	m.Observe(statsOf(sys))
	m.Observe(statsOf(sys)) // a second call replaces the source, no panic

	get := func(q string) { apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?"+q, "") }
	for range 3 {
		get("id=m&scale=" + apitest.LongScale + "&limit=3")
	}
	get("id=m&scale=" + apitest.LongScale + "&limit=3")                   // denied
	get("id=m&scale=0&limit=3")                                           // invalid
	get("id=m&scale=1000&limit=3&bogus=1")                                // invalid
	apitest.Do(t, http.DefaultClient, "POST", srv.URL+"/check_rate", "{") // invalid
	get("id=other&scale=" + apitest.LongScale + "&limit=3&hits=0")        // allowed peek, no bucket
	apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/healthz", "")      // not a check

	m.SweepDone(metrics.SweepReport{Deleted: 5, Duration: 3 * time.Millisecond})
	m.SweepDone(metrics.SweepReport{Deleted: 2, Duration: time.Millisecond})

	got := apitest.Scrape(t, srv.URL)
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
	other := apitest.StartServer(t, &apitest.FakeChecker{}, httpapi.Options{Metrics: metrics.New()})
	if got := apitest.Scrape(t, other.URL)[`ratelimitd_checks_total{result="allowed"}`]; got != "0" {
		t.Errorf("fresh Metrics: got allowed %q, want \"0\"", got)
	}
}

func TestMetricsCheckerError(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	srv := apitest.StartServer(t, &apitest.FakeChecker{Err: actors.ErrUnavailable}, httpapi.Options{Metrics: m})
	apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?id=a&scale=1000&limit=1", "")
	if got := apitest.Scrape(t, srv.URL)[`ratelimitd_checks_total{result="error"}`]; got != "1" {
		t.Errorf("got error count %q, want \"1\"", got)
	}
}

// TestMetricsResults counts the results new with rules, batches and
// refunds.
func TestMetricsResults(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	srv := apitest.StartServer(t, actorstest.StartSystem(t), httpapi.Options{Metrics: m, Rules: apitest.NewStore(t,
		rules.Rule{Name: "watch", Policy: table.Policy{Scale: time.Hour, Limit: 1}, Shadow: true})})
	before := apitest.Scrape(t, srv.URL)
	for _, k := range []string{`ratelimitd_checks_total{result="full"}`, `ratelimitd_checks_total{result="shadow_denied"}`, `ratelimitd_refunds_total`} {
		if before[k] != "0" {
			t.Errorf("before any check: got %s %q, want \"0\"", k, before[k])
		}
	}
	get := func(path string) { apitest.Do(t, http.DefaultClient, "GET", srv.URL+path, "") }
	post := func(body string) { apitest.Do(t, http.DefaultClient, "POST", srv.URL+"/check_rate", body) }
	get("/check_rate?id=a&rule=watch")                                                     // allowed
	get("/check_rate?id=a&rule=watch")                                                     // shadow_denied
	post(`[{"id":"a","rule":"watch"},{"id":"a","scale":"1h","limit":1}]`)                  // shadow_denied
	post(`[{"id":"a","scale":"1h","limit":1}]`)                                            // denied
	post(`[{"id":"b","scale":"1h","limit":1},{"id":"b","scale":"1h","limit":2,"hits":2}]`) // allowed
	post(`[{"id":"b","scale":"1h","limit":0}]`)                                            // invalid
	get("/refund?id=b&scale=1h&limit=1&hits=-1")                                           // refund
	get("/refund?id=b&scale=1h&limit=1&hits=1")                                            // invalid refund: not counted
	got := apitest.Scrape(t, srv.URL)
	for k, v := range map[string]string{
		`ratelimitd_checks_total{result="allowed"}`:       "2",
		`ratelimitd_checks_total{result="shadow_denied"}`: "2",
		`ratelimitd_checks_total{result="denied"}`:        "1",
		`ratelimitd_checks_total{result="invalid"}`:       "1",
		`ratelimitd_checks_total{result="full"}`:          "0",
		`ratelimitd_checks_total{result="error"}`:         "0",
		`ratelimitd_check_duration_seconds_count`:         "6",
		`ratelimitd_refunds_total`:                        "1",
	} {
		if got[k] != v {
			t.Errorf("got %s %q, want %q", k, got[k], v)
		}
	}
}

// TestMetricsRules: reload results are counted by result, and the rules
// gauges follow the Store's current set.
func TestMetricsRules(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	st, err := rules.NewStore([]rules.Rule{{Name: "login", Policy: table.Policy{Scale: time.Minute, Limit: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveRules(st)
	m.RulesReloaded(true, true)
	m.RulesReloaded(true, false)
	m.RulesReloaded(false, false)
	m.RulesReloaded(false, false)
	if _, err := st.Put(rules.Rule{Name: "api", Policy: table.Policy{Scale: time.Second, Limit: 10}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	got := apitest.Scrape(t, srv.URL)
	want := map[string]string{
		`ratelimitd_rules_reloads_total{result="changed"}`:   "1",
		`ratelimitd_rules_reloads_total{result="unchanged"}`: "1",
		`ratelimitd_rules_reloads_total{result="error"}`:     "2",
		`ratelimitd_rules_version`:                           "2",
		`ratelimitd_rules`:                                   "2",
	}
	for series, v := range want {
		if got[series] != v {
			t.Errorf("%s: got %q, want %q", series, got[series], v)
		}
	}
}

// statsOf reads sys's counters as Metrics does, as the daemon adapts them.
// TestMetricsSweepSlices: the sweep's slices and backlog are exported as
// Stats says them, read at every scrape.
func TestMetricsSweepSlices(t *testing.T) {
	t.Parallel()
	sys := actorstest.StartSystem(t)
	m := metrics.New()
	srv := apitest.StartServer(t, sys, httpapi.Options{Metrics: m})
	var slices atomic.Int64
	slices.Store(7)
	m.Observe(func() metrics.Stats { return metrics.Stats{SweepSlices: slices.Load(), SweepBacklog: 2} })
	got := apitest.Scrape(t, srv.URL)
	if got["ratelimitd_sweep_slices_total"] != "7" || got["ratelimitd_sweep_backlog_shards"] != "2" {
		t.Errorf("slices %q, backlog %q; want 7 and 2", got["ratelimitd_sweep_slices_total"], got["ratelimitd_sweep_backlog_shards"])
	}
	slices.Store(9)
	if got := apitest.Scrape(t, srv.URL); got["ratelimitd_sweep_slices_total"] != "9" {
		t.Errorf("after 2 more slices: %q, want 9", got["ratelimitd_sweep_slices_total"])
	}
}

func statsOf(sys *actors.System) func() metrics.Stats {
	return func() metrics.Stats {
		s := sys.Stats()
		return metrics.Stats{
			Buckets: s.Buckets, Restarts: s.Restarts, TornTails: s.TornTails,
			JournalErrors: s.JournalErrors, FailedClosed: s.FailedClosed, FailedOpen: s.FailedOpen,
			Snapshots: s.Snapshots, SnapshotErrors: s.SnapshotErrors, Evictions: s.Evictions,
		}
	}
}

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

func TestMetricsCluster(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	srv := apitest.StartServer(t, &apitest.FakeChecker{}, httpapi.Options{Metrics: m})
	if _, ok := apitest.Scrape(t, srv.URL)["ratelimitd_cluster_members"]; ok {
		t.Fatal("cluster series before ObserveCluster")
	}
	var served atomic.Int64
	served.Store(341)
	m.ObserveCluster(func() metrics.ClusterStats {
		return metrics.ClusterStats{
			ForwardedChecks: 700, ForwardedBatches: 7, ForwardStreams: 2,
			BatchSizeBounds: []int64{1, 10, 100}, BatchSizes: []int64{1, 2, 3, 1},
			ReceivedChecks: 50, ReceivedBatches: 5, Duplicates: 1, Fenced: 9, Unavailable: 4, AdmittedOpen: 2,
			HandoffsOut: 3, HandoffFailures: 1, VShardsOut: 80, VShardsIn: 12, BucketsOut: 4000, HandoffNanos: 1_500_000_000,
			Takeovers: 6, Claims: 1024, OwnershipChanges: 1100, EtcdErrors: 8, LeaseLapses: 2,
			Serving: served.Load(), Members: 3, LeaseValid: true, Epoch: 77,
		}
	})
	want := map[string]string{
		`ratelimitd_cluster_forwarded_checks_total`:                 "700",
		`ratelimitd_cluster_forwarded_batches_total`:                "7",
		`ratelimitd_cluster_forward_streams_total`:                  "2",
		`ratelimitd_cluster_checks_per_batch_bucket{le="1"}`:        "1",
		`ratelimitd_cluster_checks_per_batch_bucket{le="10"}`:       "3",
		`ratelimitd_cluster_checks_per_batch_bucket{le="100"}`:      "6",
		`ratelimitd_cluster_checks_per_batch_bucket{le="+Inf"}`:     "7",
		`ratelimitd_cluster_checks_per_batch_count`:                 "7",
		`ratelimitd_cluster_checks_per_batch_sum`:                   "700",
		`ratelimitd_cluster_received_checks_total`:                  "50",
		`ratelimitd_cluster_received_batches_total`:                 "5",
		`ratelimitd_cluster_duplicate_batches_total`:                "1",
		`ratelimitd_cluster_fenced_checks_total`:                    "9",
		`ratelimitd_cluster_unavailable_checks_total`:               "4",
		`ratelimitd_cluster_admitted_open_checks_total`:             "2",
		`ratelimitd_cluster_handoffs_total{result="committed"}`:     "3",
		`ratelimitd_cluster_handoffs_total{result="failed"}`:        "1",
		`ratelimitd_cluster_handoff_vshards_total{direction="out"}`: "80",
		`ratelimitd_cluster_handoff_vshards_total{direction="in"}`:  "12",
		`ratelimitd_cluster_handoff_buckets_total`:                  "4000",
		`ratelimitd_cluster_takeovers_total`:                        "6",
		`ratelimitd_cluster_claims_total`:                           "1024",
		`ratelimitd_cluster_ownership_changes_total`:                "1100",
		`ratelimitd_cluster_etcd_errors_total`:                      "8",
		`ratelimitd_cluster_lease_lapses_total`:                     "2",
		`ratelimitd_cluster_vshards_served`:                         "341",
		`ratelimitd_cluster_members`:                                "3",
		`ratelimitd_cluster_lease_valid`:                            "1",
		`ratelimitd_cluster_epoch`:                                  "77",
	}
	got := apitest.Scrape(t, srv.URL)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("got %s %q, want %q", k, got[k], v)
		}
	}
	served.Store(0)
	if got := apitest.Scrape(t, srv.URL)[`ratelimitd_cluster_vshards_served`]; got != "0" {
		t.Errorf("after a change: got ratelimitd_cluster_vshards_served %q, want \"0\"", got)
	}
}
