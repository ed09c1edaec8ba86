package api_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/table"
)

// plainChecker is a Checker that is no BatchAppender: its CheckAll
// answers each request with its Hits as the count, or fails.
type plainChecker struct{ err error }

func (c plainChecker) Check(context.Context, table.Request) (table.Decision, error) {
	return table.Decision{}, c.err
}

func (c plainChecker) CheckAll(_ context.Context, reqs []table.Request) ([]table.Decision, bool, error) {
	if c.err != nil {
		return nil, false, c.err
	}
	ds := make([]table.Decision, len(reqs))
	for i, r := range reqs {
		ds[i] = table.Decision{Allowed: true, Count: r.Hits}
	}
	return ds, true, nil
}

func (c plainChecker) Refund(context.Context, table.Request) (table.Decision, error) {
	return table.Decision{}, c.err
}

// TestAppendCheckAllFallback: for a Checker that cannot append, the
// decisions of its CheckAll are appended to dst; on its error dst comes
// back as it was.
func TestAppendCheckAllFallback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reqs := []table.Request{{ID: "a", Hits: 3}, {ID: "b", Hits: 4}}
	dst := []table.Decision{{Count: -1}}
	got, ok, err := api.AppendCheckAll(ctx, plainChecker{}, dst, reqs)
	if err != nil || !ok || len(got) != 3 || got[0].Count != -1 || got[1].Count != 3 || got[2].Count != 4 {
		t.Errorf("got %+v, %v, %v; want dst's decision, then counts 3 and 4", got, ok, err)
	}
	boom := errors.New("boom")
	got, ok, err = api.AppendCheckAll(ctx, plainChecker{err: boom}, dst, reqs)
	if !errors.Is(err, boom) || ok || len(got) != 1 || got[0].Count != -1 {
		t.Errorf("on an error: %+v, %v, %v; want dst as it was", got, ok, err)
	}
}
