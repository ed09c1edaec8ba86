package journal

import (
	"errors"
	"fmt"
)

// Errors returned by the journal. Match them with errors.Is: the errors
// actually returned wrap them with the file, the byte offset or the size
// concerned.
var (
	// ErrLocked is returned by LockDir when another DirLock (in this process
	// or another one) holds the directory. The message names the directory
	// and the pid of the holder.
	ErrLocked = errors.New("journal: directory locked")

	// ErrCorrupt is returned by Open for damage that is not a torn tail:
	// a damaged record, header or sequence gap before the last segment,
	// damage in the last segment followed by a valid record, or a snapshot
	// that is invalid when the segments it replaced are gone.
	// The error is a *CorruptError naming the file and the byte offset.
	// Options.Repair cuts the journal at the damage instead.
	ErrCorrupt = errors.New("journal: damaged journal")

	// ErrTooLarge is returned by Append and SnapshotWriter.Append for a
	// payload that can never fit in one segment.
	ErrTooLarge = errors.New("journal: record too large")

	// ErrClosed is returned by the methods of a closed Journal, and by a
	// SnapshotWriter that was committed or aborted already or whose
	// journal was closed.
	ErrClosed = errors.New("journal: closed")

	// ErrSnapshotInProgress is returned by StartSnapshot while the
	// SnapshotWriter of an earlier call is neither committed nor aborted.
	ErrSnapshotInProgress = errors.New("journal: snapshot in progress")

	// ErrFormat is returned by Open for a segment or snapshot whose header
	// is whole but of a format version this build does not read (written
	// by a later release): it is neither read nor moved aside.
	ErrFormat = errors.New("journal: unknown file format")

	// ErrInvalidOptions is returned by Open and ParseSyncMode for options
	// out of their documented range.
	ErrInvalidOptions = errors.New("journal: invalid options")
)

// CorruptError describes mid-journal damage found by Open. It matches
// ErrCorrupt with errors.Is.
type CorruptError struct {
	Path   string // the damaged file
	Offset int64  // byte offset in Path where the damage starts
	Reason string // what is wrong there
}

// Error names the file, the offset and what is wrong there. How to start
// anyway (Options.Repair) is for the program that opened the journal to say,
// in its own terms.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("%v: %s at offset %d: %s", ErrCorrupt, e.Path, e.Offset, e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// errCannotFill says the system cannot map a segment's pages ahead of
// the records (populate).
var errCannotFill = errors.New("journal: mapping pages ahead is not supported")
