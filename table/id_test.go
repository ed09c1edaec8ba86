package table

import (
	"errors"
	"testing"
	"time"
)

// TestValidateIDUTF8: an id that is not valid UTF-8 is refused with a
// FieldError on id; valid ones, U+FFFD itself included, pass.
func TestValidateIDUTF8(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"\xff", "a\x80b", "\xc0\xaf", "\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80", "ok\xfe"} {
		r := Request{ID: id, Policy: Policy{Scale: time.Second, Limit: 1}, Hits: 1}
		err := r.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || *fe != (FieldError{Field: "id", Message: "must be valid UTF-8"}) || !errors.Is(err, ErrInvalid) {
			t.Errorf("id %q: got %v, want id: must be valid UTF-8", id, err)
		}
		if err != nil && err.Error() != "id: must be valid UTF-8" {
			t.Errorf("id %q: got message %q", id, err.Error())
		}
	}
	for _, id := range []string{"a", "\ufffd", "é€😀", "\x00\x7f", "\U0010ffff"} {
		r := Request{ID: id, Policy: Policy{Scale: time.Second, Limit: 1}, Hits: 1}
		if err := r.Validate(); err != nil {
			t.Errorf("id %q: got %v, want it valid", id, err)
		}
	}
}
