package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/edsrzf/mmap-go"
)

// Recovery reports what Open found and did.
type Recovery struct {
	Snapshot        string        // file name of the snapshot loaded, "" if none
	SnapshotRecords int           // records replayed from the snapshot
	SegmentRecords  int           // records replayed from segments (those after the snapshot)
	Segments        int           // segment files read and kept
	TornTails       int           // torn tails cut in the last segment (0 or 1 normally)
	BytesDropped    int64         // bytes cut from torn tails or moved aside by a repair
	Repaired        bool          // Options.Repair cut the journal at mid-journal damage
	Duration        time.Duration // time Open took
}

// Open creates dir if missing (0700), recovers the journal in it and calls
// replay, in order, for every record of the newest valid snapshot and then
// for every record of the segments after it (records with a sequence number
// not above the snapshot's are skipped). The payload passed to replay is
// only valid during the call; replay may be nil. If replay returns an
// error, Open stops and returns it wrapped. On any error the state that
// replay built must be discarded: Open may have replayed a prefix before
// finding mid-journal damage (ErrCorrupt).
//
// A torn tail of the last segment (damage with no valid record after it)
// is copied aside to a *.broken file and cut; mid-journal damage fails with
// ErrCorrupt (a *CorruptError) unless opts.Repair. The package
// documentation lists every rule. Open locks nothing: see LockDir.
//
// The Journal returned is ready to Append after the last valid record.
func Open(dir string, opts Options, replay func(payload []byte) error) (*Journal, Recovery, error) {
	if replay == nil {
		return OpenTails(dir, opts, nil)
	}
	return OpenTails(dir, opts, func(payload, _ []byte) error { return replay(payload) })
}

// OpenTails is Open for a journal whose records may carry tails
// (AppendTail): replay gets each record's tail as it is in the file, or
// nil if it has none (every record of a snapshot, and of a segment of
// format 1 or 2). A tail is not covered by its record's checksum: replay
// must check it (see AppendTail). The tail, like the payload, is only
// valid during the call.
func OpenTails(dir string, opts Options, replay func(payload, tail []byte) error) (*Journal, Recovery, error) {
	start := time.Now()
	c, err := opts.config()
	if err != nil {
		return nil, Recovery{}, err
	}
	if replay == nil {
		replay = func(_, _ []byte) error { return nil }
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, Recovery{}, fmt.Errorf("journal: open: %w", err)
	}
	r := &recoverer{dir: dir, c: c, replay: replay, lastLog: start}
	j, err := r.run()
	r.closeAll()
	r.rec.Duration = time.Since(start)
	if err != nil {
		return nil, r.rec, err
	}
	level := slog.LevelDebug
	if r.rec.SnapshotRecords+r.rec.SegmentRecords > 0 || r.rec.TornTails > 0 || r.rec.Repaired {
		level = slog.LevelInfo
	}
	c.log.Log(context.Background(), level, "journal: recovered", "dir", dir, "snapshot", r.rec.Snapshot,
		"snapshot_records", r.rec.SnapshotRecords, "segments", r.rec.Segments,
		"segment_records", r.rec.SegmentRecords, "seq", j.seq, "torn_tails", r.rec.TornTails,
		"bytes_dropped", r.rec.BytesDropped, "repaired", r.rec.Repaired, "duration", r.rec.Duration)
	return j, r.rec, nil
}

// dirFile is a segment or snapshot file and the sequence number in its name.
type dirFile struct {
	name string
	seq  uint64
}

// invalidSnapshot is a snapshot file that failed validation.
type invalidSnapshot struct {
	dirFile
	off    int64
	reason string
}

// scanned is a segment file opened (and mapped, unless empty or too large)
// by Open.
type scanned struct {
	segment
	size    int64
	end     int64  // offset after the last valid record
	last    uint64 // sequence number of the last valid record (first-1 if none)
	dataEnd int64  // offset after the last nonzero byte (>= end)
	issue   string // why the scan stopped at end other than a clean end of data
}

// recoverer is the state of one Open.
type recoverer struct {
	dir     string
	c       config
	replay  func(payload, tail []byte) error
	rec     Recovery
	lastLog time.Time

	segs  []dirFile // segment files, by sequence number
	snaps []dirFile // snapshot files, newest first
	tmps  []string

	snapSeq      uint64 // sequence number the loaded snapshot covers (0: none)
	invalidSnaps []invalidSnapshot
	staleSnaps   []string // older than the loaded snapshot

	covered  []dirFile  // segments the snapshot covers entirely
	opened   []*scanned // every segment opened, to close
	retained []*scanned // segments kept, in order
	tail     *scanned   // the last retained segment, if any
	tornTail bool       // tail is the last segment file (not a repair cut)
	aside    []dirFile  // whole segment files to move aside (or remove if all zero)
	keep     *scanned   // the segment that becomes Journal.cur
}

func (r *recoverer) run() (*Journal, error) {
	if err := r.list(); err != nil {
		return nil, err
	}
	if err := r.loadSnapshot(); err != nil {
		return nil, err
	}
	if err := r.scanSegments(); err != nil {
		return nil, err
	}
	if err := r.checkReach(); err != nil {
		return nil, err
	}
	if err := r.apply(); err != nil {
		return nil, err
	}
	return r.journal()
}

// list classifies the directory entries.
func (r *recoverer) list() error {
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return fmt.Errorf("journal: open: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			r.c.log.Warn("journal: ignoring foreign directory", "dir", r.dir, "name", name)
			continue
		}
		if seq, ok := parseName(name, segmentPrefix, segmentSuffix); ok {
			r.segs = append(r.segs, dirFile{name, seq})
		} else if seq, ok := parseName(name, snapshotPrefix, snapshotSuffix); ok {
			r.snaps = append(r.snaps, dirFile{name, seq})
		} else if strings.HasSuffix(name, tmpSuffix) {
			r.tmps = append(r.tmps, name)
		} else if !isBroken(name) && name != lockFileName {
			r.c.log.Warn("journal: ignoring foreign file", "dir", r.dir, "name", name)
		}
	}
	slices.SortFunc(r.segs, func(a, b dirFile) int { return cmpSeq(a.seq, b.seq) })
	slices.SortFunc(r.snaps, func(a, b dirFile) int { return cmpSeq(b.seq, a.seq) })
	return nil
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// progress logs recovery progress at most once a second.
func (r *recoverer) progress(file string) {
	n := r.rec.SnapshotRecords + r.rec.SegmentRecords
	if n%(1<<16) != 0 || time.Since(r.lastLog) < time.Second {
		return
	}
	r.lastLog = time.Now()
	r.c.log.Info("journal: recovering", "dir", r.dir, "file", file,
		"snapshot_records", r.rec.SnapshotRecords, "segment_records", r.rec.SegmentRecords)
}

// loadSnapshot replays the newest valid snapshot.
func (r *recoverer) loadSnapshot() error {
	for _, e := range r.snaps {
		if r.rec.Snapshot != "" {
			r.staleSnaps = append(r.staleSnaps, e.name)
			continue
		}
		path := filepath.Join(r.dir, e.name)
		s, off, reason, err := openSnapshot(path, e.seq)
		if err != nil {
			return err
		}
		if reason != "" {
			r.c.log.Warn("journal: ignoring invalid snapshot", "file", path, "offset", off, "reason", reason)
			r.invalidSnaps = append(r.invalidSnaps, invalidSnapshot{e, off, reason})
			continue
		}
		r.rec.Snapshot, r.snapSeq = e.name, e.seq
		err = s.each(func(p []byte) error {
			if err := r.replay(p, nil); err != nil {
				return err
			}
			r.rec.SnapshotRecords++
			r.progress(e.name)
			return nil
		})
		if cerr := s.close(); err == nil && cerr != nil {
			err = fmt.Errorf("journal: close %s: %w", path, cerr)
		}
		if err != nil {
			return fmt.Errorf("journal: replay %s record %d: %w", path, r.rec.SnapshotRecords+1, err)
		}
	}
	return nil
}

// openSegment opens and maps a segment file and checks its header. A
// non-empty reason says why it is not a usable segment.
func (r *recoverer) openSegment(e dirFile) (*scanned, string, error) {
	path := filepath.Join(r.dir, e.name)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, "", fmt.Errorf("journal: open: %w", err)
	}
	s := &scanned{segment: segment{name: e.name, path: path, f: f}}
	r.opened = append(r.opened, s)
	st, err := f.Stat()
	if err != nil {
		return nil, "", fmt.Errorf("journal: open: %w", err)
	}
	s.size = st.Size()
	switch {
	case s.size == 0:
		return s, "empty file", nil
	case s.size > MaxSegmentSize:
		s.dataEnd = s.size
		return s, fmt.Sprintf("file is %d bytes, larger than any segment (%d)", s.size, MaxSegmentSize), nil
	}
	s.m, err = mmap.MapRegion(f, int(s.size), mmap.RDWR, 0, 0)
	if err != nil {
		return nil, "", fmt.Errorf("journal: open: mmap %s: %w", path, err)
	}
	if v, ok := unknownVersion(s.m, segmentMagic, latestFormat); ok {
		return nil, "", fmt.Errorf("%w: %s is a segment of format version %d; this build reads versions %d to %d (a later release wrote it)",
			ErrFormat, path, v, formatVersion, latestFormat)
	}
	first, salt, reason := parseHeaderVersion(s.m, segmentMagic, latestFormat)
	if reason == "" {
		s.ver = version(s.m)
	}
	if reason == "" && first != e.seq {
		reason = fmt.Sprintf("header says first sequence number %d, the file name %d", first, e.seq)
	}
	if reason == "" && s.size < headerSize+frameHeaderSize {
		reason = fmt.Sprintf("file is %d bytes, too short for any record", s.size)
	}
	s.first, s.salt = first, saltCRC(salt)
	return s, reason, nil
}

// scanSegments validates the segments after the snapshot and replays their
// records, and decides what to cut.
func (r *recoverer) scanSegments() error {
	S := r.snapSeq
	k := 0
	if r.rec.Snapshot != "" {
		for i, e := range r.segs {
			if e.seq <= S+1 {
				k = i
			}
		}
		r.covered = r.segs[:k]
	}
	expect := S + 1 // the sequence number the next segment must start with
	var prev *scanned
	for i := k; i < len(r.segs); i++ {
		s, bad, err := r.openSegment(r.segs[i])
		if err != nil {
			return err
		}
		gap := false
		if bad == "" {
			switch {
			case s.first == 0:
				bad = "first sequence number 0 (sequence numbers start at 1)"
			case s.first > expect:
				gap = true
				bad = fmt.Sprintf("the segment starts at sequence number %d, but the journal before it ends at %d", s.first, expect-1)
			case prev != nil && s.first < expect:
				bad = fmt.Sprintf("the segment starts at sequence number %d, overlapping the previous one, which ends at %d", s.first, expect-1)
			}
		}
		if bad != "" {
			return r.damaged(i, s, prev, bad, gap, expect)
		}
		if prev != nil && prev.issue != "" {
			r.c.log.Warn("journal: ignoring bytes after the end of a segment (no record is missing: the next segment continues the sequence)",
				"file", prev.path, "offset", prev.end, "bytes", prev.dataEnd-prev.end, "reason", prev.issue)
		}
		if err := r.scan(s); err != nil {
			return err
		}
		r.retained = append(r.retained, s)
		prev = s
		expect = max(s.last+1, S+1)
	}
	if prev != nil {
		r.tail, r.tornTail = prev, true
		if prev.issue != "" {
			return r.damagedTail(prev)
		}
	}
	return nil
}

// damagedTail handles the last segment, t, whose scan stopped at damage: a
// torn tail, unless a valid record follows the damage (then it is
// mid-journal damage, and records acknowledged after it would be lost).
func (r *recoverer) damagedTail(t *scanned) error {
	off, seq, ok := validAfterIn(t.ver, t.m, t.end, t.dataEnd, t.last+1, t.salt)
	if !ok {
		return nil
	}
	d := &CorruptError{Path: t.path, Offset: t.end,
		Reason: fmt.Sprintf("%s (after sequence number %d), and a valid record (sequence number %d) follows at offset %d: the damage is not a torn tail",
			t.issue, t.last, seq, off)}
	if !r.c.repair {
		return d
	}
	r.c.log.Warn("journal: repairing mid-journal damage: cutting the journal there",
		"file", d.Path, "offset", d.Offset, "reason", d.Reason)
	r.rec.Repaired, r.tornTail = true, false
	return nil
}

// validAfter looks in b, at the frame offsets from base up to (not
// including) to, for a valid frame (checksum with salt, padding, bounds)
// whose sequence number fits there: at least next, the number due at base,
// and at most next plus the frames that fit between base and it. It
// returns the first one's offset and sequence number. A frame starts before
// the last nonzero byte of b, so to may be that byte's end.
func validAfter(b []byte, base, to int64, next uint64, salt uint32) (int64, uint64, bool) {
	size := int64(len(b))
	for off := align8(max(base, headerSize)); off < to && off+frameHeaderSize <= size; off += frameAlign {
		n := int64(le.Uint32(b[off:]))
		if n < frameHeaderSize || align8(n) > size-off {
			continue
		}
		// Cheap before the checksum: the sequence number must fit.
		seq := le.Uint64(b[off+8:])
		if seq < next || seq-next > uint64(off-base)/frameHeaderSize {
			continue
		}
		if _, st, _ := decodeFrame(b, off, salt); st == frameOK {
			return off, seq, true
		}
	}
	return 0, 0, false
}

// validAfterIn is validAfter for a segment of format ver.
func validAfterIn(ver uint32, b []byte, base, to int64, next uint64, salt uint32) (int64, uint64, bool) {
	switch ver {
	case segmentV2, segmentV3:
		return validAfter2(ver, b, base, to, next, salt)
	}
	return validAfter(b, base, to, next, salt)
}

// validAfter2 is validAfter for frames of format ver, 2 or 3, which may
// start at any byte and take at least minFrame2 bytes; of the sequence
// numbers that fit a place, only those whose low 16 bits match the frame's
// tag are tried.
func validAfter2(ver uint32, b []byte, base, to int64, next uint64, salt uint32) (int64, uint64, bool) {
	decode := decodeFrame2
	if ver == segmentV3 {
		decode = decodeFrame3
	}
	size := int64(len(b))
	var scratch [8]byte
	for off := max(base, headerSize); off < to && off+minFrame2 <= size; off++ {
		if b[off] == 0 {
			continue
		}
		l, k := binary.Uvarint(b[off:min(off+binary.MaxVarintLen32, size)])
		n := l - 1 // the payload length (at least: a format-3 tail comes on top)
		if ver == segmentV3 {
			n = l>>1 - 1
		}
		if k <= 0 || k != uvarintLen(l) || l == 0 || size-off-int64(k)-frame2Fixed < 0 || n > uint64(size-off-int64(k)-frame2Fixed) {
			continue
		}
		tag := le.Uint16(b[off+int64(k):])
		hi := next + uint64(off-base)/minFrame2
		for seq := next + uint64(tag-uint16(next)); seq <= hi; seq += 1 << 16 {
			if _, st, _ := decode(b, off, salt, seq, &scratch); st == frameOK {
				return off, seq, true
			}
		}
	}
	return 0, 0, false
}

// scan replays the records of s after the snapshot and finds where its
// valid records end.
func (r *recoverer) scan(s *scanned) error {
	off, next := int64(headerSize), s.first
	var scratch [8]byte
	for {
		var fr frame
		var st frameStatus
		var reason string
		switch s.ver {
		case segmentV3:
			fr, st, reason = decodeFrame3(s.m, off, s.salt, next, &scratch)
		case segmentV2:
			fr, st, reason = decodeFrame2(s.m, off, s.salt, next, &scratch)
		default:
			fr, st, reason = decodeFrame(s.m, off, s.salt)
		}
		if st == frameEnd {
			break
		}
		if st == frameBad {
			s.issue = reason
			break
		}
		if fr.seq != next {
			s.issue = fmt.Sprintf("record sequence number %d, want %d", fr.seq, next)
			break
		}
		if fr.seq > r.snapSeq {
			if err := r.replay(fr.payload, fr.tail); err != nil {
				return fmt.Errorf("journal: replay %s record at offset %d (seq %d): %w", s.path, off, fr.seq, err)
			}
			r.rec.SegmentRecords++
			r.progress(s.name)
		}
		next++
		off = fr.next
	}
	s.end, s.last = off, next-1
	s.dataEnd = segmentDataEnd(s.f, s.m, off)
	if s.issue == "" && s.dataEnd > s.end {
		s.issue = "nonzero bytes after the last record"
	}
	return nil
}

// damaged handles segment i (s, after prev) that cannot follow the journal
// so far, whose next sequence number is expect, for reason bad (gap:
// because records are missing before it).
func (r *recoverer) damaged(i int, s, prev *scanned, bad string, gap bool, expect uint64) error {
	last := i == len(r.segs)-1
	d := &CorruptError{Path: s.path, Reason: bad}
	valid := false
	if last && !gap && (prev == nil || prev.issue == "") {
		// The last segment is unusable and nothing before it is in doubt:
		// a torn (or empty) last segment, unless valid records follow its
		// bad header (checked with the salt the header holds).
		var off int64
		var seq uint64
		if s.m != nil && int64(len(s.m)) >= headerSize {
			// The version may be what is damaged: frames of any format count.
			salt, to := saltCRC(le.Uint64(s.m[24:])), dataEnd(s.m, headerSize)
			for _, v := range []uint32{formatVersion, segmentV2, segmentV3} {
				if off, seq, valid = validAfterIn(v, s.m, headerSize, to, r.segs[i].seq, salt); valid {
					break
				}
			}
		}
		if !valid {
			r.c.log.Warn("journal: last segment unusable, moving it aside", "file", s.path, "reason", bad)
			r.aside = append(r.aside, r.segs[i])
			r.rec.TornTails++
			if prev != nil {
				r.tail = prev
			}
			return nil
		}
		d.Reason = fmt.Sprintf("%s, and a valid record (sequence number %d) follows at offset %d: the damage is not a torn tail", bad, seq, off)
	}
	switch {
	case valid:
	case prev != nil && prev.issue != "":
		d = &CorruptError{Path: prev.path, Offset: prev.end,
			Reason: fmt.Sprintf("%s (after sequence number %d), and the next segment %s cannot follow: %s", prev.issue, prev.last, s.name, bad)}
	case gap && prev != nil:
		d = &CorruptError{Path: prev.path, Offset: prev.end,
			Reason: fmt.Sprintf("records %d to %d are missing: the journal ends at sequence number %d in this segment and the next one, %s, starts at %d",
				expect, s.first-1, expect-1, s.name, s.first)}
	case gap:
		if inv := r.invalidCovering(s.first - 1); inv != nil {
			d = &CorruptError{Path: filepath.Join(r.dir, inv.name), Offset: inv.off,
				Reason: fmt.Sprintf("invalid snapshot (%s), and the segments it replaced are gone: the next segment, %s, starts at sequence number %d",
					inv.reason, s.name, s.first)}
		} else if r.rec.Snapshot != "" {
			d.Reason = fmt.Sprintf("%s (snapshot %s covers up to %d): records are missing", bad, r.rec.Snapshot, r.snapSeq)
		} else {
			d.Reason = fmt.Sprintf("%s (no snapshot): records are missing", bad)
		}
	}
	if !r.c.repair {
		return d
	}
	r.c.log.Warn("journal: repairing mid-journal damage: cutting the journal there",
		"file", d.Path, "offset", d.Offset, "reason", d.Reason)
	r.rec.Repaired = true
	r.aside = append(r.aside, r.segs[i:]...)
	r.tail = prev
	return nil
}

// invalidCovering returns the newest invalid snapshot covering seq, if any.
func (r *recoverer) invalidCovering(seq uint64) *invalidSnapshot {
	for i := range r.invalidSnaps {
		if r.invalidSnaps[i].seq >= seq {
			return &r.invalidSnaps[i]
		}
	}
	return nil
}

// checkReach fails when an invalid snapshot covers more of the journal than
// what was recovered without it: its records would be lost.
func (r *recoverer) checkReach() error {
	reach := r.snapSeq
	if r.tail != nil {
		reach = max(reach, r.tail.last)
	}
	inv := r.invalidCovering(reach + 1)
	if inv == nil {
		return nil
	}
	d := &CorruptError{Path: filepath.Join(r.dir, inv.name), Offset: inv.off,
		Reason: fmt.Sprintf("invalid snapshot (%s) covering up to sequence number %d, but the journal without it ends at %d",
			inv.reason, inv.seq, reach)}
	if !r.c.repair {
		return d
	}
	r.c.log.Warn("journal: repairing: giving up the records of an invalid snapshot",
		"file", d.Path, "offset", d.Offset, "reason", d.Reason)
	r.rec.Repaired = true
	return nil
}

// apply makes the directory match the recovery: segments moved aside, the
// tail cut, covered and temporary files removed. Nothing is changed before
// the recovery is known to succeed.
func (r *recoverer) apply() error {
	changed := false
	for _, e := range r.aside {
		if err := r.setAside(e); err != nil {
			return err
		}
		changed = true
	}
	if t := r.tail; t != nil && t.last < r.snapSeq {
		// Every record of the tail is in the snapshot and the journal goes
		// on at snapSeq+1, which cannot follow them in this file.
		r.covered = append(r.covered, dirFile{t.name, t.first})
		r.retained = r.retained[:len(r.retained)-1]
		r.tail = nil
	}
	if t := r.tail; t != nil && t.dataEnd > t.end {
		if err := r.cut(t); err != nil {
			return err
		}
		changed = true
	}
	for _, e := range r.covered {
		r.remove(e.name, "segment covered by snapshot "+r.rec.Snapshot)
		changed = true
	}
	for _, name := range r.staleSnaps {
		r.remove(name, "snapshot older than "+r.rec.Snapshot)
		changed = true
	}
	for _, inv := range r.invalidSnaps {
		p, err := moveAside(r.dir, inv.name)
		if err != nil {
			return fmt.Errorf("journal: move invalid snapshot %s aside: %w", inv.name, err)
		}
		r.c.log.Warn("journal: invalid snapshot moved aside", "file", inv.name, "to", p)
		changed = true
	}
	for _, name := range r.tmps {
		r.remove(name, "temporary file")
		changed = true
	}
	// Made by hand or by an older version, the directory and the files
	// kept may let other users read the ids in them.
	private := []string{r.dir}
	for _, s := range r.retained {
		private = append(private, s.path)
	}
	if r.rec.Snapshot != "" {
		private = append(private, filepath.Join(r.dir, r.rec.Snapshot))
	}
	for _, p := range private {
		if err := restrict(p); err != nil {
			return fmt.Errorf("journal: open: restrict permissions: %w", err)
		}
	}
	if changed && r.c.sync != SyncNone {
		if err := syncDir(r.dir); err != nil {
			return fmt.Errorf("journal: open: fsync %s: %w", r.dir, err)
		}
	}
	return nil
}

// setAside moves a whole segment file aside as evidence, or removes it if it
// holds nothing but zeros.
func (r *recoverer) setAside(e dirFile) error {
	path := filepath.Join(r.dir, e.name)
	n, err := fileDataEnd(path)
	if err != nil {
		return fmt.Errorf("journal: open: %w", err)
	}
	r.rec.BytesDropped += n
	if n == 0 {
		r.c.log.Warn("journal: removing an all-zero segment file", "file", path)
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("journal: open: %w", err)
		}
		return nil
	}
	p, err := moveAside(r.dir, e.name)
	if err != nil {
		return fmt.Errorf("journal: open: move %s aside: %w", path, err)
	}
	r.c.log.Warn("journal: segment moved aside", "file", path, "to", p, "bytes_dropped", n)
	return nil
}

// fileDataEnd returns the offset after the last nonzero byte of the file (its
// size if it is too large to be a segment).
func fileDataEnd(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 || st.Size() > MaxSegmentSize {
		return st.Size(), err
	}
	m, err := mmap.MapRegion(f, int(st.Size()), mmap.RDONLY, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("mmap %s: %w", path, err)
	}
	n := dataEnd(m, 0)
	return n, m.Unmap()
}

// cut copies the bytes of t after its last valid record aside and zeroes
// them, so that appends continue right after that record.
func (r *recoverer) cut(t *scanned) error {
	dropped := t.dataEnd - t.end
	durable := r.c.sync != SyncNone
	p, err := copyAside(r.dir, t.name, t.m[t.end:t.dataEnd], durable)
	if err != nil {
		return fmt.Errorf("journal: open: copy the damaged tail of %s aside: %w", t.path, err)
	}
	clear(t.m[t.end:t.dataEnd])
	if from := t.end &^ int64(os.Getpagesize()-1); durable {
		if err := r.c.msync(t.m[from:t.dataEnd]); err != nil {
			return fmt.Errorf("journal: open: msync %s bytes [%d, %d): %w", t.path, from, t.dataEnd, err)
		}
	}
	r.rec.BytesDropped += dropped
	msg := "journal: torn tail cut"
	if r.tornTail {
		r.rec.TornTails++
	} else {
		msg = "journal: damaged segment cut (repair)"
	}
	r.c.log.Warn(msg, "file", t.path, "offset", t.end, "bytes_dropped", dropped, "reason", t.issue, "evidence", p)
	return nil
}

// remove removes a file that recovery made redundant; a failure is logged
// only (the next Open tries again).
func (r *recoverer) remove(name, why string) {
	path := filepath.Join(r.dir, name)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.c.log.Warn("journal: could not remove a redundant file", "file", path, "why", why, "err", err)
		return
	}
	r.c.log.Info("journal: removed a redundant file", "file", path, "why", why)
}

// journal builds the Journal from the recovered state.
func (r *recoverer) journal() (*Journal, error) {
	j := &Journal{
		dir:        r.dir,
		c:          r.c,
		pageSize:   int64(os.Getpagesize()),
		maxPayload: r.c.maxPayload(),
		seq:        r.snapSeq,
		epoch:      1,
		tailLow:    noLow,
	}
	r.rec.Segments = len(r.retained)
	if t := r.tail; t != nil {
		j.seq = max(j.seq, t.last)
		switch err := r.c.reserve(t.f, t.size); {
		case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
			r.c.log.Warn("journal: no space to make sure the last segment is allocated; appends start a new segment",
				"file", t.path, "err", err)
		case err != nil:
			return nil, fmt.Errorf("journal: open: %w", err)
		default:
			r.keep = t
			j.cur, j.off = &t.segment, t.end
		}
	}
	for _, s := range r.retained {
		if r.c.sync != SyncNone && s != r.keep {
			if err := s.f.Sync(); err != nil {
				return nil, fmt.Errorf("journal: open: fsync %s: %w", s.path, err)
			}
		}
		if s != r.keep {
			j.segs = append(j.segs, segmentInfo{name: s.name, first: s.first, bytes: s.end - headerSize})
			j.closedBytes.Add(s.end - headerSize)
		}
	}
	if r.rec.Snapshot != "" {
		j.snaps = []string{r.rec.Snapshot}
	}
	// j.synced is 0: the first sync covers what was recovered, too.
	if r.c.sync == SyncInterval || r.c.rollAhead {
		j.stop, j.done, j.syncReq = make(chan struct{}), make(chan struct{}), make(chan chan struct{})
		if r.c.rollAhead {
			j.wake = make(chan struct{}, 1)
			if j.cur != nil {
				j.poke()
			}
		}
		go j.runSyncer()
	}
	return j, nil
}

// closeAll unmaps and closes every segment Open opened but the one kept.
func (r *recoverer) closeAll() {
	for _, s := range r.opened {
		if s != r.keep {
			_ = s.close()
		}
	}
}
