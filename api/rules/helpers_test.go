package rules

import (
	"errors"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// checkError fails t unless err is an *Error matching ErrInvalid with the
// Index, Name and Field of want, and its Line when want.Line is not 0.
func checkError(t *testing.T, err error, want Error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %+v", want)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(%v, ErrInvalid) = false, want true", err)
	}
	var got *Error
	if !errors.As(err, &got) {
		t.Fatalf("got error %T %v, want an *Error", err, err)
	}
	if got.Index != want.Index || got.Name != want.Name || got.Field != want.Field {
		t.Errorf("got Index %d Name %q Field %q (%v), want Index %d Name %q Field %q",
			got.Index, got.Name, got.Field, err, want.Index, want.Name, want.Field)
	}
	if want.Line != 0 && got.Line != want.Line {
		t.Errorf("got Line %d (%v), want %d", got.Line, err, want.Line)
	}
	if got.Message == "" {
		t.Errorf("got an empty Message in %v, want what the field must be", err)
	}
}

// nameRule returns a valid rule used only by name.
func nameRule(name string) Rule {
	return Rule{Name: name, Policy: table.Policy{Algorithm: table.FixedWindow, Scale: time.Second, Limit: 10}}
}

// urlRule returns a valid rule matching prefix, method and host.
func urlRule(name, prefix, method, host string) Rule {
	r := nameRule(name)
	r.Match = Match{Prefix: prefix, Method: method, Host: host}
	return r
}

// mustStore returns a Store of rules or fails t.
func mustStore(t testing.TB, rules ...Rule) *Store {
	t.Helper()
	st, err := NewStore(rules)
	if err != nil {
		t.Fatalf("NewStore: %v", err)
	}
	return st
}
