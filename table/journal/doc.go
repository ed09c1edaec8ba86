// Package journal is the durable memory of a ratelimitd shard: an
// append-only, checksummed, memory-mapped log of opaque records, with
// snapshots and crash recovery.
//
// Each shard owner (one goroutine) owns one Journal in its own directory.
// It appends records (the new state of the buckets a batch changed,
// encoded by another package; the journal never looks inside a payload)
// and calls Commit at the end of each batch. Replaying records in order is
// idempotent (each sets a state), which is what makes snapshots simple: a
// snapshot is just the records of the current state, and the records after
// it are replayed on top.
//
//	j, rec, err := journal.Open(dir, journal.Options{Sync: journal.SyncAlways}, restore)
//	...
//	for _, b := range changed { err = j.Append(b) }
//	err = j.Commit() // the batch is durable when this returns nil (SyncAlways)
//
// When Size grows past a threshold, the owner calls StartSnapshot and hands
// the SnapshotWriter to another goroutine, which writes the state (a
// copy-on-write copy of the table) while the owner goes on appending, then
// commits it; the segments it covers are then removed. LockDir locks a whole
// data directory against a second process.
//
// The package works on Linux (fallocate, flock, msync); on other Unix
// systems segment files are allocated by writing zeros.
//
// # Files
//
// A journal directory holds:
//
//	seg-<16 hex digits>.log     segment; the digits are the sequence number of its first record
//	snap-<16 hex digits>.snap   snapshot; the digits are the last sequence number it covers
//	*.tmp                       a segment or snapshot being made; removed by Open
//	*.broken, *.broken.<N>      evidence moved or copied aside by recovery; never touched again
//	LOCK                        the LockDir lock file, if the directory is locked directly
//
// Hex digits are lower-case. Open logs any other file or directory as
// foreign and leaves it alone; it never deletes anything it did not make.
//
// A journal holds its clients' ids, so it is for its owner alone: Open
// creates the directory (and missing parents) with mode 0700 and every
// file with 0600, before the umask. A successful Open also removes the
// group and other permissions of the directory and of the segments and
// snapshot it keeps, if they have any (LockDir does the same for its
// directory and LOCK); what this process does not own is left as it is.
//
// # Integers and checksums
//
// All integers are little-endian. Every checksum is CRC-32C (the Castagnoli
// polynomial 0x1EDC6F41, reflected, initial value and final XOR 0xFFFFFFFF:
// Go's hash/crc32 with crc32.Castagnoli), written as a uint32.
//
// # Segment file
//
// A segment is created at its full size (Options.SegmentSize; zero means
// DefaultSegmentSize, 16 MiB; package actors, and so the daemon, asks for
// 8 MiB by default) with fallocate(2), so a full disk fails the creation with ENOSPC
// instead of a later write through the mapping with SIGBUS (where fallocate
// is not supported, zeros are written instead). It is made under a *.tmp
// name, stamped with its header, fsynced and renamed into place, then
// written through a shared mapping. It starts with a 40-byte header:
//
//	offset size field
//	     0    8 magic "RLDJRNL\x00"
//	     8    4 format version: 1, 2 for compact frames, or 3 for compact frames with tails
//	    12    4 header size, 40
//	    16    8 sequence number of the first record (equals the number in the file name; at most 2^62)
//	    24    8 salt, random (crypto/rand) per file
//	    32    4 flags, 0
//	    36    4 CRC-32C of bytes 0 to 35
//
// Record frames follow from offset 40, back to back: in format 1 each
// starting at a multiple of 8, in formats 2 and 3 right after the one
// before (in format 3, after its tail if it has one). The bytes after the
// last frame are zeros up to the end of the file: a zero length word
// (format 1) or a zero first byte (formats 2 and 3) is the end of data. A
// header whose magic, size and checksum are right but whose version is
// none of these (a later release's) fails Open with ErrFormat: such a file
// is never read, cut or moved aside. Snapshots are of format 1 only.
// Options.SegmentFormat says which format new segments get; every segment
// is read, and the last one appended to, in the format its header names.
//
// # Record frame, format 1
//
//	offset size field
//	     0    4 len: 16 + the payload length (a frame's unpadded length); 0 means end of data
//	     4    4 crc: CRC-32C of salt (8 bytes, as in the header) ‖ len (4) ‖ seq (8) ‖ payload
//	     8    8 seq: the record's sequence number
//	    16  len-16 payload
//	   len  0..7 zero padding to the next multiple of 8
//
// The length word is stored last, after crc, seq and payload are in place,
// so a process killed in the middle of an Append leaves len = 0: the end of
// data. Because the salt is part of the checksum, a frame copied from
// another file (or left over from an older file of the same name) does not
// validate. The payload may be empty. Sequence numbers start at 1 and
// increase by exactly 1 from record to record, across segments: the first
// record of a segment follows the last record of the one before it, and the
// first segment after a snapshot covering sequence number S starts at most
// at S+1 (records up to S in it are skipped at replay).
//
// # Record frame, format 2
//
//	size field
//	 1-5 len: the payload length + 1, as a uvarint in its shortest form
//	   2 tag: the low 16 bits of the record's sequence number
//	   4 crc: CRC-32C of salt (8 bytes) ‖ seq (8) ‖ len (as stored) ‖ tag ‖ payload
//	 len-1 payload
//
// A frame takes 7 bytes besides its payload when that is below 127 bytes
// (a repeat hit's count entry: 12 to 16 bytes in all), at most 11. The
// sequence number is not stored: it is the one due at the frame's place
// (the segment's first, plus the frames before), and the checksum covers
// it, so a frame read at another place does not validate. The first byte
// of len is stored last, after the rest of the frame: a process killed in
// the middle of an Append leaves a zero there, the end of data. A frame at
// the place due to record N is valid when len is in its shortest form,
// the frame fits in the file, tag is N's and the checksum matches.
//
// # Record frame, format 3
//
// A frame of format 3 is a frame of format 2 whose length word also says
// whether the record has a tail: words after it that its owner rewrites in
// place (a counter, say) instead of appending a record for each change.
//
//	size field
//	 1-5 len: L = (the payload length + 1) * 2 + t, as a uvarint in its shortest form; t is 1 if the frame has a tail, else 0; L is at least 2
//	   2 tag: the low 16 bits of the record's sequence number
//	   4 crc: CRC-32C of salt (8 bytes) ‖ seq (8) ‖ len (as stored) ‖ tag ‖ W (if t is 1) ‖ payload
//	   1 W, only if t is 1: the length of the tail in 8-byte words, 1 to 255
//	 L/2-1 payload
//	0..31 only if t is 1: zero padding up to the next file offset that is a multiple of 32
//	 W*8 only if t is 1: the tail, not covered by crc
//
// The next frame starts right after the tail, or right after the payload
// if t is 0: a frame without a tail takes exactly the bytes it takes in
// format 2 (only the value of len differs). A frame with a tail takes 8
// bytes besides its payload (when that is below 63 bytes), the padding
// and the tail: a 9-byte payload with a tail of 6 words takes 65 to 96
// bytes, by its offset. As in format 2 the sequence number is not stored,
// and the first byte of len is stored last, after the rest of the frame
// (its tail still zeros): a process killed in the middle of an Append
// leaves a zero there, the end of data. A frame at the place due to record
// N is valid when len is in its shortest form and at least 2, W (if t is
// 1) is not 0, the frame (padding and tail included) fits in the file, tag
// is N's, the checksum matches and the padding is zero, whatever its tail
// holds.
//
// The tail is its owner's: the journal never checks it. AppendTail
// appends a record with a tail of zeros and returns the tail's file offset
// and the epoch of the current segment; Tail gives the tail back to be
// rewritten in place, as long as the record is in the current segment.
// Every roll (StartSnapshot's too) starts a new epoch, after which Tail
// refuses the tails of earlier ones: a segment is never written once it
// is full. Because a tail starts at a multiple of 32, an aligned 8-byte
// store to it never tears (a process killed leaves each word old or new),
// and a 32-byte piece of it at a multiple of 32 never straddles two disk
// sectors (a power loss leaves such a piece as one sector left it).
// Rewrites are synced like records: the Commit after them ends their
// batch, and the msync that makes that batch durable (the next background
// pass with SyncInterval, the Commit with SyncAlways, Sync, Close, the
// roll for a full segment) starts at the page of the segment's first tail
// (an msync writes the pages written since the last one, however wide its
// range). A power loss may still leave a tail rewritten since the last
// msync old, new, or torn at a sector boundary between its pieces, and a
// process killed during a rewrite of several words leaves some old and
// some new:
// recovery hands every tail to the replay (OpenTails) as the file holds
// it, and a tail that is not whole is never damage to the journal, so its
// owner must tell a tail written whole from one that is not (a check of
// its own, in the tail). In a segment of format 1 or 2 (a last segment
// recovered from an older format, appended to in its own format)
// AppendTail appends the record without a tail and returns offset 0.
// Snapshots have no tails.
//
// A segment file holds at most SegmentSize-56 (SegmentOverhead) payload
// bytes in one record, and 8*W+32 fewer with a tail of W words: a larger
// payload is ErrTooLarge. A new segment is created (a roll) when the next
// frame does not fit in the current one.
//
// With Options.RollAhead, the background goroutine makes the next segment
// ahead, as above but under the name seg-next-<N>.log.tmp (N counting
// the segments made ahead by this Journal, so that a roll renaming one
// never races the making of the next) and with 0 as its
// first sequence number, once the current segment has no full segment
// still open beside it. The roll stamps its header (the sequence number and
// the header checksum) in the mapping and renames it into place; the full
// segment is msynced (SyncInterval; SyncAlways: by the next Commit) and
// closed by the background goroutine, before the directory is fsynced and
// anything of the new segment is msynced. A failed creation ahead is only
// logged (debug): the roll then creates the segment itself as without
// RollAhead, and fails as that does.
//
// # Snapshot file
//
// A snapshot is written through a buffer to a *.tmp file, then fsynced,
// renamed to snap-<S>.snap and the directory fsynced. It has the same
// 40-byte header with the magic "RLDSNAP\x00", where the sequence number
// field holds S, the last sequence number the snapshot covers. Frames
// follow, framed exactly like segment records (with the snapshot's salt),
// numbered 1, 2, 3, ... in their seq field. The last frame is the trailer:
// seq 0xFFFFFFFFFFFFFFFF and a 16-byte payload
//
//	offset size field
//	     0    8 number of records before the trailer
//	     8    4 CRC-32C of every byte of the file before the trailer frame
//	    12    4 reserved, 0
//
// and the file ends right after the trailer frame's padding. A snapshot
// without a valid trailer, or with a damaged frame anywhere, is invalid.
//
// # Recovery
//
// Open:
//
//  1. Loads the newest valid snapshot (replaying its records in order).
//     Invalid snapshots are logged, skipped in favour of the next older
//     one, and renamed to *.broken if Open succeeds; snapshots older than
//     the one loaded are removed.
//  2. Removes the segments the snapshot covers entirely, and reads the
//     others in sequence order, checking each header (magic, version,
//     size, flags, checksum, first sequence number equal to the one in the
//     name), and each frame (length bounds, checksum, zero padding,
//     sequence continuity; in formats 2 and 3 the tag), replaying the
//     records after the snapshot. A length word that is not plausible is
//     damage, never an allocation.
//  3. Damage in the last segment (a bad frame, or nonzero bytes after the
//     last valid frame) with no valid frame after it is a torn tail: the
//     bytes from the damage to the last nonzero byte of the segment are
//     copied to <segment>.broken (or .broken.N if it exists) and zeroed,
//     so appends continue right after the last valid record. It is logged
//     with the file, offset and bytes dropped, and counted in
//     Recovery.TornTails and BytesDropped. A last segment that is
//     unusable as a whole (empty, too short, all zeros, garbage, a
//     foreign magic, a bad header) is renamed to *.broken (removed if all
//     zeros) and counted the same way; the next Append creates a fresh
//     segment in its place. But a valid frame after the damage makes it
//     mid-journal damage (rule 4) instead, at the offset where the valid
//     records end (offset 0 for a bad header): only an interrupted write
//     at the end of the data is a torn tail, and a flipped byte must not
//     drop the records after it. (Where lseek(SEEK_DATA) tells them, the
//     holes of the file, preallocated and never written, are not read:
//     they are zeros.) A frame there is valid if it starts at a
//     multiple of 8 at or after the damage (after the header, for a bad
//     one), its checksum matches with the salt of the file's header (as
//     stored, for a bad header), its padding is zero, and its sequence
//     number fits its place: at least N, the number due at the damage, and
//     at most N + d/16, where d is its distance in bytes from the damage,
//     as every frame takes at least 16 bytes (for a bad header, N is the
//     number in the file name and d is counted from offset 40). In formats
//     2 and 3 a frame may start at any byte at or after the damage, and is
//     valid for a sequence number from N to N + d/7 (every frame takes at
//     least 7 bytes) whose low 16 bits are its tag; a bad header, whose
//     version may be what is damaged, is followed by a valid frame of any
//     format. A damaged salt leaves no frame to check: such a segment is
//     unusable as a whole.
//  4. Damage in any earlier segment, damage in the last one followed by a
//     valid frame (rule 3), a header that does not continue the
//     sequence, or missing records (a gap in sequence numbers, including
//     between the snapshot and the first segment) is mid-journal damage:
//     Open fails with a *CorruptError (ErrCorrupt) naming the file and the
//     byte offset. With Options.Repair it cuts the journal there instead:
//     the valid prefix is kept, the damaged rest of that segment is copied
//     aside and zeroed, every later segment is renamed to *.broken, and
//     Recovery.Repaired is set. Nonzero bytes after the last record of an
//     earlier segment are only logged when the next segment continues the
//     sequence, since no record is missing then.
//  5. An invalid snapshot covering more than what could be recovered
//     without it is mid-journal damage too (its segments are gone).
//
// Open changes nothing in the directory before its checks pass (a failing
// Open, ErrCorrupt or a replay error, leaves the files as they were); then
// it makes the changes above, removes *.tmp files and, unless SyncNone,
// makes them durable (fsync of the evidence, the cut segment, the recovered
// segments and the directory) before it returns. With SyncNone a power loss
// right after Open may undo a cut; the next Open then cuts again.
// The result is always a valid prefix of what was appended: every record
// that was synced (see below) and possibly some that were not.
//
// # Sync modes and sync errors
//
// Records are written through a shared mapping, so they are in the page
// cache when Append returns and survive the process being killed in every
// mode. Against power loss: SyncNone promises nothing (it never msyncs or
// fsyncs, except in Sync and when committing a snapshot); SyncInterval msyncs
// what Commit published every Options.SyncInterval from a background
// goroutine, and msyncs the whole segment before rolling to the next one;
// SyncAlways msyncs the batch in Commit (group commit). Sync msyncs
// everything written, and so does Close unless SyncNone.
//
// On Linux an msync first takes the pages it covers that are written for
// good (all but the one holding the end of the records) out of the
// process's page tables (madvise MADV_DONTNEED): they stay in the page
// cache, dirty until written back, and read back the same, but writeback
// then has no mapping of them to write-protect, and so no other CPU's TLB
// to flush page by page. Those pages also leave the process's resident
// size. With RollAhead and SyncInterval or SyncNone, the background
// goroutine also maps the pages the next records will take, before Append
// writes them (madvise MADV_POPULATE_WRITE, Linux 5.14; nothing on an
// older kernel), so that a page's first write takes no page fault under
// its writer's lock; they read as zeros still. With RollAhead and
// SyncNone, which never msyncs, it also takes the pages written for good
// out of the page tables every SyncInterval, as an msync would first: the
// kernel's own writeback, which then writes them, finds no mapping either.
//
// The power-loss model is that bytes written after the last msync may read
// back as zeros, garbage, or only their first 512-byte sectors. Recovery
// then yields a valid prefix that includes everything synced. With SyncNone
// a power loss can also tear an earlier segment, which is reported as
// mid-journal damage. So is a power loss after which a record written since
// the last msync survives while an earlier one does not (the kernel wrote
// the pages back out of order): Open cannot tell that from a flipped byte,
// so it refuses rather than drop the later record; Options.Repair cuts
// there, losing only records that were not synced. With RollAhead this
// window spans a roll (records of the new segment written back before the
// end of the full one), and a new segment whose stamped header did not
// reach the disk reads as a last segment with a bad header.
//
// An msync error is never silently dropped. In SyncAlways mode Commit
// returns it (wrapped with the file and byte range; errors.Is matches the
// errno). In SyncInterval mode the background syncer keeps the first error
// (counting later ones) and retries the same range at the next tick; every
// Commit returns that error until an msync succeeds after it. An error that
// no Commit reported yet is returned by one more Commit even if an msync
// succeeded in between, and by Close. Sync returns its own result. A failed
// roll (the msync of the old segment, or the creation of the new one, e.g.
// ENOSPC) fails the Append with nothing written; the next Append retries.
//
// # Guarantees
//
//   - Open replays exactly a valid prefix of the appended records, in
//     order, each exactly as appended; never a record that was not
//     appended (up to a CRC-32C collision, about one in 2^32 per damaged
//     frame), and never a panic, whatever the files hold.
//   - A record appended before a Commit that returned nil in SyncAlways
//     mode, before a Sync that returned nil, or before a Close that
//     returned nil in SyncInterval or SyncAlways mode, survives power loss.
//     Every record Append accepted survives the process being killed.
//   - Seq continues from the last record recovered: the next Append gets
//     Seq()+1, whatever was cut.
//   - Append does not allocate and does not take a lock, except when it
//     rolls to a new segment; with RollAhead and the next segment made, a
//     roll creates, allocates and msyncs nothing (it renames one file).
//   - A full disk gives ENOSPC from Append (at a roll) or StartSnapshot,
//     never SIGBUS, and the journal stays usable and reopenable.
//
// # Non-guarantees
//
//   - A Journal is not safe for concurrent use: one owner goroutine calls
//     its methods (a SnapshotWriter may run on another one).
//   - Records are opaque: the journal does not deduplicate or interpret
//     them; replay is last-write-wins by the caller's decoding.
//   - Open does not lock the directory (use LockDir); two Journals on one
//     directory corrupt each other.
//   - After an msync error the kernel may have dropped the dirty pages; a
//     later successful msync does not prove those bytes reached the disk.
//     Restarting (Close, Open) recovers whatever did.
//   - Size counts record bytes, not file sizes; segment files are
//     allocated at their full size from their creation.
package journal
