package client_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api/client"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
)

// TestIDNotUTF8: Check, Refund, Wait and CheckAll refuse an id that is not
// valid UTF-8 before sending anything, under either failure policy, with an
// ErrInvalid naming id as the service would (checks[I].id in a batch).
func TestIDNotUTF8(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	srv := apitest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		writeJSON(w, 200, decisionJSON)
	}))
	l := client.Limit{Policy: client.Policy{Scale: time.Minute, Limit: 10}}
	tests := []struct {
		name      string
		call      func(ctx context.Context, c *client.Client) error
		wantField string
		wantErr   string
	}{
		{"Check", func(ctx context.Context, c *client.Client) error {
			_, err := c.Check(ctx, "a\xffb", l, 1)
			return err
		}, "id", "client: invalid request: GET /check_rate: id: must be valid UTF-8"},
		{"Refund", func(ctx context.Context, c *client.Client) error {
			_, err := c.Refund(ctx, "\xed\xa0\x80", l, 1)
			return err
		}, "id", "client: invalid request: GET /refund: id: must be valid UTF-8"},
		{"Wait", func(ctx context.Context, c *client.Client) error {
			return c.Wait(ctx, "\xc3", client.Limit{Rule: "login"})
		}, "id", "client: invalid request: GET /check_rate: id: must be valid UTF-8"},
		{"CheckAll", func(ctx context.Context, c *client.Client) error {
			_, _, err := c.CheckAll(ctx, []client.Check{{ID: "a", Limit: l, Hits: 1}, {ID: "é", Limit: l, Hits: 1}, {ID: "b\x80", Limit: l, Hits: 1}})
			return err
		}, "checks[2].id", "client: invalid request: POST /check_rate: checks[2].id: must be valid UTF-8"},
	}
	for _, tt := range tests {
		for _, policy := range []client.FailurePolicy{client.FailClosed, client.FailOpen} {
			c := newClient(t, client.Options{BaseURL: srv.URL, Failure: policy})
			err := tt.call(context.Background(), c)
			var fe *client.FieldError
			if !errors.Is(err, client.ErrInvalid) || !errors.As(err, &fe) || *fe != (client.FieldError{Field: tt.wantField, Message: "must be valid UTF-8"}) {
				t.Errorf("%s %s: got %v, want ErrInvalid with the FieldError %s: must be valid UTF-8", tt.name, policy, err, tt.wantField)
			} else if err.Error() != tt.wantErr {
				t.Errorf("%s %s: got %q, want %q", tt.name, policy, err, tt.wantErr)
			}
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the service got %d requests, want 0", n)
	}
	// Valid ids, U+FFFD itself included, are sent.
	c := newClient(t, client.Options{BaseURL: srv.URL})
	if _, err := c.Check(context.Background(), "\ufffd", l, 1); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("the service got %d requests, want 1", n)
	}
}
