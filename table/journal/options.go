package journal

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/edsrzf/mmap-go"
)

// SyncMode says when the bytes of appended records are forced to stable
// storage (msync). It bounds what a power loss may cost; a crash of the
// process alone (kill -9) loses nothing that Append accepted in any mode,
// because the records live in the shared page cache.
type SyncMode int

const (
	// SyncNone leaves flushing to the kernel: records survive kill -9 but
	// not power loss. Segment rolls and Close do not msync either.
	SyncNone SyncMode = iota + 1
	// SyncInterval msyncs, every Options.SyncInterval, the records of the
	// batches committed so far, from a background goroutine. A power loss
	// may cost about one interval of committed batches. Segment rolls and
	// Close msync. This is the default.
	SyncInterval
	// SyncAlways makes Commit msync every byte written since the previous
	// sync before it returns: one msync per batch (group commit). A batch
	// whose Commit returned nil survives power loss.
	SyncAlways
)

// ParseSyncMode parses "none", "interval" or "always" (the --journal-sync
// flag values). The error lists the valid values and matches
// ErrInvalidOptions.
func ParseSyncMode(s string) (SyncMode, error) {
	for m := SyncNone; m <= SyncAlways; m++ {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown sync mode %q (valid: none, interval, always)", ErrInvalidOptions, s)
}

// String returns "none", "interval" or "always", the form ParseSyncMode
// reads, or "SyncMode(n)" for a value out of range.
func (m SyncMode) String() string {
	switch m {
	case SyncNone:
		return "none"
	case SyncInterval:
		return "interval"
	case SyncAlways:
		return "always"
	}
	return fmt.Sprintf("SyncMode(%d)", int(m))
}

// Default values of Options fields left zero, and the limits of
// SegmentSize.
const (
	// DefaultSyncInterval is the msync period of SyncInterval mode.
	DefaultSyncInterval = 100 * time.Millisecond
	// DefaultSegmentSize is the size of a segment file: 16 MiB.
	DefaultSegmentSize = 16 << 20
	// MinSegmentSize is the smallest valid Options.SegmentSize: 64 KiB.
	MinSegmentSize = 64 << 10
	// MaxSegmentSize is the largest valid Options.SegmentSize: 1 GiB. No
	// file larger than this is ever read as a segment.
	MaxSegmentSize = 1 << 30
	// SegmentOverhead is what a segment holds besides one record's payload
	// (the segment header and a frame header): a payload of up to
	// SegmentSize - SegmentOverhead bytes fits in a segment; a larger one is
	// ErrTooLarge.
	SegmentOverhead = headerSize + frameHeaderSize
)

// Options configures a Journal. The zero value is valid: interval sync every
// 100ms, 16 MiB segments, no repair, no logging.
type Options struct {
	// Sync says when records are msynced; zero means SyncInterval.
	Sync SyncMode
	// SyncInterval is the period of the background msync in SyncInterval
	// mode, and of the background passes of a SyncNone journal with
	// RollAhead (see the package documentation, "Sync modes and sync
	// errors"); zero means DefaultSyncInterval.
	SyncInterval time.Duration
	// SegmentSize is the size in bytes of each segment file, header
	// included; zero means DefaultSegmentSize. It must be a multiple of the
	// page size, at least MinSegmentSize and at most MaxSegmentSize. A
	// segment created with another size is read (and appended to, if it
	// is the last one) at its own size.
	SegmentSize int64
	// Repair makes Open cut the journal at mid-journal damage instead of
	// failing with ErrCorrupt: the valid prefix is kept, the damaged rest
	// of the segment is copied aside to a *.broken file and every later
	// segment is renamed to *.broken.
	Repair bool
	// RollAhead has a background goroutine (then started in every sync
	// mode) create and allocate the next segment while the current one
	// fills, and msync and close a full segment after the roll, so that an
	// Append that rolls to a segment made ahead only stamps its header and
	// renames it into place. A failed creation ahead is not reported: the
	// roll then creates the segment itself, and fails as it would without
	// RollAhead.
	RollAhead bool
	// SegmentFormat is the format of the segments this journal creates: 1
	// (zero means 1), whose frames take 16 bytes and an alignment to 8 besides
	// their payload, 2, whose frames take 7 to 11, or 3, frames of 7 to 11
	// bytes that may carry a tail (AppendTail; doc.go specifies all
	// three). Open reads segments of every format, whatever this says, and
	// appends to the last one in its own format.
	SegmentFormat int
	// Logger receives what Open finds and does (progress every second of a
	// long recovery, torn tails with file, offset and bytes dropped,
	// repairs, invalid snapshots, foreign files) and the journal's rare
	// warnings; nil discards.
	Logger *slog.Logger

	// hooks replaces the salt source, msync, fallocate and a snapshot's
	// rename and removals in tests.
	hooks *testHooks
}

// testHooks lets the package's tests fix salts (golden files), count or fail
// msyncs and fail fallocate (of new segments, or reserve of the recovered
// last one). A nil field means the real thing.
type testHooks struct {
	salt      func() uint64
	msync     func(b []byte) error
	fallocate func(f *os.File, size int64) error
	reserve   func(f *os.File, size int64) error
	// syncPass, if set, is called by the background syncer after each pass
	// that called msync, with the pass's result.
	syncPass func(err error)
	// rename and remove replace os.Rename and os.Remove for a snapshot's
	// commit: its rename into place, and the removal of the files it
	// replaces.
	rename func(oldpath, newpath string) error
	remove func(path string) error
}

// config is Options validated, with defaults and hooks filled in.
type config struct {
	sync        SyncMode
	interval    time.Duration
	segmentSize int64
	repair      bool
	rollAhead   bool
	format      uint32 // of the segments created
	log         *slog.Logger
	salt        func() uint64
	msync       func(b []byte) error
	fallocate   func(f *os.File, size int64) error
	reserve     func(f *os.File, size int64) error
	syncPass    func(err error)
	rename      func(oldpath, newpath string) error
	remove      func(path string) error
}

func (o Options) config() (config, error) {
	c := config{
		sync:        o.Sync,
		interval:    o.SyncInterval,
		segmentSize: o.SegmentSize,
		repair:      o.Repair,
		rollAhead:   o.RollAhead,
		log:         o.Logger,
		salt:        randomSalt,
		msync:       func(b []byte) error { return mmap.MMap(b).Flush() },
		fallocate:   allocate,
		reserve:     reserve,
		rename:      os.Rename,
		remove:      os.Remove,
	}
	if c.sync == 0 {
		c.sync = SyncInterval
	}
	if c.sync < SyncNone || c.sync > SyncAlways {
		return c, fmt.Errorf("%w: Sync %v (valid: SyncNone, SyncInterval, SyncAlways)", ErrInvalidOptions, c.sync)
	}
	switch o.SegmentFormat {
	case 0, formatVersion:
		c.format = formatVersion
	case segmentV2, segmentV3:
		c.format = uint32(o.SegmentFormat)
	default:
		return c, fmt.Errorf("%w: SegmentFormat %d (valid: 1, 2, 3)", ErrInvalidOptions, o.SegmentFormat)
	}
	if c.interval == 0 {
		c.interval = DefaultSyncInterval
	}
	if c.interval < 0 {
		return c, fmt.Errorf("%w: SyncInterval %v is negative", ErrInvalidOptions, c.interval)
	}
	if c.segmentSize == 0 {
		c.segmentSize = DefaultSegmentSize
	}
	if page := int64(os.Getpagesize()); c.segmentSize < MinSegmentSize || c.segmentSize > MaxSegmentSize || c.segmentSize%page != 0 {
		return c, fmt.Errorf("%w: SegmentSize %d (want a multiple of the page size %d in [%d, %d])",
			ErrInvalidOptions, c.segmentSize, page, MinSegmentSize, MaxSegmentSize)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if h := o.hooks; h != nil {
		if h.salt != nil {
			c.salt = h.salt
		}
		if h.msync != nil {
			c.msync = h.msync
		}
		if h.fallocate != nil {
			c.fallocate = h.fallocate
		}
		if h.reserve != nil {
			c.reserve = h.reserve
		}
		c.syncPass = h.syncPass
		if h.rename != nil {
			c.rename = h.rename
		}
		if h.remove != nil {
			c.remove = h.remove
		}
	}
	return c, nil
}

// maxPayload is the largest payload whose frame fits in a fresh segment.
func (c *config) maxPayload() int {
	return int(c.segmentSize - SegmentOverhead)
}

// randomSalt draws a segment or snapshot salt from crypto/rand.
func randomSalt() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	return binary.LittleEndian.Uint64(b[:])
}
