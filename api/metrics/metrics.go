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
//	ratelimitd_journal_torn_tails_total        (after Observe; with a data directory)
//	ratelimitd_journal_errors_total            (after Observe; batches the journal failed)
//	ratelimitd_journal_failed_batches_total{policy="closed|open"} (after Observe)
//	ratelimitd_journal_snapshots_total{result="ok|error"}         (after Observe)
//	ratelimitd_evicted_buckets_total           (after Observe; live buckets evicted from a full table)
//	ratelimitd_rules_reloads_total{result="changed|unchanged|error"}
//	ratelimitd_rules_version, ratelimitd_rules (gauges, after ObserveRules)
//	ratelimitd_connections*{listener}          (after ObserveConns)
type Metrics struct {
	reg *prometheus.Registry

	allowed, denied, invalid, errored prometheus.Counter
	full, shadowDenied                prometheus.Counter
	checkDuration                     prometheus.Histogram
	refunds                           prometheus.Counter

	sweeps        prometheus.Counter
	swept         prometheus.Counter
	sweepDuration prometheus.Histogram

	reloadChanged, reloadUnchanged, reloadError prometheus.Counter

	src         atomic.Pointer[func() Stats]
	observeOnce sync.Once
	rulesSrc    atomic.Pointer[rules.Store]
	rulesOnce   sync.Once
}

// durationBuckets spans 1µs to about 4s, a factor of 4 apart.
func durationBuckets() []float64 { return prometheus.ExponentialBuckets(1e-6, 4, 12) }

// New returns Metrics registered in a new registry.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	checks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimitd_checks_total",
		Help: "Rate-limit check requests answered, by result: allowed, denied, shadow_denied (denied by a shadow rule, let through), full (503: no room for a new bucket), invalid (400) or error (503). A batch counts once.",
	}, []string{"result"})
	// Children made once, so recording a check costs no label lookup.
	m.allowed = checks.WithLabelValues("allowed")
	m.denied = checks.WithLabelValues("denied")
	m.invalid = checks.WithLabelValues("invalid")
	m.errored = checks.WithLabelValues("error")
	m.full = checks.WithLabelValues("full")
	m.shadowDenied = checks.WithLabelValues("shadow_denied")
	m.refunds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ratelimitd_refunds_total",
		Help: "Refunds answered 200 (hits given back).",
	})
	m.checkDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ratelimitd_check_duration_seconds",
		Help:    "Time to answer a check_rate request, from parsing to the written response.",
		Buckets: durationBuckets(),
	})
	m.sweeps = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ratelimitd_sweeps_total",
		Help: "Sweeps of expired buckets completed.",
	})
	m.swept = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ratelimitd_swept_buckets_total",
		Help: "Expired buckets deleted by sweeps.",
	})
	m.sweepDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ratelimitd_sweep_duration_seconds",
		Help:    "Duration of one sweep.",
		Buckets: durationBuckets(),
	})
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
		current := func() *rules.Set {
			if st := m.rulesSrc.Load(); st != nil {
				return st.Current()
			}
			return nil
		}
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ratelimitd_rules_version",
			Help: "Version of the rule set in force; it grows by one with every change.",
		}, func() float64 {
			if s := current(); s != nil {
				return float64(s.Version())
			}
			return 0
		}))
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ratelimitd_rules",
			Help: "Named rules in force.",
		}, func() float64 {
			if s := current(); s != nil {
				return float64(s.Len())
			}
			return 0
		}))
	})
}

// Observe makes the gauges and counters of the rate limiter
// (ratelimitd_buckets and the others) read stats() at every scrape. The
// series appear at the first call; a later call replaces the source.
func (m *Metrics) Observe(stats func() Stats) {
	m.src.Store(&stats)
	m.observeOnce.Do(func() {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ratelimitd_buckets",
			Help: "Buckets held in the table, expired but not yet swept included.",
		}, func() float64 { return float64(m.stats().Buckets) }))
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ratelimitd_owner_restarts_total",
			Help: "Shard owners restarted by their supervisor after a crash.",
		}, func() float64 { return float64(m.stats().Restarts) }))
		counter := func(name, help string, labels prometheus.Labels, f func(Stats) int64) {
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: name, Help: help, ConstLabels: labels,
			}, func() float64 { return float64(f(m.stats())) }))
		}
		counter("ratelimitd_journal_torn_tails_total", "Torn journal tails cut (and kept aside as *.broken) at recovery.",
			nil, func(s Stats) int64 { return s.TornTails })
		counter("ratelimitd_journal_errors_total", "Batches the journal failed to take or flush (full disk, I/O error).",
			nil, func(s Stats) int64 { return s.JournalErrors })
		failedHelp := "Batches of checks met by a failing journal, by the policy applied: closed (refused with 503) or open (answered from memory)."
		counter("ratelimitd_journal_failed_batches_total", failedHelp,
			prometheus.Labels{"policy": "closed"}, func(s Stats) int64 { return s.FailedClosed })
		counter("ratelimitd_journal_failed_batches_total", failedHelp,
			prometheus.Labels{"policy": "open"}, func(s Stats) int64 { return s.FailedOpen })
		counter("ratelimitd_evicted_buckets_total", "Live buckets evicted from a full table to make room (--on-full evict-oldest).",
			nil, func(s Stats) int64 { return s.Evictions })
		snapHelp := "Journal snapshots (compactions) written, by result."
		counter("ratelimitd_journal_snapshots_total", snapHelp,
			prometheus.Labels{"result": "ok"}, func(s Stats) int64 { return s.Snapshots })
		counter("ratelimitd_journal_snapshots_total", snapHelp,
			prometheus.Labels{"result": "error"}, func(s Stats) int64 { return s.SnapshotErrors })
	})
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
	switch res {
	case api.ResultAllowed:
		m.allowed.Inc()
	case api.ResultDenied:
		m.denied.Inc()
	case api.ResultInvalid:
		m.invalid.Inc()
	case api.ResultFull:
		m.full.Inc()
	case api.ResultShadowDenied:
		m.shadowDenied.Inc()
	default:
		m.errored.Inc()
	}
	m.checkDuration.Observe(time.Since(start).Seconds())
}

// Refunded counts one refund answered.
func (m *Metrics) Refunded() { m.refunds.Inc() }
