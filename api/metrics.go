package api

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ratelimitd/ratelimitd/actors"
)

// StatsSource is what Metrics reads gauges from; *actors.System is one.
type StatsSource interface {
	Stats() actors.Stats
}

var (
	_ StatsSource          = (*actors.System)(nil)
	_ actors.SweepObserver = (*Metrics)(nil)
)

// Metrics holds the Prometheus series of a ratelimitd server in a registry
// of its own (never the global default registry), with the Go runtime and
// process collectors. Its methods are safe for concurrent use.
//
// The series are
//
//	ratelimitd_checks_total{result="allowed|denied|invalid|error"}
//	ratelimitd_check_duration_seconds          (histogram, whole request)
//	ratelimitd_buckets                         (gauge, after Observe)
//	ratelimitd_owner_restarts_total            (after Observe)
//	ratelimitd_sweeps_total
//	ratelimitd_swept_buckets_total
//	ratelimitd_sweep_duration_seconds          (histogram)
type Metrics struct {
	reg *prometheus.Registry

	allowed, denied, invalid, errored prometheus.Counter
	checkDuration                     prometheus.Histogram

	sweeps        prometheus.Counter
	swept         prometheus.Counter
	sweepDuration prometheus.Histogram

	src         atomic.Pointer[statsSourceBox]
	observeOnce sync.Once
}

type statsSourceBox struct{ StatsSource }

// durationBuckets spans 1µs to about 4s, a factor of 4 apart.
func durationBuckets() []float64 { return prometheus.ExponentialBuckets(1e-6, 4, 12) }

// NewMetrics returns Metrics registered in a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	checks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimitd_checks_total",
		Help: "Rate-limit checks answered, by result: allowed, denied, invalid (400) or error (503).",
	}, []string{"result"})
	// Children made once, so recording a check costs no label lookup.
	m.allowed = checks.WithLabelValues("allowed")
	m.denied = checks.WithLabelValues("denied")
	m.invalid = checks.WithLabelValues("invalid")
	m.errored = checks.WithLabelValues("error")
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
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		checks, m.checkDuration, m.sweeps, m.swept, m.sweepDuration,
	)
	return m
}

// Observe makes the ratelimitd_buckets gauge read src.Stats() at every
// scrape. The series appears at the first call; a later call replaces the
// source.
func (m *Metrics) Observe(src StatsSource) {
	m.src.Store(&statsSourceBox{src})
	m.observeOnce.Do(func() {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ratelimitd_buckets",
			Help: "Buckets held in the table, expired but not yet swept included.",
		}, func() float64 { return float64(m.stats().Buckets) }))
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ratelimitd_owner_restarts_total",
			Help: "Shard owners restarted by their supervisor after a crash.",
		}, func() float64 { return float64(m.stats().Restarts) }))
	})
}

// stats reads the observed source, or zero before Observe.
func (m *Metrics) stats() actors.Stats {
	if b := m.src.Load(); b != nil && b.StatsSource != nil {
		return b.Stats()
	}
	return actors.Stats{}
}

// SweepDone records a finished sweep. It makes *Metrics an
// actors.SweepObserver, to be set as actors.Config.SweepObserver.
func (m *Metrics) SweepDone(r actors.SweepReport) {
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

// Result of one check, for recording.
type result uint8

const (
	resultAllowed result = iota
	resultDenied
	resultInvalid
	resultError
)

// record counts one check and its duration since start. A nil m records
// nothing.
func (m *Metrics) record(r result, start time.Time) {
	if m == nil {
		return
	}
	switch r {
	case resultAllowed:
		m.allowed.Inc()
	case resultDenied:
		m.denied.Inc()
	case resultInvalid:
		m.invalid.Inc()
	default:
		m.errored.Inc()
	}
	m.checkDuration.Observe(time.Since(start).Seconds())
}
