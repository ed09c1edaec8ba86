package scaling

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/keys"
	"github.com/ratelimitd/ratelimitd/table"
)

// SweepPoint is the cost of one table.DeleteExpired call deleting Expired
// buckets from a table that also holds Live unexpired ones.
type SweepPoint struct {
	Live, Expired int
	Took          time.Duration // median over the repetitions
	Reps          int
}

// NsPerDeleted returns the sweep's cost per deleted bucket.
func (p SweepPoint) NsPerDeleted() float64 {
	if p.Expired == 0 {
		return 0
	}
	return float64(p.Took.Nanoseconds()) / float64(p.Expired)
}

// sweepEpoch is a whole hour: a table reads no clock, so the sweep
// measurements run on a fixed synthetic time.
var sweepEpoch = time.UnixMilli(1_700_000_000_000 - 1_700_000_000_000%3_600_000)

// Sweep measures table.DeleteExpired on a table of live buckets (one-hour
// windows) beside expired ones (one-second windows, deleted 2 s after they
// were made), for each (live, expired) pair, reps times each, and returns
// the median of each. The expired buckets are recreated before each
// repetition, and the heap collected, outside the timing.
func Sweep(ctx context.Context, pairs [][2]int, reps int) ([]SweepPoint, error) {
	var out []SweepPoint
	for _, pr := range pairs {
		live, expired := pr[0], pr[1]
		t := table.New(table.Config{})
		for i := range live {
			t.Apply(table.Request{ID: keys.ID(i), Policy: table.Policy{Scale: time.Hour, Limit: 10}, Hits: 1}, sweepEpoch)
		}
		ids := keys.IDs(expired)
		var took []time.Duration
		for r := range reps {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			base := sweepEpoch.Add(time.Duration(3*r) * time.Second)
			for _, id := range ids {
				t.Apply(table.Request{ID: id, Policy: table.Policy{Scale: time.Second, Limit: 10}, Hits: 1}, base)
			}
			if got := t.Len(); got != live+expired {
				return out, fmt.Errorf("sweep: %d buckets before the sweep, want %d", got, live+expired)
			}
			// No collection of earlier garbage running beside the timed call.
			runtime.GC()
			t0 := time.Now()
			n := t.DeleteExpired(base.Add(2*time.Second), expired)
			took = append(took, time.Since(t0))
			if n != expired || t.Len() != live {
				return out, fmt.Errorf("sweep: deleted %d of %d expired, %d left, want %d", n, expired, t.Len(), live)
			}
		}
		slices.Sort(took)
		out = append(out, SweepPoint{Live: live, Expired: expired, Took: took[len(took)/2], Reps: reps})
	}
	return out, nil
}
