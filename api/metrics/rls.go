package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratelimitd/ratelimitd/api/rls"
)

// RLS records Envoy's Rate Limit Service (package api/rls) in a Metrics'
// registry: it is the rls.Observer of the daemon's rls.Service. The series
// are
//
//	ratelimitd_rls_requests_total{domain,transport,outcome}
//	ratelimitd_rls_request_duration_seconds{transport}     (histogram)
//	ratelimitd_rls_global_shadow_total{domain}
//	ratelimitd_rls_hits_total{domain,key}
//	ratelimitd_rls_within_limit_total{domain,key}
//	ratelimitd_rls_near_limit_total{domain,key}
//	ratelimitd_rls_over_limit_total{domain,key}
//	ratelimitd_rls_shadow_mode_total{domain,key}
//	ratelimitd_rls_config_reloads_total{result="changed|unchanged|error"}
//
// domain is a configured domain, or "" for a request of another (so that
// clients cannot grow the label set); transport is grpc or json; outcome
// is ok, over_limit, invalid or error (rls.Outcome*). key is the
// descriptor's metrics key (rls.LimitEvent.Key), which the Service bounds
// (Options.MaxMetricKeys). The hit counters count hits, as the reference's
// per-descriptor stats do. Its methods are safe for concurrent use and
// cost no label lookup once a label set has been seen.
type RLS struct {
	requests                         *prometheus.CounterVec
	duration                         [2]prometheus.Observer // by transport: grpc, json
	globalShadow                     *prometheus.CounterVec
	hits, within, near, over, shadow *prometheus.CounterVec

	reloadChanged, reloadUnchanged, reloadError prometheus.Counter

	calls  sync.Map // of callKey → prometheus.Counter
	limits sync.Map // of [2]string{domain, key} → *limitSeries
}

var _ rls.Observer = (*RLS)(nil)

// callKey is the label set of one ratelimitd_rls_requests_total series.
type callKey struct{ domain, transport, outcome string }

// limitSeries are the hit counters of one (domain, key).
type limitSeries struct{ hits, within, near, over, shadow prometheus.Counter }

// NewRLS registers the RLS series in m's registry and returns their
// recorder. Call it once per Metrics: a second call panics, as
// registering a series twice does.
func NewRLS(m *Metrics) *RLS {
	counters := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	r := &RLS{
		requests: counters("ratelimitd_rls_requests_total",
			"ShouldRateLimit calls (gRPC, or POST /json) answered, by domain (\"\" for one not configured), transport and outcome: ok, over_limit, invalid (InvalidArgument, 400) or error (Unavailable, 503).",
			"domain", "transport", "outcome"),
		globalShadow: counters("ratelimitd_rls_global_shadow_total",
			"OVER_LIMIT answers turned OK by --rls-shadow, by domain.", "domain"),
		hits: counters("ratelimitd_rls_hits_total",
			"Hits of limited descriptors, by domain and descriptor key.", "domain", "key"),
		within: counters("ratelimitd_rls_within_limit_total",
			"Hits of limited descriptors admitted within the limit.", "domain", "key"),
		near: counters("ratelimitd_rls_near_limit_total",
			"Hits past 80% of a limit and within it.", "domain", "key"),
		over: counters("ratelimitd_rls_over_limit_total",
			"Hits past a limit.", "domain", "key"),
		shadow: counters("ratelimitd_rls_shadow_mode_total",
			"Hits past a shadow_mode limit, let through.", "domain", "key"),
	}
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ratelimitd_rls_request_duration_seconds",
		Help:    "Time to answer a ShouldRateLimit call, from the decoded request to the answer, by transport (requests that did not decode are not timed).",
		Buckets: durationBuckets(),
	}, []string{"transport"})
	r.duration[0] = duration.WithLabelValues(rls.TransportGRPC)
	r.duration[1] = duration.WithLabelValues(rls.TransportJSON)
	reloads := counters("ratelimitd_rls_config_reloads_total",
		"Reloads of the --rls-config files, by result: changed (a new config is in force), unchanged, or error (the last good config stays).",
		"result")
	r.reloadChanged = reloads.WithLabelValues("changed")
	r.reloadUnchanged = reloads.WithLabelValues("unchanged")
	r.reloadError = reloads.WithLabelValues("error")
	m.reg.MustRegister(r.requests, duration, r.globalShadow, r.hits, r.within, r.near, r.over, r.shadow, reloads)
	return r
}

// ObserveCall implements rls.Observer.
func (r *RLS) ObserveCall(e rls.CallEvent) {
	k := callKey{e.Domain, e.Transport, e.Outcome}
	c, ok := r.calls.Load(k)
	if !ok {
		c, _ = r.calls.LoadOrStore(k, r.requests.WithLabelValues(e.Domain, e.Transport, e.Outcome))
	}
	c.(prometheus.Counter).Inc()
	if e.Latency > 0 { // a request refused before it decoded has none

		d := r.duration[0]
		if e.Transport == rls.TransportJSON {
			d = r.duration[1]
		}
		d.Observe(e.Latency.Seconds())
	}
	if e.GlobalShadow {
		r.globalShadow.WithLabelValues(e.Domain).Inc()
	}
}

// ObserveLimit implements rls.Observer.
func (r *RLS) ObserveLimit(e rls.LimitEvent) {
	k := [2]string{e.Domain, e.Key}
	v, ok := r.limits.Load(k)
	if !ok {
		s := &limitSeries{
			hits:   r.hits.WithLabelValues(e.Domain, e.Key),
			within: r.within.WithLabelValues(e.Domain, e.Key),
			near:   r.near.WithLabelValues(e.Domain, e.Key),
			over:   r.over.WithLabelValues(e.Domain, e.Key),
			shadow: r.shadow.WithLabelValues(e.Domain, e.Key),
		}
		v, _ = r.limits.LoadOrStore(k, s)
	}
	s := v.(*limitSeries)
	s.hits.Add(float64(e.Hits))
	s.within.Add(float64(e.WithinLimit))
	s.near.Add(float64(e.NearLimit))
	s.over.Add(float64(e.OverLimit))
	s.shadow.Add(float64(e.ShadowMode))
}

// ConfigReloaded records one reload of the --rls-config files: ok is
// false when they were refused, changed when a new config came into force.
func (r *RLS) ConfigReloaded(ok, changed bool) {
	switch {
	case !ok:
		r.reloadError.Inc()
	case changed:
		r.reloadChanged.Inc()
	default:
		r.reloadUnchanged.Inc()
	}
}
