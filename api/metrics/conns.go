package metrics

import "github.com/prometheus/client_golang/prometheus"

// ConnStats is what a listener that caps its connections reports to
// Metrics.ObserveConns.
type ConnStats struct {
	Open       int64 // connections open now
	Max        int64 // the cap
	CapReached int64 // times the listener found the cap reached before accepting
	IdleClosed int64 // idle keep-alive connections it closed to make room
}

// ObserveConns makes four series, labelled listener=name, read stats at
// every scrape:
//
//	ratelimitd_connections{listener}                    (gauge: open now)
//	ratelimitd_connections_max{listener}                (gauge: the cap)
//	ratelimitd_connections_cap_reached_total{listener}  (counter)
//	ratelimitd_connections_idle_closed_total{listener}  (counter)
//
// Call it once per listener name: a second call with the same name panics,
// as registering a series twice does.
func (m *Metrics) ObserveConns(name string, stats func() ConnStats) {
	labels := prometheus.Labels{"listener": name}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ratelimitd_connections", ConstLabels: labels,
			Help: "HTTP connections open on the listener.",
		}, func() float64 { return float64(stats().Open) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ratelimitd_connections_max", ConstLabels: labels,
			Help: "The most HTTP connections the listener holds open at once (--max-conns).",
		}, func() float64 { return float64(stats().Max) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ratelimitd_connections_cap_reached_total", ConstLabels: labels,
			Help: "Times the listener found its connection cap reached before accepting the next connection.",
		}, func() float64 { return float64(stats().CapReached) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ratelimitd_connections_idle_closed_total", ConstLabels: labels,
			Help: "Idle keep-alive connections the listener closed to make room for new ones at its cap.",
		}, func() float64 { return float64(stats().IdleClosed) }),
	)
}
