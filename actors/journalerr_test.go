package actors

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
	"github.com/ratelimitd/ratelimitd/table/journal"
)

// bigBatch is MaxCheckAll checks of the largest kind a client can send: ids
// of table.MaxIDLen bytes, half of them under the longest namespace.
func bigBatch() []table.Request {
	reqs := make([]table.Request, MaxCheckAll)
	for i := range reqs {
		p := fmt.Sprintf("%d-", i)
		reqs[i] = table.Request{ID: p + strings.Repeat("x", table.MaxIDLen-len(p)), Scale: time.Hour, Limit: 1000, Hits: 1}
		if i%2 == 1 {
			reqs[i].Namespace = strings.Repeat("n", table.MaxNamespaceLen)
		}
	}
	return reqs
}

// TestLargestBatchFitsTheSmallestSegment: with segments of the smallest
// size, one batch of the largest checks is journaled (its records fit), the
// shard goes on journaling, and a restart finds every count.
func TestLargestBatchFitsTheSmallestSegment(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncNone, SyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			cfg := Config{Shards: 1, DataDir: t.TempDir(), JournalSync: mode, SegmentSize: journal.MinSegmentSize, SweepInterval: -1}
			s := startSystem(t, cfg)
			reqs := bigBatch()
			decs, ok, err := s.CheckAll(context.Background(), reqs)
			if err != nil || !ok {
				t.Fatalf("CheckAll of %d checks with %d-byte ids: got allowed %v, %v; want allowed", len(reqs), table.MaxIDLen, ok, err)
			}
			for i, d := range decs {
				if d.Count != 1 {
					t.Fatalf("check %d: count %d, want 1", i, d.Count)
				}
			}
			if d := mustCheck(t, s, reqs[0]); d.Count != 2 {
				t.Fatalf("a later check: count %d, want 2", d.Count)
			}
			if st := s.Stats(); st.JournalErrors != 0 || st.FailedClosed != 0 {
				t.Fatalf("stats: %d journal errors, %d batches refused; want 0 and 0", st.JournalErrors, st.FailedClosed)
			}
			s = restart(t, s, cfg)
			decs, ok, err = s.CheckAll(context.Background(), reqs)
			if err != nil || !ok {
				t.Fatalf("CheckAll after the restart: got allowed %v, %v; want allowed", ok, err)
			}
			for i, d := range decs {
				want := int64(2)
				if i == 0 {
					want = 3
				}
				if d.Count != want {
					t.Fatalf("check %d after the restart: count %d, want %d", i, d.Count, want)
				}
			}
		})
	}
}
