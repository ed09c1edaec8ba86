package actors

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// TestClusterAppendCheckAll: in cluster mode too, AppendCheckAll puts the
// decisions after dst's, and where CheckAll returns none (here, the member
// stopped) it returns dst as it was.
func TestClusterAppendCheckAll(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t)
	a := tc.start(tc.config("a"))
	tc.settle(a)
	ctx := context.Background()
	reqs := []table.Request{
		{ID: "cl-append-a", Policy: table.Policy{Scale: time.Hour, Limit: 5}, Hits: 1},
		{ID: "cl-append-b", Policy: table.Policy{Scale: time.Hour, Limit: 5}, Hits: 2},
	}
	marker := table.Decision{Count: -7}
	got, allowed, err := a.AppendCheckAll(ctx, []table.Decision{marker}, reqs)
	if err != nil || !allowed || len(got) != 3 || got[0] != marker || got[1].Count != 1 || got[2].Count != 2 {
		t.Fatalf("got %+v, %v, %v; want the marker, then counts 1 and 2", got, allowed, err)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	got, _, err = a.AppendCheckAll(ctx, []table.Decision{marker}, reqs)
	if err == nil || len(got) != 1 || got[0] != marker {
		t.Fatalf("after Stop: %+v, %v; want an error and dst as it was", got, err)
	}
}
