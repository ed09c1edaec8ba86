package journal

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/edsrzf/mmap-go"
)

// A SnapshotWriter writes a snapshot: the records that, replayed in order,
// rebuild the state the journal held at the StartSnapshot call. Its methods
// may be called from a goroutine other than the journal's owner, but not
// concurrently with each other.
type SnapshotWriter struct {
	j       *Journal
	seq     uint64 // the journal's Seq at StartSnapshot: the snapshot covers 1..seq
	tmp     string
	f       *os.File
	bw      *bufio.Writer
	salt    uint32
	fileCRC uint32 // CRC-32C of every byte written so far
	count   uint64
	scratch [12]byte
	frame   [frameHeaderSize]byte
	zeros   [frameAlign]byte // padding
	done    bool             // committed or aborted
	err     error            // first write error, sticky
}

// StartSnapshot begins a snapshot covering exactly the records with
// sequence numbers up to Seq(): it rolls to a fresh segment if the current
// one holds records, so the segments the snapshot covers are whole, and
// creates a temporary file in the journal's directory. The owner goes on
// appending while another goroutine writes the snapshot with the
// SnapshotWriter. Only one snapshot may be in progress
// (ErrSnapshotInProgress).
func (j *Journal) StartSnapshot() (*SnapshotWriter, error) {
	if j.closed {
		return nil, ErrClosed
	}
	j.mu.Lock()
	busy := j.snapshotting
	j.snapshotting = true
	j.mu.Unlock()
	if busy {
		return nil, ErrSnapshotInProgress
	}
	w, err := j.startSnapshot()
	if err != nil {
		j.mu.Lock()
		j.snapshotting = false
		j.mu.Unlock()
		return nil, err
	}
	return w, nil
}

func (j *Journal) startSnapshot() (*SnapshotWriter, error) {
	if j.cur != nil && j.cur.first <= j.seq { // cur holds records
		if err := j.roll(); err != nil {
			return nil, err
		}
	}
	f, err := os.CreateTemp(j.dir, fmt.Sprintf("%s%016x-*%s", snapshotPrefix, j.seq, tmpSuffix))
	if err != nil {
		return nil, fmt.Errorf("journal: start snapshot: %w", err)
	}
	salt := j.c.salt()
	w := &SnapshotWriter{j: j, seq: j.seq, tmp: f.Name(), f: f, bw: bufio.NewWriterSize(f, 1<<20), salt: saltCRC(salt)}
	var hdr [headerSize]byte
	putHeader(hdr[:], snapshotMagic, w.seq, salt)
	w.write(hdr[:])
	if w.err != nil {
		_ = f.Close()
		_ = os.Remove(w.tmp)
		return nil, w.err
	}
	return w, nil
}

// write buffers b and folds it into the file checksum.
func (w *SnapshotWriter) write(b []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.bw.Write(b); err != nil {
		w.err = fmt.Errorf("journal: write snapshot %s: %w", w.tmp, err)
		return
	}
	w.fileCRC = crc32.Update(w.fileCRC, castagnoli, b)
}

// writeFrame writes one frame with the given sequence number.
func (w *SnapshotWriter) writeFrame(seq uint64, payload []byte) {
	n := uint32(frameHeaderSize + len(payload))
	le.PutUint32(w.frame[0:], n)
	le.PutUint32(w.frame[4:], frameCRC(w.salt, &w.scratch, n, seq, payload))
	le.PutUint64(w.frame[8:], seq)
	w.write(w.frame[:])
	w.write(payload)
	w.write(w.zeros[:frameSize(len(payload))-int64(n)])
}

// Append adds one record to the snapshot (buffered). Records are replayed
// in the order they were appended, before the journal's later records.
func (w *SnapshotWriter) Append(payload []byte) error {
	if w.done {
		return fmt.Errorf("%w: snapshot already committed or aborted", ErrClosed)
	}
	if len(payload) > w.j.maxPayload {
		return fmt.Errorf("%w: a %d-byte payload in a snapshot (at most %d)", ErrTooLarge, len(payload), w.j.maxPayload)
	}
	w.count++
	w.writeFrame(w.count, payload)
	return w.err
}

// Commit completes the snapshot: it writes the trailer (record count and
// file checksum), fsyncs the file, renames it to its final name and fsyncs
// the directory; then it removes the segment files the snapshot covers and
// the older snapshots. From the rename on, Open uses the snapshot. An error
// from the removals is returned, but the snapshot is committed (the next
// Open finishes the removals). If the journal was closed in the meantime,
// Commit removes the temporary file and returns ErrClosed. Commit is safe
// while the owner goroutine appends, and does not hold up an Append that
// rolls: the rename, the fsync of the directory and the removals run
// outside the lock a roll takes.
func (w *SnapshotWriter) Commit() error {
	if w.done {
		return fmt.Errorf("%w: snapshot already committed or aborted", ErrClosed)
	}
	w.done = true
	if err := w.finish(); err != nil {
		return w.fail(err)
	}
	j := w.j
	j.mu.Lock()
	if j.closed {
		j.snapshotting = false
		j.mu.Unlock()
		_ = os.Remove(w.tmp)
		return fmt.Errorf("%w: snapshot %s abandoned", ErrClosed, w.tmp)
	}
	j.committing.Add(1) // before Close's Wait: closed is false under j.mu
	defer j.committing.Done()
	j.mu.Unlock()
	name, renamed, err := w.publish()
	j.mu.Lock()
	j.snapshotting = false
	if err != nil {
		if renamed && !slices.Contains(j.snaps, name) {
			// The rename may not be durable; the covered files stay.
			j.snaps = append(j.snaps, name)
		}
		j.mu.Unlock()
		return err
	}
	stale := j.compact(w.seq, name)
	j.mu.Unlock()
	return j.remove(name, stale)
}

// finish writes the trailer, then flushes, fsyncs and closes the temporary
// file.
func (w *SnapshotWriter) finish() error {
	var trailer [trailerPayloadSize]byte
	le.PutUint64(trailer[0:], w.count)
	le.PutUint32(trailer[8:], w.fileCRC)
	w.writeFrame(trailerSeq, trailer[:])
	err := w.err
	if err == nil {
		if err = w.bw.Flush(); err == nil {
			err = w.f.Sync()
		}
		if err != nil {
			err = fmt.Errorf("journal: write snapshot %s: %w", w.tmp, err)
		}
	}
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("journal: close snapshot %s: %w", w.tmp, cerr)
	}
	return err
}

// publish renames the finished file to its final name and fsyncs the
// directory, and returns that name and whether the rename was made: from
// the rename on, Open uses the snapshot.
func (w *SnapshotWriter) publish() (name string, renamed bool, err error) {
	j := w.j
	name = snapshotName(w.seq)
	path := filepath.Join(j.dir, name)
	if err := j.c.rename(w.tmp, path); err != nil {
		_ = os.Remove(w.tmp)
		return name, false, fmt.Errorf("journal: commit snapshot %s: %w", path, err)
	}
	if err := syncDir(j.dir); err != nil {
		return name, true, fmt.Errorf("journal: commit snapshot %s: fsync directory: %w", path, err)
	}
	return name, true, nil
}

// compact drops, holding j.mu, the segments that snapshot name covers
// (every record up to seq) and the snapshots older than it from the
// journal's listing, and returns their files for remove.
func (j *Journal) compact(seq uint64, name string) (stale []string) {
	keep := j.segs[:0]
	for _, s := range j.segs {
		if s.first > seq {
			keep = append(keep, s)
			continue
		}
		stale = append(stale, s.name)
		j.closedBytes.Add(-s.bytes)
	}
	clear(j.segs[len(keep):])
	j.segs = keep
	for _, old := range j.snaps {
		if old != name {
			stale = append(stale, old)
		}
	}
	j.snaps = []string{name}
	return stale
}

// remove removes the files compact dropped for snapshot name, without
// j.mu: nothing reads them any more. What cannot be removed now, the next
// Open removes.
func (j *Journal) remove(name string, stale []string) error {
	var errs []error
	for _, f := range stale {
		if err := j.c.remove(filepath.Join(j.dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("journal: snapshot %s committed, but removing the files it replaces failed: %w", name, err)
	}
	return nil
}

// fail ends a snapshot that could not be written.
func (w *SnapshotWriter) fail(err error) error {
	_ = os.Remove(w.tmp)
	w.j.mu.Lock()
	w.j.snapshotting = false
	w.j.mu.Unlock()
	return err
}

// Abort abandons the snapshot and removes its temporary file; the journal is
// unchanged. It does nothing after Commit or an earlier Abort, so it may be
// deferred.
func (w *SnapshotWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	_ = w.f.Close()
	err := os.Remove(w.tmp)
	w.j.mu.Lock()
	w.j.snapshotting = false
	w.j.mu.Unlock()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("journal: abort snapshot: %w", err)
	}
	return nil
}

// snapshotFile is a validated snapshot, mapped read-only.
type snapshotFile struct {
	f       *os.File
	m       mmap.MMap
	salt    uint32
	trailer int64 // offset of the trailer frame
}

// openSnapshot maps and validates a snapshot file. A non-empty reason (with
// the offset of the damage) says why it is invalid; the file is then
// closed. err is for I/O errors.
func openSnapshot(path string, nameSeq uint64) (s *snapshotFile, off int64, reason string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, "", fmt.Errorf("journal: open: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, "", fmt.Errorf("journal: open: %w", err)
	}
	if st.Size() == 0 {
		_ = f.Close()
		return nil, 0, "empty file", nil
	}
	m, err := mmap.MapRegion(f, int(st.Size()), mmap.RDONLY, 0, 0)
	if err != nil {
		_ = f.Close()
		return nil, 0, "", fmt.Errorf("journal: open: mmap %s: %w", path, err)
	}
	s = &snapshotFile{f: f, m: m}
	off, reason = s.validate(nameSeq)
	if reason != "" {
		_ = s.close()
		return nil, off, reason, nil
	}
	return s, 0, "", nil
}

// validate checks the header, every frame and the trailer.
func (s *snapshotFile) validate(nameSeq uint64) (int64, string) {
	seq, salt, reason := parseHeader(s.m, snapshotMagic)
	if reason != "" {
		return 0, reason
	}
	if seq != nameSeq {
		return 16, fmt.Sprintf("header says it covers up to sequence number %d, the file name %d", seq, nameSeq)
	}
	s.salt = saltCRC(salt)
	off, count := int64(headerSize), uint64(0)
	for {
		fr, st, reason := decodeFrame(s.m, off, s.salt)
		switch {
		case st == frameEnd:
			return off, "no trailer: the snapshot is incomplete"
		case st == frameBad:
			return off, reason
		case fr.seq == trailerSeq:
			return off, s.checkTrailer(off, fr, count)
		case fr.seq != count+1:
			return off, fmt.Sprintf("record number %d, want %d", fr.seq, count+1)
		}
		count++
		off = fr.next
	}
}

func (s *snapshotFile) checkTrailer(off int64, fr frame, count uint64) string {
	p := fr.payload
	switch {
	case len(p) != trailerPayloadSize:
		return fmt.Sprintf("trailer of %d bytes, want %d", len(p), trailerPayloadSize)
	case le.Uint64(p) != count:
		return fmt.Sprintf("trailer counts %d records, the file holds %d", le.Uint64(p), count)
	case le.Uint32(p[8:]) != crc32.Checksum(s.m[:off], castagnoli):
		return "file checksum mismatch"
	case le.Uint32(p[12:]) != 0:
		return "nonzero reserved trailer field"
	case fr.next != int64(len(s.m)):
		return fmt.Sprintf("%d bytes after the trailer", int64(len(s.m))-fr.next)
	}
	s.trailer = off
	return ""
}

// each calls fn with every record payload of a validated snapshot, in order.
func (s *snapshotFile) each(fn func([]byte) error) error {
	for off := int64(headerSize); off < s.trailer; {
		fr, st, reason := decodeFrame(s.m, off, s.salt)
		if st != frameOK {
			return fmt.Errorf("%w: %s at offset %d changed while it was read: %s", ErrCorrupt, s.f.Name(), off, reason)
		}
		if err := fn(fr.payload); err != nil {
			return err
		}
		off = fr.next
	}
	return nil
}

func (s *snapshotFile) close() error {
	err := s.m.Unmap()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}
