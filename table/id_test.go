package table

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
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

// TestValidUTF8AgreesWithTheStandardLibrary: the fast path answers as
// utf8.ValidString for every length from 0 to 40 with one odd byte (a
// lone continuation byte, a lead byte cut short, a 2-byte rune, an
// overlong form, 0x7f and 0xff) at every position, so every word and the
// overlapping last word are covered, and for ids of 0 to 40 ASCII bytes.
func TestValidUTF8AgreesWithTheStandardLibrary(t *testing.T) {
	t.Parallel()
	odd := []string{"\x80", "\xc3", "é", "\xc0\xaf", "\x7f", "\xff", "😀", "\xf0\x9f\x98"}
	for n := 0; n <= 40; n++ {
		base := strings.Repeat("a", n)
		if got := validUTF8(base); !got {
			t.Fatalf("%d ASCII bytes: got invalid", n)
		}
		for i := 0; i <= n; i++ {
			for _, o := range odd {
				s := base[:i] + o + base[i:]
				if got, want := validUTF8(s), utf8.ValidString(s); got != want {
					t.Fatalf("%q: validUTF8 %v, utf8.ValidString %v", s, got, want)
				}
			}
		}
	}
}

// BenchmarkValidUTF8 compares validUTF8 with utf8.ValidString on ASCII
// ids of 9, 12 and 40 bytes.
func BenchmarkValidUTF8(b *testing.B) {
	ids := []string{"user-7919", "user-1234567", "tenant-42/route/api/v1/users/1234567890"}
	var sink bool
	for _, id := range ids {
		b.Run("baseline=utf8.ValidString/len="+strconv.Itoa(len(id)), func(b *testing.B) {
			for b.Loop() {
				sink = utf8.ValidString(id)
			}
		})
		b.Run("validUTF8/len="+strconv.Itoa(len(id)), func(b *testing.B) {
			for b.Loop() {
				sink = validUTF8(id)
			}
		})
	}
	if !sink {
		b.Fatal("an ASCII id reported invalid")
	}
}
