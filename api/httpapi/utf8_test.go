package httpapi_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/table"
)

// TestSystemRefusesIDsNotUTF8: the embedded path, which the handlers rely
// on for keys they do not parse, refuses an id that is not valid UTF-8 with
// a *table.FieldError on id (on checks[I].id in a batch).
func TestSystemRefusesIDsNotUTF8(t *testing.T) {
	t.Parallel()
	sys := actorstest.StartSystem(t, actors.Config{})
	ctx := context.Background()
	ok := table.Request{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 5}, Hits: 1}
	bad := ok
	bad.ID = "a\xffb"
	want := func(name string, err error, field string) {
		t.Helper()
		var fe *table.FieldError
		if !errors.As(err, &fe) || *fe != (table.FieldError{Field: field, Message: "must be valid UTF-8"}) || !errors.Is(err, table.ErrInvalid) {
			t.Errorf("%s: got %v, want the FieldError %s: must be valid UTF-8", name, err, field)
		}
	}
	_, err := sys.Check(ctx, bad)
	want("Check", err, "id")
	_, _, err = sys.CheckAll(ctx, []table.Request{ok, bad})
	want("CheckAll", err, "id")
	if ie := (*table.IndexError)(nil); !errors.As(err, &ie) || ie.Index != 1 {
		t.Errorf("CheckAll: got %v, want the error of check 1", err)
	}
	_, err = sys.Refund(ctx, bad)
	want("Refund", err, "id")
	_, err = sys.Reset(ctx, bad)
	want("Reset", err, "id")
	if d, err := sys.Check(ctx, ok); err != nil || d.Count != 1 {
		t.Errorf("the valid request after them: got %+v, %v, want count 1: the batch counted nothing", d, err)
	}
}
