package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// TestCheckAllIndexError: a bad request of a batch is reported as a
// *table.IndexError carrying its index and its *table.FieldError, so that a
// transport names the element without parsing a string.
func TestCheckAllIndexError(t *testing.T) {
	t.Parallel()
	s := startSystem(t, Config{Shards: 2})
	good := table.Request{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 1}, Hits: 1}
	bad := table.Request{ID: "b", Policy: table.Policy{Scale: time.Second, Limit: -1}, Hits: 1}
	_, _, err := s.CheckAll(context.Background(), []table.Request{good, good, bad})
	var ie *table.IndexError
	if !errors.As(err, &ie) || ie.Index != 2 {
		t.Fatalf("got %v, want a *table.IndexError of index 2", err)
	}
	var fe *table.FieldError
	if !errors.As(err, &fe) || *fe != (table.FieldError{Field: "limit", Message: table.MsgNotNegative}) {
		t.Errorf("got field error %+v, want limit: %s", fe, table.MsgNotNegative)
	}
	if !errors.Is(err, table.ErrInvalid) {
		t.Errorf("got %v, want it to match table.ErrInvalid", err)
	}
}

// TestErrorsAreTables: the errors of a System are table's, so that a
// transport matches them without importing actors.
func TestErrorsAreTables(t *testing.T) {
	t.Parallel()
	if ErrStopped != table.ErrStopped || ErrUnavailable != table.ErrUnavailable || ErrJournal != table.ErrJournal || MaxCheckAll != table.MaxBatch {
		t.Errorf("got ErrStopped %p, ErrUnavailable %p, ErrJournal %p, MaxCheckAll %d; want table's", ErrStopped, ErrUnavailable, ErrJournal, MaxCheckAll)
	}
	s := startSystem(t, Config{})
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := s.Check(context.Background(), table.Request{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 1}, Hits: 1})
	if !errors.Is(err, table.ErrStopped) {
		t.Errorf("Check after Stop: got %v, want table.ErrStopped", err)
	}
}

// TestSystemRefusesIDsNotUTF8: the embedded path, which the handlers rely
// on for keys they do not parse, refuses an id that is not valid UTF-8 with
// a *table.FieldError on id (on checks[I].id in a batch).
func TestSystemRefusesIDsNotUTF8(t *testing.T) {
	t.Parallel()
	sys := startSystem(t, Config{})
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
	_, err = sys.ResetID(ctx, "", bad.ID)
	want("ResetID", err, "id")
	if d, err := sys.Check(ctx, ok); err != nil || d.Count != 1 {
		t.Errorf("the valid request after them: got %+v, %v, want count 1: the batch counted nothing", d, err)
	}
}
