package journal

import (
	"errors"
	"testing"
)

// TestCorruptErrorSaysWhatAndWhere: a CorruptError names the damage and
// matches ErrCorrupt; how to start anyway is for the program that opened the
// journal to say (the daemon names its flag), not for the journal.
func TestCorruptErrorSaysWhatAndWhere(t *testing.T) {
	t.Parallel()
	err := error(&CorruptError{Path: "/data/shard-000/seg-0000000000000001.log", Offset: 4136, Reason: "checksum mismatch"})
	const want = "journal: damaged journal: /data/shard-000/seg-0000000000000001.log at offset 4136: checksum mismatch"
	if got := err.Error(); got != want {
		t.Errorf("Error():\ngot  %q\nwant %q", got, want)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("errors.Is(%v, ErrCorrupt) = false, want true", err)
	}
}
