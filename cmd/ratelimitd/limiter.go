package main

import (
	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/admin"
	"github.com/ratelimitd/ratelimitd/api/metrics"
)

// The actor system is what every transport checks with.
var (
	_ api.Checker  = (*actors.System)(nil)
	_ api.Reserver = (*actors.System)(nil)
)

// adminBackend is the actor system as the admin API sees it.
type adminBackend struct{ *actors.System }

var _ admin.Backend = adminBackend{}

// Stats implements admin.Backend.
func (b adminBackend) Stats() admin.Stats {
	s := b.System.Stats()
	return admin.Stats{
		Shards: s.Shards, Buckets: s.Buckets, Restarts: s.Restarts,
		TornTails: s.TornTails, JournalErrors: s.JournalErrors, FailedClosed: s.FailedClosed, FailedOpen: s.FailedOpen,
		Snapshots: s.Snapshots, SnapshotErrors: s.SnapshotErrors,
		Evictions: s.Evictions, Rejections: s.Rejections,
	}
}

// metricsStats returns what the metrics read of sys at every scrape.
func metricsStats(sys *actors.System) func() metrics.Stats {
	return func() metrics.Stats {
		s, sw := sys.Stats(), sys.SweepStats()
		return metrics.Stats{
			Buckets: s.Buckets, Restarts: s.Restarts,
			TornTails: s.TornTails, JournalErrors: s.JournalErrors, FailedClosed: s.FailedClosed, FailedOpen: s.FailedOpen,
			Snapshots: s.Snapshots, SnapshotErrors: s.SnapshotErrors,
			Evictions:   s.Evictions,
			SweepSlices: sw.Slices, SweepBacklog: int64(sw.Backlog),
		}
	}
}

// sweepMetrics tells the metrics of every sweep round of the actors.
type sweepMetrics struct{ m *metrics.Metrics }

var _ actors.SweepObserver = sweepMetrics{}

// SweepDone implements actors.SweepObserver.
func (s sweepMetrics) SweepDone(r actors.SweepReport) {
	s.m.SweepDone(metrics.SweepReport{Deleted: r.Deleted, Duration: r.Duration})
}
