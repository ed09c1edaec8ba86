package metrics

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/rules"
)

// Stats is what Metrics reads of the rate limiter at every scrape (see
// Observe): its counters since it started, and its live buckets.
type Stats struct {
	Buckets        int64 // live buckets, expired but not yet swept included
	Restarts       int64 // shard owners restarted after a crash
	TornTails      int64 // torn journal tails cut at recovery
	JournalErrors  int64 // batches the journal failed to take or flush
	FailedClosed   int64 // of those, batches refused
	FailedOpen     int64 // of those, batches answered from memory
	Snapshots      int64 // journal snapshots written
	SnapshotErrors int64 // journal snapshots that failed
	Evictions      int64 // live buckets evicted from a full table
	SweepSlices    int64 // sweep slices run, each one hold of a shard
	SweepBacklog   int64 // shards whose last slice stopped on its bounds, expired buckets left
}

// SweepReport is one finished sweep of expired buckets, for SweepDone.
type SweepReport struct {
	Deleted  int           // buckets deleted
	Duration time.Duration // from its start to its end
}

var _ api.Recorder = (*Metrics)(nil)

// Metrics holds the Prometheus series of a ratelimitd server in a registry
// of its own (never the global default registry), with the Go runtime and
// process collectors. Its methods are safe for concurrent use.
//
// The series are
//
//	ratelimitd_checks_total{result="allowed|denied|shadow_denied|full|invalid|error"}
//	ratelimitd_check_duration_seconds          (histogram, whole request)
//	ratelimitd_refunds_total                   (refunds answered 200)
//	ratelimitd_buckets                         (gauge, after Observe)
//	ratelimitd_owner_restarts_total            (after Observe)
//	ratelimitd_sweeps_total
//	ratelimitd_swept_buckets_total
//	ratelimitd_sweep_duration_seconds          (histogram)
//	ratelimitd_sweep_slices_total              (after Observe; one hold of a shard each)
//	ratelimitd_sweep_backlog_shards            (gauge, after Observe; shards with expired buckets left)
//	ratelimitd_journal_torn_tails_total        (after Observe; with a data directory)
//	ratelimitd_journal_errors_total            (after Observe; batches the journal failed)
//	ratelimitd_journal_failed_batches_total{policy="closed|open"} (after Observe)
//	ratelimitd_journal_snapshots_total{result="ok|error"}         (after Observe)
//	ratelimitd_evicted_buckets_total           (after Observe; live buckets evicted from a full table)
//	ratelimitd_rules_reloads_total{result="changed|unchanged|error"}
//	ratelimitd_rules_version, ratelimitd_rules (gauges, after ObserveRules)
//	ratelimitd_file_reloads_total{file,result}  (after FileReloads)
//	ratelimitd_admin_token_failures_total{path,result}  (after TokenFailures)
//	ratelimitd_tls_certificate_expiry_timestamp_seconds{file} (after ObserveCertificate)
//	ratelimitd_connections*{listener}          (after ObserveConns)
//	ratelimitd_redis_*                         (after ObserveRESP: see RESP)
//	ratelimitd_cluster_*                       (after ObserveCluster)
//	ratelimitd_rls_*                           (after NewRLS: Envoy's RLS, see RLS)
type Metrics struct {
	reg *prometheus.Registry

	checks        [len(resultNames)]prometheus.Counter // by api.Result
	checkDuration prometheus.Histogram
	refunds       prometheus.Counter

	sweeps        prometheus.Counter
	swept         prometheus.Counter
	sweepDuration prometheus.Histogram

	reloadChanged, reloadUnchanged, reloadError prometheus.Counter

	src         atomic.Pointer[func() Stats]
	observeOnce sync.Once
	rulesSrc    atomic.Pointer[rules.Store]
	rulesOnce   sync.Once

	clusterState
}

// durationBuckets spans 1µs to about 4s, a factor of 4 apart.
func durationBuckets() []float64 { return prometheus.ExponentialBuckets(1e-6, 4, 12) }

// newCounter returns the counter name, described by help.
func newCounter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// newHistogram returns the duration histogram name, described by help.
func newHistogram(name, help string) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: durationBuckets()})
}

// New returns Metrics registered in a new registry.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	checks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimitd_checks_total",
		Help: "Rate-limit check requests answered, by result: allowed, denied, shadow_denied (denied by a shadow rule, let through), full (503: no room for a new bucket), invalid (400) or error (503). A batch counts once.",
	}, []string{"result"})
	// Children made once, so recording a check costs no label lookup.
	for res, name := range resultNames {
		m.checks[res] = checks.WithLabelValues(name)
	}
	m.refunds = newCounter("ratelimitd_refunds_total", "Refunds answered 200 (hits given back).")
	m.checkDuration = newHistogram("ratelimitd_check_duration_seconds", "Time to answer a check_rate request, from parsing to the written response.")
	m.sweeps = newCounter("ratelimitd_sweeps_total", "Sweeps of expired buckets completed.")
	m.swept = newCounter("ratelimitd_swept_buckets_total", "Expired buckets deleted by sweeps.")
	m.sweepDuration = newHistogram("ratelimitd_sweep_duration_seconds", "Duration of one sweep.")
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimitd_rules_reloads_total",
		Help: "Reloads of the rules file, by result: changed (a new rule set is in force), unchanged, or error (the last good rules stay).",
	}, []string{"result"})
	m.reloadChanged = reloads.WithLabelValues("changed")
	m.reloadUnchanged = reloads.WithLabelValues("unchanged")
	m.reloadError = reloads.WithLabelValues("error")
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		checks, m.checkDuration, m.refunds, m.sweeps, m.swept, m.sweepDuration, reloads,
	)
	return m
}

// RulesReloaded records one reload of the rules file: ok is false when
// the file was refused, changed when a new rule set came into force.
func (m *Metrics) RulesReloaded(ok, changed bool) {
	switch {
	case !ok:
		m.reloadError.Inc()
	case changed:
		m.reloadChanged.Inc()
	default:
		m.reloadUnchanged.Inc()
	}
}

// ObserveRules makes the ratelimitd_rules_version and ratelimitd_rules
// gauges read st's current rule set at every scrape. The series appear at
// the first call; a later call replaces the Store.
func (m *Metrics) ObserveRules(st *rules.Store) {
	m.rulesSrc.Store(st)
	m.rulesOnce.Do(func() {
		// read returns f of the current rule set, or 0 without one.
		read := func(f func(*rules.Set) int64) func() int64 {
			return func() int64 {
				if st := m.rulesSrc.Load(); st != nil {
					return f(st.Current())
				}
				return 0
			}
		}
		m.reg.MustRegister(
			gaugeFunc("ratelimitd_rules_version", "Version of the rule set in force; it grows by one with every change.",
				nil, read(func(s *rules.Set) int64 { return int64(s.Version()) })),
			gaugeFunc("ratelimitd_rules", "Named rules in force.",
				nil, read(func(s *rules.Set) int64 { return int64(s.Len()) })),
		)
	})
}

// Observe makes the gauges and counters of the rate limiter
// (ratelimitd_buckets and the others) read stats() at every scrape. The
// series appear at the first call; a later call replaces the source.
func (m *Metrics) Observe(stats func() Stats) {
	m.src.Store(&stats)
	m.observeOnce.Do(func() {
		read := func(f func(Stats) int64) func() int64 { return func() int64 { return f(m.stats()) } }
		failedHelp := "Batches of checks met by a failing journal, by the policy applied: closed (refused with 503) or open (answered from memory)."
		snapHelp := "Journal snapshots (compactions) written, by result."
		m.reg.MustRegister(
			gaugeFunc("ratelimitd_buckets", "Buckets held in the table, expired but not yet swept included.",
				nil, read(func(s Stats) int64 { return s.Buckets })),
			counterFunc("ratelimitd_owner_restarts_total", "Shard owners restarted by their supervisor after a crash.",
				nil, read(func(s Stats) int64 { return s.Restarts })),
			counterFunc("ratelimitd_journal_torn_tails_total", "Torn journal tails cut (and kept aside as *.broken) at recovery.",
				nil, read(func(s Stats) int64 { return s.TornTails })),
			counterFunc("ratelimitd_journal_errors_total", "Batches the journal failed to take or flush (full disk, I/O error).",
				nil, read(func(s Stats) int64 { return s.JournalErrors })),
			counterFunc("ratelimitd_journal_failed_batches_total", failedHelp,
				prometheus.Labels{"policy": "closed"}, read(func(s Stats) int64 { return s.FailedClosed })),
			counterFunc("ratelimitd_journal_failed_batches_total", failedHelp,
				prometheus.Labels{"policy": "open"}, read(func(s Stats) int64 { return s.FailedOpen })),
			counterFunc("ratelimitd_evicted_buckets_total", "Live buckets evicted from a full table to make room (--on-full evict-oldest).",
				nil, read(func(s Stats) int64 { return s.Evictions })),
			counterFunc("ratelimitd_journal_snapshots_total", snapHelp,
				prometheus.Labels{"result": "ok"}, read(func(s Stats) int64 { return s.Snapshots })),
			counterFunc("ratelimitd_journal_snapshots_total", snapHelp,
				prometheus.Labels{"result": "error"}, read(func(s Stats) int64 { return s.SnapshotErrors })),
			counterFunc("ratelimitd_sweep_slices_total", "Sweep slices run, each one hold of a shard bounded by count and time.",
				nil, read(func(s Stats) int64 { return s.SweepSlices })),
			gaugeFunc("ratelimitd_sweep_backlog_shards", "Shards whose last sweep slice stopped on its bounds: expired buckets are left to sweep there.",
				nil, read(func(s Stats) int64 { return s.SweepBacklog })),
		)
	})
}

// gaugeFunc returns the gauge name (help, labels) that reads f at every
// scrape.
func gaugeFunc(name, help string, labels prometheus.Labels, f func() int64) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels},
		func() float64 { return float64(f()) })
}

// counterFunc returns the counter name (help, labels) that reads f at
// every scrape.
func counterFunc(name, help string, labels prometheus.Labels, f func() int64) prometheus.CounterFunc {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
		func() float64 { return float64(f()) })
}

// stats reads the observed source, or zero before Observe.
func (m *Metrics) stats() Stats {
	if f := m.src.Load(); f != nil && *f != nil {
		return (*f)()
	}
	return Stats{}
}

// SweepDone records a finished sweep.
func (m *Metrics) SweepDone(r SweepReport) {
	m.sweeps.Inc()
	m.swept.Add(float64(r.Deleted))
	m.sweepDuration.Observe(r.Duration.Seconds())
}

// Handler returns the handler that serves the registry of m in the
// Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry returns the registry of m, for registering more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Checked counts one check request answered with res, and its duration
// since start. It makes *Metrics an api.Recorder.
func (m *Metrics) Checked(res api.Result, start time.Time) {
	if int(res) >= len(m.checks) {
		res = api.ResultError
	}
	m.checks[res].Inc()
	m.checkDuration.Observe(time.Since(start).Seconds())
}

// resultNames are the result labels of ratelimitd_checks_total.
var resultNames = [...]string{
	api.ResultAllowed:      "allowed",
	api.ResultDenied:       "denied",
	api.ResultInvalid:      "invalid",
	api.ResultError:        "error",
	api.ResultFull:         "full",
	api.ResultShadowDenied: "shadow_denied",
}

// Refunded counts one refund answered.
func (m *Metrics) Refunded() { m.refunds.Inc() }
