package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edsrzf/mmap-go"
)

// A Journal is an append-only log of opaque records in a directory of
// memory-mapped segment files, with snapshots. Open recovers it.
//
// Append, Commit, Sync, Size, Seq, StartSnapshot and Close must be called
// from one goroutine at a time (the owner); the Journal's own background
// syncer and a SnapshotWriter on another goroutine are safe alongside them.
type Journal struct {
	dir        string
	c          config
	pageSize   int64
	maxPayload int

	// Owner state: read and written by the owner goroutine only, except
	// cur, which the syncer reads under syncMu (the owner writes it only
	// under syncMu).
	cur      *segment            // where Append writes; nil: the next Append creates one
	off      int64               // write offset in cur
	seq      uint64              // last record appended or recovered
	closed   bool                // written under mu, so SnapshotWriter.Commit can read it
	scratch  [12]byte            // frameCRC input, kept here so Append does not allocate
	scratch2 [frame2Scratch]byte // putFrame2's and putFrame3's
	epoch    uint64              // see Epoch; from 1

	// closedBytes is the Size share of the segments before cur.
	closedBytes atomic.Int64

	// mu guards the directory listing shared with SnapshotWriter.Commit.
	// Append takes it only on a roll.
	mu           sync.Mutex
	segs         []segmentInfo // closed segments, oldest first
	snaps        []string      // snapshot files on disk
	snapshotting bool
	committing   sync.WaitGroup // Commits past their check of closed; Close waits for them

	// syncMu serialises msyncs of cur and the swap of cur on a roll.
	syncMu sync.Mutex
	synced int64 // offset in cur up to which msync succeeded; under syncMu
	// pub is the write offset in cur Commit published last, for the
	// background goroutine: SyncInterval, and SyncNone with RollAhead.
	pub atomic.Int64
	// tailLow is the offset of the first tail in cur (noLow if none),
	// written under syncMu: every msync of cur starts at or below it, so
	// that a tail rewritten anywhere in cur is synced with the records
	// (see syncToLocked).
	tailLow int64

	// Background sync errors, see noteSync and takeSyncErr. pending is
	// syncErr != nil, set and cleared under errMu, so that a Commit with no
	// error to report reads it alone and takes no lock.
	errMu           sync.Mutex
	pending         atomic.Bool
	syncErr         error // first error not yet cleared
	syncErrMore     int   // further failures since syncErr
	syncErrReported bool  // a Commit has returned syncErr
	syncErrHealed   bool  // an msync succeeded after syncErr

	// RollAhead state, under syncMu.
	next     *segment  // made ahead under nextSegmentName with first 0; nil if none
	retiring []retired // full segments the background has yet to close
	dirDirty bool      // a segment was renamed into place since the last fsync of dir

	stop       chan struct{}      // closed by Close; nil without a background goroutine
	done       chan struct{}      // closed by the background goroutine when it exits
	syncReq    chan chan struct{} // tests: run a background pass now
	wake       chan struct{}      // RollAhead: a roll asks for a pass (capacity 1)
	prepFailed bool               // background only: the last creation ahead failed
	prepared   uint64             // background only: segments made ahead so far
	// Background only, see fillAhead: the segment being filled, how far,
	// and the position published at the last pass; the segment made ahead
	// filled last, and how far; noFill: the kernel cannot.
	fillSeg, fillNext           *segment
	filled, fillEnd, nextFilled int64
	noFill                      bool
	// Background only, SyncNone: the segment whose written pages release
	// takes out of the page tables, and up to where it has (see
	// releaseWritten).
	relSeg   *segment
	released int64
}

// retired is a full segment after a roll: written up to end, msynced up to
// synced.
type retired struct {
	seg    *segment
	end    int64
	synced int64
}

// nextSegmentName is the temporary name of the n-th segment made ahead
// (Open removes it with every *.tmp file). Each has its own: the roll that
// takes one renames it after the background may have started the next.
func nextSegmentName(n uint64) string {
	return fmt.Sprintf("%snext-%d%s%s", segmentPrefix, n, segmentSuffix, tmpSuffix)
}

// segment is one mapped segment file.
type segment struct {
	name  string
	path  string
	f     *os.File
	m     mmap.MMap // nil if the file could not be mapped
	first uint64    // sequence number of its first record
	salt  uint32    // saltCRC of its header salt
	raw   uint64    // its header salt as stored
	ver   uint32    // its format: formatVersion, segmentV2 or segmentV3
}

// frameSize is the size of the frame at offset off of a payload of n bytes
// with a tail of words 8-byte words (format 3 only) in s (format 1 if s is
// nil).
func (s *segment) frameSize(off int64, n, words int) int64 {
	switch {
	case s == nil:
		return frameSize(n)
	case s.ver == segmentV3:
		return frame3Size(off, n, words)
	case s.ver == segmentV2:
		return frame2Size(n)
	}
	return frameSize(n)
}

// segmentInfo describes a closed segment.
type segmentInfo struct {
	name  string
	first uint64
	bytes int64 // record bytes, for Size
}

func (s *segment) close() error {
	var err error
	if s.m != nil {
		err = s.m.Unmap()
	}
	if s.f != nil {
		if cerr := s.f.Close(); err == nil {
			err = cerr
		}
		s.f = nil
	}
	return err
}

// createSegment creates, allocates, maps and stamps a new segment file
// whose first record will have sequence number first. It is built under a
// temporary name and renamed into place, so a crash never leaves a
// half-made segment (and an existing empty segment of that name is
// replaced atomically).
func createSegment(c *config, dir string, first uint64) (*segment, error) {
	name := segmentName(first)
	path := filepath.Join(dir, name)
	s, err := makeSegment(c, path+tmpSuffix, first)
	if err != nil {
		return nil, fmt.Errorf("journal: create segment %s: %w", path, err)
	}
	s.name, s.path = name, path
	if err := os.Rename(path+tmpSuffix, path); err != nil {
		_ = s.close()
		_ = os.Remove(path + tmpSuffix)
		return nil, fmt.Errorf("journal: create segment %s: rename: %w", path, err)
	}
	if c.sync != SyncNone {
		if err := syncDir(dir); err != nil {
			// The file is a valid empty segment; without a durable
			// directory entry it is not worth keeping.
			_ = s.close()
			_ = os.Remove(path)
			return nil, fmt.Errorf("journal: create segment %s: fsync directory: %w", path, err)
		}
	}
	return s, nil
}

// makeSegment creates, allocates, maps and stamps (with first) a segment
// file at tmp, fsynced unless SyncNone; on an error it leaves no file.
func makeSegment(c *config, tmp string, first uint64) (*segment, error) {
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, filePerm)
	if err != nil {
		return nil, err
	}
	s := &segment{name: filepath.Base(tmp), path: tmp, f: f, first: first, ver: c.format}
	fail := func(what string, err error) (*segment, error) {
		_ = s.close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := c.fallocate(f, c.segmentSize); err != nil {
		return fail(fmt.Sprintf("allocate %d bytes", c.segmentSize), err)
	}
	m, err := mmap.MapRegion(f, int(c.segmentSize), mmap.RDWR, 0, 0)
	if err != nil {
		return fail("mmap", err)
	}
	s.m = m
	s.raw = c.salt()
	putHeaderVersion(m[:headerSize], segmentMagic, c.format, first, s.raw)
	s.salt = saltCRC(s.raw)
	if c.sync != SyncNone {
		if err := f.Sync(); err != nil {
			return fail("fsync", err)
		}
	}
	return s, nil
}

// Append writes one record holding payload after the last one, into the
// mapped current segment, and gives it the next sequence number. When the
// record does not fit, Append first rolls to a new segment: it msyncs the
// whole old segment (unless SyncNone), then creates, allocates and maps the
// new one. On an error (ENOSPC from the allocation, say; match it with
// errors.Is) nothing of the record is visible and the journal stays usable:
// a later Append tries the roll again. A payload that can never fit in a
// segment gives ErrTooLarge. Append does not allocate, and does not sync:
// Commit ends a batch.
func (j *Journal) Append(payload []byte) error {
	_, err := j.appendTail(payload, 0)
	return err
}

// AppendTail is Append for a record followed by a tail of words 8-byte
// words (1 to 255), zeros at first, that the caller may then rewrite in
// place (Tail) as long as the record is in the current segment: what a
// record says of a thing that changes often (a counter), so that a change
// costs a few stores instead of a record. The tail starts at a multiple of
// 32 in the file, so that an aligned 8-byte store to it never tears (a
// process killed leaves a word old or new), and no 32-byte piece of it at
// a multiple of 32 is split between two disk sectors; it is not covered by the
// record's checksum, so recovery hands it to the replay as the file holds
// it, and the caller's replay must be able to tell a tail written whole
// from one cut by a crash (a check of its own; see table's tail slots).
// Rewrites are synced like records: by the next background msync after
// the Commit that ends their batch (SyncInterval), by that Commit
// (SyncAlways), by Sync: every msync of a segment with a tail starts at its
// first tail's page. It returns the epoch and position that Tail
// takes. In a segment of format 1 or 2 (the last one recovered, if
// Options.SegmentFormat was lower when it was made) the record is
// appended without a tail, and pos is 0.
func (j *Journal) AppendTail(payload []byte, words int) (epoch uint64, pos uint32, err error) {
	if words < 1 || words > maxTailWords {
		return 0, 0, fmt.Errorf("%w: a tail of %d words (1 to %d)", ErrInvalidOptions, words, maxTailWords)
	}
	pos, err = j.appendTail(payload, words)
	return j.epoch, pos, err
}

// appendTail is Append, with a tail of words words if words > 0 and the
// current segment is of format 3; it returns the tail's offset, or 0.
func (j *Journal) appendTail(payload []byte, words int) (uint32, error) {
	if j.closed {
		return 0, ErrClosed
	}
	// A tail takes its words and at most tailAlign bytes more (its word
	// count and padding) than a frame without one.
	if most := j.maxPayload - 8*words - tailAlign*min(words, 1); len(payload) > most {
		with := ""
		if words > 0 {
			with = fmt.Sprintf(" with a tail of %d words", words)
		}
		return 0, fmt.Errorf("%w: a %d-byte payload (at most %d fit in a %d-byte segment%s)",
			ErrTooLarge, len(payload), most, j.c.segmentSize, with)
	}
	want := words
	if j.cur != nil && j.cur.ver != segmentV3 {
		words = 0
	}
	size := j.cur.frameSize(j.off, len(payload), words)
	if j.cur == nil || j.off+size > int64(len(j.cur.m)) {
		if err := j.roll(); err != nil {
			return 0, err
		}
		if words = want; j.cur.ver != segmentV3 {
			words = 0
		}
		size = j.cur.frameSize(j.off, len(payload), words)
	}
	// Beyond j.off a segment is all zeros: the padding is in place.
	b := j.cur.m[j.off : j.off+size]
	switch j.cur.ver {
	case segmentV3:
		putFrame3(b, j.cur.salt, &j.scratch2, j.seq+1, payload, words)
	case segmentV2:
		putFrame2(b, j.cur.salt, &j.scratch2, j.seq+1, payload)
	default:
		putFrame(b, j.cur.salt, &j.scratch, j.seq+1, payload)
	}
	j.off += size
	j.seq++
	if words == 0 {
		return 0, nil
	}
	pos := j.off - 8*int64(words)
	if j.tailLow == noLow { // once a segment
		j.syncMu.Lock()
		j.tailLow = pos
		j.syncMu.Unlock()
	}
	return uint32(pos), nil
}

// Tail returns the tail of words words at pos that AppendTail made in
// epoch, for the caller to rewrite in place, or nil if it can no longer be
// rewritten: the journal rolled to a new segment since (Epoch changed), or
// is closed, or pos and words name no tail the current segment can hold.
// The rewrite is part of the batch the next Commit ends. Tail does not
// allocate; it is for the owner goroutine, like Append.
func (j *Journal) Tail(epoch uint64, pos uint32, words int) []byte {
	p, end := int64(pos), int64(pos)+8*int64(words)
	if epoch != j.epoch || j.closed || p < headerSize || p%tailAlign != 0 || words < 1 || words > maxTailWords || end > j.off {
		return nil
	}
	return j.cur.m[p:end:end]
}

// Epoch counts the segments this Journal has written to: it changes at
// every roll (StartSnapshot's included), after which no earlier tail can
// be rewritten.
func (j *Journal) Epoch() uint64 { return j.epoch }

// noLow is Journal.tailLow when cur has no tail.
const noLow = int64(1<<63 - 1)

// putFrame writes the frame of a record into b, which is zero beyond the
// payload. The length word goes last: until it is stored the frame reads as
// the end of data. (frameCRC is a call that may read b, so the compiler
// cannot move that store before it.)
func putFrame(b []byte, salt uint32, scratch *[12]byte, seq uint64, payload []byte) {
	n := uint32(frameHeaderSize + len(payload))
	le.PutUint64(b[8:], seq)
	copy(b[frameHeaderSize:], payload)
	le.PutUint32(b[4:], frameCRC(salt, scratch, n, seq, payload))
	le.PutUint32(b[0:], n)
}

// roll makes a new, empty segment current, for records from j.seq+1 on.
func (j *Journal) roll() error {
	if j.c.rollAhead && j.cur != nil {
		return j.rollAhead()
	}
	old, oldOff := j.cur, j.off
	if old != nil && j.c.sync != SyncNone {
		if err := j.syncNow(); err != nil {
			return err
		}
	}
	seg, err := createSegment(&j.c, j.dir, j.seq+1)
	if err != nil {
		return err
	}
	j.syncMu.Lock()
	j.cur, j.off, j.synced = seg, headerSize, headerSize
	j.pub.Store(headerSize)
	j.tailLow = noLow // old's tails: msynced above, or never (SyncNone)
	j.syncMu.Unlock()
	j.epoch++
	j.closeOut(old, oldOff, seg)
	if old == nil {
		j.poke() // RollAhead: make the next one ahead
		return nil
	}
	if err := old.close(); err != nil {
		j.c.log.Warn("journal: closing a full segment failed", "file", old.path, "err", err)
	}
	return nil
}

// rollAhead is roll with Options.RollAhead, from a current segment: it
// takes the segment made ahead (creating one if there is none), stamps it
// and renames it into place, and leaves the old segment's msync and close
// to the background goroutine (or to the next Commit, with SyncAlways).
func (j *Journal) rollAhead() error {
	first := j.seq + 1
	j.syncMu.Lock()
	seg := j.next
	j.next = nil
	j.syncMu.Unlock()
	synced := int64(0) // a stamp made now is msynced with the first records
	if seg == nil {
		var err error
		if seg, err = createSegment(&j.c, j.dir, first); err != nil {
			return err
		}
		synced = headerSize
	} else {
		tmp := seg.path
		seg.name, seg.path, seg.first = segmentName(first), filepath.Join(j.dir, segmentName(first)), first
		putHeaderVersion(seg.m[:headerSize], segmentMagic, version(seg.m), first, seg.raw)
		if err := os.Rename(tmp, seg.path); err != nil {
			_ = seg.close()
			_ = os.Remove(tmp)
			return fmt.Errorf("journal: create segment %s: rename: %w", seg.path, err)
		}
	}
	old, oldOff := j.cur, j.off
	j.syncMu.Lock()
	// old's tails are msynced with it, from the first one on.
	j.retiring = append(j.retiring, retired{seg: old, end: oldOff, synced: min(j.synced, j.tailLow)})
	j.tailLow = noLow
	j.cur, j.off, j.synced = seg, headerSize, synced
	j.dirDirty = j.dirDirty || synced == 0 && j.c.sync != SyncNone
	j.pub.Store(headerSize)
	j.syncMu.Unlock()
	j.epoch++
	j.closeOut(old, oldOff, seg)
	j.poke()
	return nil
}

// poke asks the background goroutine of a RollAhead journal for a pass.
func (j *Journal) poke() {
	select {
	case j.wake <- struct{}{}:
	default: // none, or a pass is due already
	}
}

// closeOut moves old, written up to oldOff and replaced by seg, to the
// closed segments.
func (j *Journal) closeOut(old *segment, oldOff int64, seg *segment) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if n := len(j.segs); n > 0 && j.segs[n-1].first == seg.first {
		// seg replaced an empty closed segment of the same name (one
		// recovered without the disk space to append to it).
		j.segs = j.segs[:n-1]
	}
	if old != nil && old.first != seg.first { // else seg replaced old, an empty segment
		j.segs = append(j.segs, segmentInfo{name: old.name, first: old.first, bytes: oldOff - headerSize})
		j.closedBytes.Add(oldOff - headerSize)
	}
}

// Commit ends a batch of Appends. With SyncAlways it msyncs every byte
// written since the last successful sync before returning (one msync per
// batch: group commit) and returns its error. Otherwise it publishes the
// write position to the background goroutine (SyncInterval; SyncNone
// with RollAhead) and returns the background sync error that is pending,
// if any: see the package documentation, "Sync modes and sync errors".
func (j *Journal) Commit() error {
	if j.closed {
		return ErrClosed
	}
	switch j.c.sync {
	case SyncAlways:
		return j.syncNow()
	case SyncInterval:
		j.publish()
		return j.takeSyncErr()
	}
	if j.c.rollAhead {
		j.publish() // SyncNone: for releaseWritten and fillAhead
	}
	return nil
}

// publish stores the write offset in pub, unless pub holds it already (a
// batch that only rewrote tails): the store is a locked instruction, the
// load is not.
func (j *Journal) publish() {
	if j.pub.Load() != j.off {
		j.pub.Store(j.off)
	}
}

// Sync msyncs everything appended so far, now, whatever the SyncMode. It
// returns its own msync error; background errors are left for Commit.
func (j *Journal) Sync() error {
	if j.closed {
		return ErrClosed
	}
	return j.syncNow()
}

// syncNow msyncs the full segments not synced yet and cur up to j.off, on
// the owner goroutine.
func (j *Journal) syncNow() error {
	j.syncMu.Lock()
	err := j.syncAllLocked(j.off)
	retiring := len(j.retiring) > 0
	j.syncMu.Unlock()
	j.noteSync(err, false)
	if retiring && err == nil {
		j.poke() // the full segments synced can be closed
	}
	return err
}

// syncAllLocked msyncs, in this order, the full segments up to their end,
// the directory (for a segment renamed into place) and cur up to end, so
// that a later segment never holds synced records before an earlier one is
// whole; syncMu is held.
func (j *Journal) syncAllLocked(end int64) error {
	for i := range j.retiring {
		r := &j.retiring[i]
		if r.synced >= r.end {
			continue
		}
		from := r.synced &^ (j.pageSize - 1)
		// A full segment is written for good, its last page included.
		release(r.seg.m[from:min(align(r.end, j.pageSize), int64(len(r.seg.m)))])
		if err := j.c.msync(r.seg.m[from:r.end]); err != nil {
			return fmt.Errorf("journal: msync %s bytes [%d, %d): %w", r.seg.path, from, r.end, err)
		}
		r.synced = r.end
	}
	if j.dirDirty {
		if err := syncDir(j.dir); err != nil {
			return fmt.Errorf("journal: fsync %s: %w", j.dir, err)
		}
		j.dirDirty = false
	}
	return j.syncToLocked(j.cur, end)
}

// syncToLocked msyncs seg (cur) from j.synced, or from its first tail if
// it has one (a tail may have been rewritten since the last msync: the
// msync writes the pages dirty since, not the range), up to end; syncMu is
// held.
func (j *Journal) syncToLocked(seg *segment, end int64) error {
	if seg == nil || end <= j.synced && j.tailLow == noLow {
		return nil
	}
	from := min(j.synced, j.tailLow) &^ (j.pageSize - 1) // msync wants a page-aligned start
	// The pages from j.synced's to end's are written for good: Append
	// writes from j.off on, never before end. Those of tails written
	// before stay mapped: they are rewritten.
	if rel := j.synced &^ (j.pageSize - 1); rel < end&^(j.pageSize-1) {
		release(seg.m[rel : end&^(j.pageSize-1)])
	}
	if err := j.c.msync(seg.m[from:end]); err != nil {
		return fmt.Errorf("journal: msync %s bytes [%d, %d): %w", seg.path, from, end, err)
	}
	j.synced = max(j.synced, end)
	return nil
}

// runSyncer is the background goroutine: the msyncs of SyncInterval mode
// every interval, and with RollAhead the segments made ahead and retired,
// and, except with SyncAlways, the pages mapped ahead (and with SyncNone
// the written ones released) every interval too.
func (j *Journal) runSyncer() {
	defer close(j.done)
	var tick <-chan time.Time
	if j.c.sync == SyncInterval || j.c.sync == SyncNone && j.c.rollAhead {
		t := time.NewTicker(j.c.interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-j.stop:
			return
		case <-tick:
			j.backgroundPass(!j.prepFailed)
		case <-j.wake:
			j.backgroundPass(true)
		case ack := <-j.syncReq:
			j.backgroundPass(true)
			close(ack)
		}
	}
}

// backgroundPass is one pass of the background goroutine; prepare says
// whether to try making the next segment ahead if there is none.
func (j *Journal) backgroundPass(prepare bool) {
	if j.c.sync == SyncInterval {
		j.backgroundSync()
	}
	if j.c.rollAhead {
		if j.c.sync == SyncNone {
			j.releaseWritten()
		}
		j.retire()
		if prepare {
			j.prepare()
		}
		if j.c.sync != SyncAlways {
			j.fillAhead()
		}
	}
}

// releaseWritten is, with SyncNone, what an msync does first with
// SyncInterval (see release): the pages of cur before the one holding the
// published end, written for good, leave the page tables, so that the
// kernel's own writeback interrupts no other CPU page by page either. It
// leaves j.synced alone: Sync still msyncs them. Only the background
// goroutine of a RollAhead journal calls it, the one that unmaps full
// segments (at once, with SyncNone), so cur stays mapped while it runs
// even if a roll retires it meanwhile.
func (j *Journal) releaseWritten() {
	j.syncMu.Lock()
	seg, end := j.cur, j.pub.Load()
	j.syncMu.Unlock()
	if seg == nil {
		return
	}
	if seg != j.relSeg {
		j.relSeg, j.released = seg, 0
	}
	if to := end &^ (j.pageSize - 1); to > j.released {
		release(seg.m[j.released:to])
		j.released = to
	}
}

// fillAhead maps the pages of cur that the next records will take, before
// Append writes them (see populate): from the position Commit published
// on, as far as twice what was written since the last pass, at least
// minFill and at most maxFill; and as much of the segment made ahead, from
// its start. What it maps beyond the last record of a segment (at most
// maxFill) is zeros the kernel writes back in its own time. Only the
// background goroutine of a RollAhead journal calls it, the one that
// unmaps full segments, so a segment stays mapped while it is filled (but
// for a segment made ahead that a roll failed to rename, which the roll
// unmaps: populate writes nothing, so a fill racing that maps pages at
// most, or fails).
func (j *Journal) fillAhead() {
	if j.noFill {
		return
	}
	j.syncMu.Lock()
	seg, next, end := j.cur, j.next, j.pub.Load()
	j.syncMu.Unlock()
	if seg == nil {
		return
	}
	if seg != j.fillSeg {
		j.fillSeg, j.filled, j.fillEnd = seg, 0, headerSize
		if seg == j.fillNext {
			j.filled = j.nextFilled // filled while it was the one ahead
		}
	}
	want := min(max(2*(end-j.fillEnd), minFill), maxFill)
	j.fillEnd = end
	to := min(align(end+want, j.pageSize), int64(len(seg.m)))
	if from := max(j.filled, end&^(j.pageSize-1)); to > from {
		if !j.fill(seg.m[from:to]) {
			return
		}
		j.filled = to
	}
	if next != nil && next != j.fillNext {
		n := min(align(headerSize+want, j.pageSize), int64(len(next.m)))
		if !j.fill(next.m[:n]) {
			return
		}
		j.fillNext, j.nextFilled = next, n
	}
}

// minFill and maxFill bound how far ahead of the records fillAhead maps
// pages: at least the next 64 KiB, at most 2 MiB.
const (
	minFill = 64 << 10
	maxFill = 2 << 20
)

// align rounds n up to a multiple of to, a power of two.
func align(n, to int64) int64 { return (n + to - 1) &^ (to - 1) }

// fill populates b (see populate) and reports whether it did; a kernel
// without MADV_POPULATE_WRITE stops the fills of j.
func (j *Journal) fill(b []byte) bool {
	if err := populate(b); err != nil {
		j.noFill = j.noFill || errors.Is(err, errCannotFill)
		return false
	}
	return true
}

// backgroundSync msyncs the full segments, then cur up to the position
// published by Commit.
func (j *Journal) backgroundSync() {
	j.syncMu.Lock()
	end := j.pub.Load()
	if j.cur == nil || end <= j.synced && j.tailLow == noLow && !j.dirDirty && !j.unsyncedRetiredLocked() {
		j.syncMu.Unlock()
		return
	}
	err := j.syncAllLocked(end)
	j.syncMu.Unlock()
	j.noteSync(err, true)
	if j.c.syncPass != nil {
		j.c.syncPass(err)
	}
}

// unsyncedRetiredLocked reports whether a full segment is not msynced up to
// its end; syncMu is held.
func (j *Journal) unsyncedRetiredLocked() bool {
	for _, r := range j.retiring {
		if r.synced < r.end {
			return true
		}
	}
	return false
}

// retire closes the full segments that need no more msync (all of them
// with SyncNone).
func (j *Journal) retire() {
	var done []*segment
	j.syncMu.Lock()
	keep := j.retiring[:0]
	for _, r := range j.retiring {
		if j.c.sync == SyncNone || r.synced >= r.end {
			done = append(done, r.seg)
		} else {
			keep = append(keep, r)
		}
	}
	clear(j.retiring[len(keep):])
	j.retiring = keep
	j.syncMu.Unlock()
	for _, s := range done {
		if err := s.close(); err != nil {
			j.c.log.Warn("journal: closing a full segment failed", "file", s.path, "err", err)
		}
	}
}

// prepare makes the next segment ahead, if there is a current one and no
// next one. A failure is left for the roll to meet (and report) itself.
func (j *Journal) prepare() {
	j.syncMu.Lock()
	// Not beside a full segment still open: a roll holds one file more at most.
	need := j.next == nil && j.cur != nil && len(j.retiring) == 0
	j.syncMu.Unlock()
	if !need {
		return
	}
	j.prepared++
	seg, err := makeSegment(&j.c, filepath.Join(j.dir, nextSegmentName(j.prepared)), 0)
	j.prepFailed = err != nil
	if err != nil {
		j.c.log.Debug("journal: making the next segment ahead failed; the roll will try", "dir", j.dir, "err", err)
		return
	}
	j.syncMu.Lock()
	j.next = seg
	j.syncMu.Unlock()
}

// syncPassForTest runs one background sync pass on the syncer goroutine
// and waits for it.
func (j *Journal) syncPassForTest() {
	ack := make(chan struct{})
	j.syncReq <- ack
	<-ack
}

// noteSync records the result of an msync. Background failures become the
// pending error (the first one; later ones are counted); any success heals
// it: a pending error that a Commit has reported is cleared, one not yet
// reported will be reported once more and then cleared.
func (j *Journal) noteSync(err error, background bool) {
	j.errMu.Lock()
	defer j.errMu.Unlock()
	defer func() { j.pending.Store(j.syncErr != nil) }()
	switch {
	case err == nil && j.syncErr != nil:
		if j.syncErrReported {
			j.syncErr, j.syncErrMore = nil, 0
		} else {
			j.syncErrHealed = true
		}
	case err != nil && background:
		if j.syncErr == nil {
			j.syncErr, j.syncErrReported = err, false
		} else {
			j.syncErrMore++
		}
		j.syncErrHealed = false
	case err != nil:
		j.syncErrHealed = false
	}
}

// takeSyncErr returns the pending background sync error for Commit.
func (j *Journal) takeSyncErr() error {
	if !j.pending.Load() {
		return nil // most Commits
	}
	j.errMu.Lock()
	defer j.errMu.Unlock()
	defer func() { j.pending.Store(j.syncErr != nil) }()
	err, more := j.syncErr, j.syncErrMore
	if err == nil {
		return nil
	}
	j.syncErrReported = true
	if j.syncErrHealed {
		j.syncErr, j.syncErrMore, j.syncErrHealed = nil, 0, false
	}
	if more > 0 {
		return fmt.Errorf("%w (and %d more background msync failures since)", err, more)
	}
	return err
}

// Size returns the bytes of record frames (headers, payloads and padding;
// not segment headers) in the segments that no committed snapshot covers:
// the compaction trigger.
func (j *Journal) Size() int64 {
	n := j.closedBytes.Load()
	if j.cur != nil {
		n += j.off - headerSize
	}
	return n
}

// Seq returns the sequence number of the last record appended or
// recovered (or covered by the snapshot recovered); 0 for a new journal.
func (j *Journal) Seq() uint64 { return j.seq }

// Close waits for a snapshot's Commit under way, stops the background
// goroutine, msyncs what is not synced yet (unless SyncNone), unmaps and
// closes the segments and removes the one made ahead. It returns the msync
// error and any background sync error that no Commit reported. Close is
// idempotent; other methods return ErrClosed after it.
func (j *Journal) Close() error {
	if j.closed {
		return nil
	}
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	j.committing.Wait() // no snapshot renamed, nor file removed, after Close
	if j.stop != nil {
		close(j.stop)
		<-j.done
	}
	var errs []error
	if j.c.sync != SyncNone {
		errs = append(errs, j.syncNow())
	}
	j.errMu.Lock()
	if j.syncErr != nil && !j.syncErrReported {
		errs = append(errs, j.syncErr)
	}
	j.errMu.Unlock()
	j.syncMu.Lock()
	retiring, next := j.retiring, j.next
	j.retiring, j.next = nil, nil
	j.syncMu.Unlock()
	for _, r := range retiring {
		if err := r.seg.close(); err != nil {
			errs = append(errs, fmt.Errorf("journal: close %s: %w", r.seg.path, err))
		}
	}
	if next != nil {
		_ = next.close()
		if err := os.Remove(next.path); err != nil {
			errs = append(errs, fmt.Errorf("journal: remove the segment made ahead: %w", err))
		}
	}
	if j.cur != nil {
		j.closedBytes.Add(j.off - headerSize)
		if err := j.cur.close(); err != nil {
			errs = append(errs, fmt.Errorf("journal: close %s: %w", j.cur.path, err))
		}
		j.syncMu.Lock()
		j.cur = nil
		j.syncMu.Unlock()
	}
	return errors.Join(errs...)
}
