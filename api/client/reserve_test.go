package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/client"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
)

// TestReserveCancel: Cancel gives the hits back in the window they were
// counted in, and nothing once that window is over.
func TestReserveCancel(t *testing.T) {
	t.Parallel()
	sys, clk := actorstest.StartClocked(t, actors.Config{})
	c := newClient(t, client.Options{BaseURL: apitest.StartServer(t, sys, httpapi.Options{}).URL})
	ctx := context.Background()
	l := client.Limit{Policy: client.Policy{Scale: time.Minute, Limit: 5}}

	r, err := c.Reserve(ctx, "dave", l, 4)
	if err != nil || !r.Allowed || r.Count != 4 {
		t.Fatalf("reserve 4: got %+v, %v", r, err)
	}
	if want := actorstest.ClockStart().UnixMilli(); r.Window != want {
		t.Fatalf("reserve: got window %d, want the window's start %d", r.Window, want)
	}
	d, err := r.Cancel(ctx)
	if err != nil || d.Count != 0 || d.Remaining != 5 {
		t.Fatalf("cancel in the same window: got %+v, %v, want count 0", d, err)
	}

	r, err = c.Reserve(ctx, "dave", l, 5)
	if err != nil || !r.Allowed {
		t.Fatalf("reserve 5: got %+v, %v", r, err)
	}
	clk.Advance(time.Minute) // the window is over
	if _, err := c.Check(ctx, "dave", l, 5); err != nil {
		t.Fatal(err)
	}
	if d, err := r.Cancel(ctx); err != nil || d.Count != 5 || d.Allowed {
		t.Fatalf("cancel after the window ended: got %+v, %v, want the new window untouched (count 5, full)", d, err)
	}

	// A denial reserves nothing: Cancel sends nothing.
	r, err = c.Reserve(ctx, "dave", l, 1)
	if err != nil || r.Allowed || r.Window != 0 {
		t.Fatalf("reserve in a full window: got %+v, %v, want denied with no window", r, err)
	}
	if d, err := r.Cancel(ctx); err != nil || d != (client.Decision{}) {
		t.Fatalf("cancel of a denial: got %+v, %v, want nothing", d, err)
	}
	if _, err := c.RefundWindow(ctx, "dave", l, 1, -1); err == nil {
		t.Fatalf("RefundWindow with a negative window: got no error")
	}
}
