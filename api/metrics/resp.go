package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratelimitd/ratelimitd/api/resp"
)

// RESP is the resp.Observer of the Redis protocol listener: it counts in
// atomic counters, which its series read at every scrape, so that
// recording a command costs two map reads of immutable maps and one
// atomic add, no label lookup. Its methods are safe for concurrent use.
//
//	ratelimitd_redis_commands_total{command,result}  (counter; a series appears at its first command)
//	ratelimitd_redis_pipeline_checks                 (histogram: the checks of one pipelined read, decided in one pass)
//	ratelimitd_redis_connections                     (gauge: open now)
//	ratelimitd_redis_connections_max                 (gauge: the cap)
//	ratelimitd_redis_connection_events_total{event}  (counter: opened, closed, rejected, protocol_error, timed_out)
type RESP struct {
	commands []string
	results  []resp.Result
	events   []resp.ConnEvent
	cmdIdx   map[string]int
	resIdx   map[resp.Result]int
	evIdx    map[resp.ConnEvent]int

	counts    []atomic.Int64 // by command × result
	eventsN   []atomic.Int64 // by event
	batch     prometheus.Histogram
	maxConns  int64
	cmdDesc   *prometheus.Desc
	eventDesc *prometheus.Desc
	openDesc  *prometheus.Desc
	maxDesc   *prometheus.Desc
}

var _ resp.Observer = (*RESP)(nil)

// ObserveRESP returns the Observer of a Redis protocol listener holding at
// most maxConns connections, its series registered in m. Call it once:
// a second call panics, as registering a series twice does.
func (m *Metrics) ObserveRESP(maxConns int) *RESP {
	r := &RESP{
		commands: resp.Commands(),
		results:  resp.Results(),
		events:   resp.ConnEvents(),
		maxConns: int64(maxConns),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ratelimitd_redis_pipeline_checks",
			Help:    "Checks of one pipelined read of a Redis protocol connection, decided in one pass.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
		cmdDesc: prometheus.NewDesc("ratelimitd_redis_commands_total",
			"Redis protocol commands answered, by command (lower case; unknown for any other) and result: ok, allowed, denied, shadow_denied, full, invalid, error, noauth, wrongpass, auth_limited (an AUTH refused unread after too many failures from its address) or queued (by MULTI; EXEC counts the command again with its reply's result).",
			[]string{"command", "result"}, nil),
		eventDesc: prometheus.NewDesc("ratelimitd_redis_connection_events_total",
			"Redis protocol connection events: opened, closed, rejected (over --redis-max-conns), protocol_error and timed_out (each then closed).",
			[]string{"event"}, nil),
		openDesc: prometheus.NewDesc("ratelimitd_redis_connections", "Redis protocol connections open now.", nil, nil),
		maxDesc:  prometheus.NewDesc("ratelimitd_redis_connections_max", "The most Redis protocol connections held open at once (--redis-max-conns).", nil, nil),
	}
	r.cmdIdx = index(r.commands)
	r.resIdx = index(r.results)
	r.evIdx = index(r.events)
	r.counts = make([]atomic.Int64, len(r.commands)*len(r.results))
	r.eventsN = make([]atomic.Int64, len(r.events))
	m.reg.MustRegister(r, r.batch)
	return r
}

// index maps each element of xs to its position.
func index[T comparable](xs []T) map[T]int {
	m := make(map[T]int, len(xs))
	for i, x := range xs {
		m[x] = i
	}
	return m
}

// Command implements resp.Observer. A name or result resp does not list
// is counted as unknown or error.
func (r *RESP) Command(name string, res resp.Result) {
	c, ok := r.cmdIdx[name]
	if !ok {
		c = r.cmdIdx["unknown"]
	}
	k, ok := r.resIdx[res]
	if !ok {
		k = r.resIdx[resp.ResultError]
	}
	r.counts[c*len(r.results)+k].Add(1)
}

// Batch implements resp.Observer.
func (r *RESP) Batch(checks int) { r.batch.Observe(float64(checks)) }

// Conn implements resp.Observer.
func (r *RESP) Conn(ev resp.ConnEvent) {
	if i, ok := r.evIdx[ev]; ok {
		r.eventsN[i].Add(1)
	}
}

// Describe implements prometheus.Collector.
func (r *RESP) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.cmdDesc
	ch <- r.eventDesc
	ch <- r.openDesc
	ch <- r.maxDesc
}

// Collect implements prometheus.Collector: the commands seen, every
// connection event, and the connections open and their cap.
func (r *RESP) Collect(ch chan<- prometheus.Metric) {
	for c, name := range r.commands {
		for k, res := range r.results {
			if n := r.counts[c*len(r.results)+k].Load(); n > 0 {
				ch <- prometheus.MustNewConstMetric(r.cmdDesc, prometheus.CounterValue, float64(n), name, string(res))
			}
		}
	}
	for i, ev := range r.events {
		ch <- prometheus.MustNewConstMetric(r.eventDesc, prometheus.CounterValue, float64(r.eventsN[i].Load()), string(ev))
	}
	open := r.eventsN[r.evIdx[resp.ConnOpened]].Load() - r.eventsN[r.evIdx[resp.ConnClosed]].Load()
	ch <- prometheus.MustNewConstMetric(r.openDesc, prometheus.GaugeValue, float64(max(open, 0)))
	ch <- prometheus.MustNewConstMetric(r.maxDesc, prometheus.GaugeValue, float64(r.maxConns))
}
