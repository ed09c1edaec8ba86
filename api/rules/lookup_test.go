package rules

import (
	"errors"
	"testing"

	"github.com/ratelimitd/ratelimitd/table"
)

// TestLookup: a Set says, by rule, whether the table can take its policy,
// having asked once when it was built; a Store's changes too.
func TestLookup(t *testing.T) {
	t.Parallel()
	slow := Rule{Name: "slow", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: table.MaxScale, Limit: 1, Burst: 2}}
	st := mustStore(t, nameRule("a"), slow)
	for _, set := range []*Set{st.Current(), mustPut(t, st, nameRule("b"))} {
		if r, ok, err := set.Lookup("a"); !ok || err != nil || r != nameRule("a") {
			t.Errorf("Lookup(a): got %+v, %v, %v; want the rule, usable", r, ok, err)
		}
		r, ok, err := set.Lookup("slow")
		var fe *table.FieldError
		if !ok || r != slow || !errors.As(err, &fe) || *fe != (table.FieldError{Field: "burst", Message: table.MsgRefill}) {
			t.Errorf("Lookup(slow): got %+v, %v, %v; want the rule and burst: %s", r, ok, err, table.MsgRefill)
		}
		if _, ok, err := set.Lookup("nope"); ok || err != nil {
			t.Errorf("Lookup(nope): got %v, %v; want no rule", ok, err)
		}
	}
}

func mustPut(t *testing.T, st *Store, r Rule) *Set {
	t.Helper()
	set, err := st.Put(r)
	if err != nil {
		t.Fatal(err)
	}
	return set
}
