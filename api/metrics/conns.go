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
		gaugeFunc("ratelimitd_connections", "HTTP connections open on the listener.",
			labels, func() int64 { return stats().Open }),
		gaugeFunc("ratelimitd_connections_max", "The most HTTP connections the listener holds open at once (--max-conns).",
			labels, func() int64 { return stats().Max }),
		counterFunc("ratelimitd_connections_cap_reached_total", "Times the listener found its connection cap reached before accepting the next connection.",
			labels, func() int64 { return stats().CapReached }),
		counterFunc("ratelimitd_connections_idle_closed_total", "Idle keep-alive connections the listener closed to make room for new ones at its cap.",
			labels, func() int64 { return stats().IdleClosed }),
	)
}
