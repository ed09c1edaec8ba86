package secret

import "testing"

// TestIn: a given secret matches when it equals any of the secrets, byte
// for byte; a prefix, an extension, another case or an empty secret does
// not.
func TestIn(t *testing.T) {
	t.Parallel()
	secrets := []string{"old-secret", "", "new secret"}
	for _, tt := range []struct {
		given string
		want  bool
	}{
		{"old-secret", true},
		{"new secret", true},
		{"", false},
		{"old-secre", false},
		{"old-secret ", false},
		{"OLD-SECRET", false},
		{"other", false},
	} {
		if got := In([]byte(tt.given), secrets); got != tt.want {
			t.Errorf("In(%q): got %v, want %v", tt.given, got, tt.want)
		}
	}
	if In([]byte("x"), nil) || In(nil, nil) || In(nil, []string{""}) {
		t.Error("In with no secret (or only an empty one): got true")
	}
}

// TestFixed: a fixed source returns its one secret, every time.
func TestFixed(t *testing.T) {
	t.Parallel()
	f := Fixed("s3cret")
	for range 2 {
		if got := f(); len(got) != 1 || got[0] != "s3cret" {
			t.Fatalf("Fixed: got %q, want [s3cret]", got)
		}
	}
	if !In([]byte("s3cret"), f()) || In([]byte("other"), f()) {
		t.Error("In with a fixed source: wrong answer")
	}
}
