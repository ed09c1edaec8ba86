package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterStats is what Metrics reads of a cluster member at every scrape
// (see ObserveCluster): its counters since it started, and gauges.
type ClusterStats struct {
	ForwardedChecks  int64 // checks sent to their owners
	ForwardedBatches int64 // the batches that carried them
	ForwardStreams   int64 // streams opened to other members to carry them
	// BatchSizeBounds are the upper bounds of the buckets of BatchSizes;
	// BatchSizes counts forwarded batches by checks in each, one bucket
	// more than bounds (above the last).
	BatchSizeBounds  []int64
	BatchSizes       []int64
	ReceivedChecks   int64 // checks forwarded to this member
	ReceivedBatches  int64
	Duplicates       int64 // batches received again, answered from the reply kept
	Fenced           int64 // checks refused, uncounted, for a vshard not served here at their epoch
	Unavailable      int64 // checks no member decided in time (503)
	AdmittedOpen     int64 // checks admitted uncounted (fail open)
	HandoffsOut      int64 // handoffs committed from this member
	HandoffFailures  int64 // handoffs from this member that did not commit
	VShardsOut       int64 // vshards handed off from this member
	VShardsIn        int64 // vshards handed to this member, with their buckets
	BucketsOut       int64 // buckets the handoffs from this member carried
	HandoffNanos     int64 // time the handoffs from this member took, fence to commit, summed
	Takeovers        int64 // vshards taken from members whose lease expired
	Claims           int64 // vshards no one had owned
	OwnershipChanges int64 // vshards that began or stopped serving here
	EtcdErrors       int64 // failed etcd requests
	LeaseLapses      int64 // times the lease deadline passed unrenewed
	Serving          int64 // vshards served here now
	Members          int64 // live members in this member's view
	LeaseValid       bool  // whether this member may serve now
	Epoch            int64 // the etcd revision of its view
}

// clusterSeries reads one counter or gauge of ClusterStats.
type clusterSeries struct {
	name, help string
	labels     prometheus.Labels
	gauge      bool
	read       func(*ClusterStats) int64
}

var clusterSeriesList = []clusterSeries{
	{"ratelimitd_cluster_forwarded_checks_total", "Checks sent to the member that owns their vshard.", nil, false, func(s *ClusterStats) int64 { return s.ForwardedChecks }},
	{"ratelimitd_cluster_forwarded_batches_total", "Batches that carried the forwarded checks.", nil, false, func(s *ClusterStats) int64 { return s.ForwardedBatches }},
	{"ratelimitd_cluster_forward_streams_total", "Streams opened to other members to carry the forwarded batches (one per member link, again after one breaks).", nil, false, func(s *ClusterStats) int64 { return s.ForwardStreams }},
	{"ratelimitd_cluster_received_checks_total", "Checks forwarded to this member by the others.", nil, false, func(s *ClusterStats) int64 { return s.ReceivedChecks }},
	{"ratelimitd_cluster_received_batches_total", "Batches forwarded to this member.", nil, false, func(s *ClusterStats) int64 { return s.ReceivedBatches }},
	{"ratelimitd_cluster_duplicate_batches_total", "Batches received again (a retry), answered with the reply kept, not counted again.", nil, false, func(s *ClusterStats) int64 { return s.Duplicates }},
	{"ratelimitd_cluster_fenced_checks_total", "Checks refused here, uncounted, because this member did not serve their vshard at their epoch (routed again).", nil, false, func(s *ClusterStats) int64 { return s.Fenced }},
	{"ratelimitd_cluster_unavailable_checks_total", "Checks no member decided in time (503, or admitted with --on-cluster-error open).", nil, false, func(s *ClusterStats) int64 { return s.Unavailable }},
	{"ratelimitd_cluster_admitted_open_checks_total", "Checks admitted uncounted with --on-cluster-error open.", nil, false, func(s *ClusterStats) int64 { return s.AdmittedOpen }},
	{"ratelimitd_cluster_handoffs_total", "Handoffs from this member, by result.", prometheus.Labels{"result": "committed"}, false, func(s *ClusterStats) int64 { return s.HandoffsOut }},
	{"ratelimitd_cluster_handoffs_total", "Handoffs from this member, by result.", prometheus.Labels{"result": "failed"}, false, func(s *ClusterStats) int64 { return s.HandoffFailures }},
	{"ratelimitd_cluster_handoff_vshards_total", "Vshards moved with their buckets, by direction.", prometheus.Labels{"direction": "out"}, false, func(s *ClusterStats) int64 { return s.VShardsOut }},
	{"ratelimitd_cluster_handoff_vshards_total", "Vshards moved with their buckets, by direction.", prometheus.Labels{"direction": "in"}, false, func(s *ClusterStats) int64 { return s.VShardsIn }},
	{"ratelimitd_cluster_handoff_buckets_total", "Buckets the handoffs from this member carried.", nil, false, func(s *ClusterStats) int64 { return s.BucketsOut }},
	{"ratelimitd_cluster_handoff_seconds_total", "Time the handoffs from this member took, from the fence to the commit, summed (a moving vshard's pause).", nil, false, nil},
	{"ratelimitd_cluster_takeovers_total", "Vshards taken from members whose lease expired (their buckets start from nothing).", nil, false, func(s *ClusterStats) int64 { return s.Takeovers }},
	{"ratelimitd_cluster_claims_total", "Vshards claimed that no member had owned.", nil, false, func(s *ClusterStats) int64 { return s.Claims }},
	{"ratelimitd_cluster_ownership_changes_total", "Vshards that began or stopped serving on this member.", nil, false, func(s *ClusterStats) int64 { return s.OwnershipChanges }},
	{"ratelimitd_cluster_etcd_errors_total", "Failed etcd requests.", nil, false, func(s *ClusterStats) int64 { return s.EtcdErrors }},
	{"ratelimitd_cluster_lease_lapses_total", "Times the member's lease deadline passed before etcd renewed it.", nil, false, func(s *ClusterStats) int64 { return s.LeaseLapses }},
	{"ratelimitd_cluster_vshards_served", "Vshards this member serves now.", nil, true, func(s *ClusterStats) int64 { return s.Serving }},
	{"ratelimitd_cluster_members", "Live members in this member's view.", nil, true, func(s *ClusterStats) int64 { return s.Members }},
	{"ratelimitd_cluster_lease_valid", "1 while this member's lease lets it serve, else 0.", nil, true, func(s *ClusterStats) int64 {
		if s.LeaseValid {
			return 1
		}
		return 0
	}},
	{"ratelimitd_cluster_epoch", "The etcd revision of this member's view of the cluster.", nil, true, func(s *ClusterStats) int64 { return s.Epoch }},
}

// clusterCollector turns one reading of ClusterStats per scrape into the
// cluster series.
type clusterCollector struct {
	src   atomic.Pointer[func() ClusterStats]
	descs []*prometheus.Desc
	sizes *prometheus.Desc
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	ch <- c.sizes
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	st := (*c.src.Load())()
	for i, s := range clusterSeriesList {
		kind := prometheus.CounterValue
		if s.gauge {
			kind = prometheus.GaugeValue
		}
		v := float64(st.HandoffNanos) / 1e9 // the one series in seconds
		if s.read != nil {
			v = float64(s.read(&st))
		}
		ch <- prometheus.MustNewConstMetric(c.descs[i], kind, v)
	}
	buckets := make(map[float64]uint64, len(st.BatchSizeBounds))
	var count uint64
	for i, b := range st.BatchSizeBounds {
		if i < len(st.BatchSizes) {
			count += uint64(st.BatchSizes[i])
		}
		buckets[float64(b)] = count
	}
	if n := len(st.BatchSizeBounds); n < len(st.BatchSizes) {
		count += uint64(st.BatchSizes[n])
	}
	ch <- prometheus.MustNewConstHistogram(c.sizes, count, float64(st.ForwardedChecks), buckets)
}

// ObserveCluster adds the series of a cluster member, read from stats()
// at every scrape:
//
//	ratelimitd_cluster_forwarded_checks_total, _forwarded_batches_total, _forward_streams_total
//	ratelimitd_cluster_checks_per_batch        (histogram of forwarded batches)
//	ratelimitd_cluster_received_checks_total, _received_batches_total, _duplicate_batches_total
//	ratelimitd_cluster_fenced_checks_total, _unavailable_checks_total, _admitted_open_checks_total
//	ratelimitd_cluster_handoffs_total{result="committed|failed"}
//	ratelimitd_cluster_handoff_vshards_total{direction="out|in"}, _handoff_buckets_total, _handoff_seconds_total
//	ratelimitd_cluster_takeovers_total, _claims_total, _ownership_changes_total
//	ratelimitd_cluster_etcd_errors_total, _lease_lapses_total
//	ratelimitd_cluster_vshards_served, _members, _lease_valid, _epoch (gauges)
//
// The series appear at the first call; a later call replaces the source.
func (m *Metrics) ObserveCluster(stats func() ClusterStats) {
	m.clusterOnce.Do(func() {
		c := &clusterCollector{}
		for _, s := range clusterSeriesList {
			c.descs = append(c.descs, prometheus.NewDesc(s.name, s.help, nil, s.labels))
		}
		c.sizes = prometheus.NewDesc("ratelimitd_cluster_checks_per_batch", "Checks per forwarded batch.", nil, nil)
		m.cluster = c
		m.cluster.src.Store(&stats)
		m.reg.MustRegister(c)
	})
	m.cluster.src.Store(&stats)
}

// clusterState is the cluster part of Metrics.
type clusterState struct {
	clusterOnce sync.Once
	cluster     *clusterCollector
}
