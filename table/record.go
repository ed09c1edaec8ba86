package table

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// ErrBadRecord is matched (errors.Is) by every error Restore returns for a
// record it cannot decode.
var ErrBadRecord = errors.New("bad bucket record")

// Record and entry kinds. A record (what a journal stores as one payload)
// is a batch of entries. Changes and Frozen.Records write format 2; Restore
// reads formats 1 and 2, told apart by the first byte, so that a journal
// written before format 2 is read as it was written.
//
// Format 1: each entry the full state of one bucket or its deletion, so
// replaying records is idempotent and the last entry for a bucket wins:
//
//	record     0x10, then one or more entries
//	group      0x11 algorithm(1) namespace(uvarint length, bytes)
//	                scale(uvarint ms) width(uvarint ms) limit(uvarint) burst(uvarint)
//	           the limit the entries after it belong to, until the next group
//	put        0x01 window(varint) count(uvarint) aux(varint)
//	                created(varint, ms after the window's start) modified(varint, ms after created)
//	                id(uvarint length 1 to MaxIDLen, bytes)
//	delete     0x02 window(varint) id(uvarint length, bytes)
//
// width is the key windows' width in ms (the scale, or a token or leaky
// bucket's longer refill time); window is floor(unix_ms / width_ms); limit
// and burst are 0 with a namespace (a rule's buckets), burst is 0 for the
// windows; aux is a sliding window's previous count or a GCRA bucket's TAT
// in ns after its window's start, else 0. An entry needs a group before it.
//
// Format 2 adds references, so that a hit on a bucket the journal already
// holds is a few bytes: a put may bind a reference (a number the writer
// chose, 1 to 2^32) to its bucket, and later entries name the bucket by it.
//
//	record     0x20, then one or more entries
//	group      0x11 as in format 1
//	put        0x03 ref(uvarint, 0 binds nothing) then the fields of a format-1 put
//	delete     0x02 as in format 1
//	drop       0x04 ref(uvarint): the bucket bound to ref is deleted, ref unbound
//	count      0x05 ref(uvarint) count(uvarint) modified(varint, ms after created):
//	           the bucket bound to ref now holds count, changed at modified
//	tat        0x06 ref(uvarint) count(uvarint) aux(varint) modified(varint):
//	           the same for a token or leaky bucket, with its new TAT (aux)
//
// put and delete need a group before them; drop, count and tat do not. A
// put binds ref to its bucket, replacing what ref named before; a bucket
// deleted by any entry unbinds its reference. For a reference bound to
// nothing (its bucket expired before the replay) drop, count and tat change
// nothing. Each entry sets a state, never adds to one, so replaying records
// in order stays idempotent. A put of a bucket with a 12-byte id takes
// about 24 bytes, a count 5 to 9, and the group is written once per run of
// entries of one limit.
const (
	recordBatch  = 0x10
	entryGroup   = 0x11
	recordPut    = 0x01
	recordDelete = 0x02

	recordBatch2 = 0x20
	entryPutRef  = 0x03
	entryDrop    = 0x04
	entryCount   = 0x05
	entryTAT     = 0x06
)

// MaxRecordBytes bounds the length of every record Changes and
// Frozen.Records produce: a larger batch is cut into several records. It is
// below what the smallest journal segment (64 KiB, less 56 bytes of headers)
// can hold in one record, so no batch can make a record a journal refuses.
const MaxRecordBytes = 63 << 10

// maxRecordBytes is MaxRecordBytes, the name the package uses.
const maxRecordBytes = MaxRecordBytes

// maxEntryBytes bounds the bytes one entry adds to a record, with the group
// entry that may come before it: every varint at its longest, the longest
// namespace and id. A record is cut before an entry that could take it past
// maxRecordBytes.
const maxEntryBytes = 3 + MaxNamespaceLen + 4*binary.MaxVarintLen64 + // group
	1 + binary.MaxVarintLen32 + 5*binary.MaxVarintLen64 + 2 + MaxIDLen // put (the other entries are shorter)

// full reports whether the next entry might take the record past
// maxRecordBytes; a record with no entry is never full.
func (w *recordWriter) full() bool {
	return w.n > 0 && len(w.b)+maxEntryBytes > maxRecordBytes
}

// recordWriter builds one record.
type recordWriter struct {
	b   []byte
	cur groupKey
	has bool // cur holds the group of the last entry
	n   int  // entries
	v2  bool // format 2
}

// reset starts a new format-1 record in buf's storage.
func (w *recordWriter) reset(buf []byte) {
	w.b, w.has, w.n, w.v2 = append(buf[:0], recordBatch), false, 0, false
}

// reset2 starts a new format-2 record in buf's storage.
func (w *recordWriter) reset2(buf []byte) {
	w.b, w.has, w.n, w.v2 = append(buf[:0], recordBatch2), false, 0, true
}

// group writes a group entry unless k is the current group.
func (w *recordWriter) group(k *groupKey) {
	if w.has && w.cur == *k {
		return
	}
	w.cur, w.has = *k, true
	b := append(w.b, entryGroup, byte(k.alg))
	b = binary.AppendUvarint(b, uint64(len(k.ns)))
	b = append(b, k.ns...)
	b = binary.AppendUvarint(b, uint64(k.scaleMs))
	b = binary.AppendUvarint(b, uint64(k.widthMs))
	b = binary.AppendUvarint(b, uint64(k.limit))
	w.b = binary.AppendUvarint(b, uint64(k.burst))
}

// put appends the state of a bucket of group k in window, binding nothing.
func (w *recordWriter) put(k *groupKey, window int64, s *slot) { w.putRef(k, window, 0, s) }

// putRef appends the state of a bucket of group k in window; in format 2
// it binds ref (0: none) to it.
func (w *recordWriter) putRef(k *groupKey, window int64, ref uint64, s *slot) {
	w.putFields(k, window, ref, s.count, s.aux, s.created-window*k.widthMs, s.modified-s.created, s.id)
}

// putCell is putRef for a stored bucket, c, of id.
func (w *recordWriter) putCell(k *groupKey, window int64, ref uint64, c *cell, id string) {
	created := c.createdOff()
	w.putFields(k, window, ref, c.count, c.aux, created, c.modifiedOff()-created, id)
}

// putFields appends a put: created is ms after the window's start,
// modified ms after created.
func (w *recordWriter) putFields(k *groupKey, window int64, ref uint64, count, aux, created, modified int64, id string) {
	w.group(k)
	var b []byte
	if w.v2 {
		b = binary.AppendUvarint(append(w.b, entryPutRef), ref)
	} else {
		b = append(w.b, recordPut)
	}
	b = binary.AppendVarint(b, window)
	b = binary.AppendUvarint(b, uint64(count))
	b = binary.AppendVarint(b, aux)
	b = binary.AppendVarint(b, created)
	b = binary.AppendVarint(b, modified)
	b = binary.AppendUvarint(b, uint64(len(id)))
	w.b = append(b, id...)
	w.n++
}

// del appends the deletion of a bucket of group k in window.
func (w *recordWriter) del(k *groupKey, window int64, id string) {
	w.group(k)
	b := append(w.b, recordDelete)
	b = binary.AppendVarint(b, window)
	b = binary.AppendUvarint(b, uint64(len(id)))
	w.b = append(b, id...)
	w.n++
}

// drop appends the deletion of the bucket bound to ref (format 2).
func (w *recordWriter) drop(ref uint64) {
	w.b = binary.AppendUvarint(append(w.b, entryDrop), ref)
	w.n++
}

// delta appends the new count (and for a GCRA bucket, TAT) of the bucket
// bound to ref (format 2).
func (w *recordWriter) delta(ref uint64, gcra bool, s *slot) {
	w.deltaFields(ref, gcra, s.count, s.aux, s.modified-s.created)
}

// deltaCell is delta for a stored bucket, c.
func (w *recordWriter) deltaCell(ref uint64, gcra bool, c *cell) {
	w.deltaFields(ref, gcra, c.count, c.aux, c.modifiedOff()-c.createdOff())
}

// deltaFields appends a count or tat entry; modified is ms after created.
func (w *recordWriter) deltaFields(ref uint64, gcra bool, count, aux, modified int64) {
	kind := byte(entryCount)
	if gcra {
		kind = entryTAT
	}
	b := binary.AppendUvarint(append(w.b, kind), ref)
	b = binary.AppendUvarint(b, uint64(count))
	if gcra {
		b = binary.AppendVarint(b, aux)
	}
	w.b = binary.AppendVarint(b, modified)
	w.n++
}

// entry appends d, as decodeRecord took it apart (a put's reference is
// written in format 2 only).
func (w *recordWriter) entry(d *decoded) {
	switch d.kind {
	case recordPut:
		w.putRef(&d.key, d.window, d.ref, &d.slot)
	case recordDelete:
		w.del(&d.key, d.window, d.slot.id)
	case entryDrop:
		w.drop(d.ref)
	default:
		w.delta(d.ref, d.kind == entryTAT, &d.slot)
	}
}

// appendRecord appends a format-1 record of one entry to b.
func appendRecord(b []byte, kind byte, k *groupKey, window int64, s *slot) []byte {
	var w recordWriter
	w.reset(b)
	if kind == recordDelete {
		w.del(k, window, s.id)
	} else {
		w.put(k, window, s)
	}
	return w.b
}

// decoded is one entry taken apart. For a put, delete and (format 2) its
// reference, kind is recordPut or recordDelete; for a drop, count or tat,
// its entry kind, with ref and, for count and tat, slot.count, slot.aux
// and slot.modified (ms after the bucket's created stamp).
type decoded struct {
	kind   byte
	key    groupKey
	window int64
	slot   slot
	ref    uint64
}

// recordReader reads the fields of one record, remembering the first error.
type recordReader struct {
	b   []byte
	err error
}

func (r *recordReader) fail(field, rule string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s %s", ErrBadRecord, field, rule)
	}
}

func (r *recordReader) byte(field string) byte {
	if r.err != nil || len(r.b) == 0 {
		r.fail(field, "is missing")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *recordReader) uvarint(field string, max uint64) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	switch {
	case n <= 0:
		r.fail(field, "is not a valid uvarint")
		return 0
	case v > max:
		r.fail(field, fmt.Sprintf("is %d, above %d", v, max))
		return 0
	}
	r.b = r.b[n:]
	return int64(v)
}

func (r *recordReader) varint(field string, lo, hi int64) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	switch {
	case n <= 0:
		r.fail(field, "is not a valid varint")
		return 0
	case v < lo || v > hi:
		r.fail(field, fmt.Sprintf("is %d, outside [%d, %d]", v, lo, hi))
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes reads n bytes, as a string that shares the record's memory: it is
// valid only as long as the record is, and whatever keeps it (a new
// group's namespace) copies it. Ids go from it straight into the table's
// arena, so that a replay allocates nothing per bucket.
func (r *recordReader) bytes(field string, n int64) string {
	if r.err != nil {
		return ""
	}
	if int64(len(r.b)) < n {
		r.fail(field, fmt.Sprintf("has %d bytes, want %d", len(r.b), n))
		return ""
	}
	if n == 0 {
		return ""
	}
	v := unsafe.String(&r.b[0], n)
	r.b = r.b[n:]
	return v
}

// maxMs bounds every time in a record (the largest ms count whose ns fits
// an int64), so that window arithmetic cannot overflow.
const maxMs = int64(1<<63-1) / int64(time.Millisecond)

// group reads the fields of a group entry into k.
func (r *recordReader) group(k *groupKey) {
	k.alg = Algorithm(r.byte("algorithm"))
	if r.err == nil && !k.alg.valid() {
		r.fail("algorithm", fmt.Sprintf("is %d, unknown", k.alg))
	}
	k.ns = r.bytes("namespace", r.uvarint("namespace length", MaxNamespaceLen))
	maxScaleMs := uint64(MaxScale / time.Millisecond)
	k.scaleMs = r.uvarint("scale", maxScaleMs)
	k.widthMs = r.uvarint("width", maxScaleMs)
	if r.err == nil && (k.scaleMs < 1 || k.widthMs < k.scaleMs || (!k.alg.gcra() && k.widthMs != k.scaleMs)) {
		r.fail("width", fmt.Sprintf("is %d ms for a scale of %d ms", k.widthMs, k.scaleMs))
	}
	k.limit = r.uvarint("limit", 1<<63-1)
	k.burst = r.uvarint("burst", 1<<63-1)
}

// entry reads a put or delete entry of group k into d.
func (r *recordReader) entry(d *decoded) {
	k := &d.key
	d.window = r.varint("window", -maxMs/k.widthMs, maxMs/k.widthMs-1)
	d.slot = slot{}
	if d.kind == recordPut {
		d.slot.count = r.uvarint("count", 1<<63-1)
		switch {
		case k.alg == SlidingWindow:
			d.slot.aux = r.varint("aux", 0, 1<<63-1)
		case k.alg.gcra():
			d.slot.aux = r.varint("aux", 0, 2*k.widthMs*msNs)
		default:
			d.slot.aux = r.varint("aux", 0, 0)
		}
		d.slot.created = d.window*k.widthMs + r.varint("created", 0, k.widthMs-1)
		d.slot.modified = d.slot.created + r.varint("modified", 0, k.widthMs-1)
	}
	n := r.uvarint("id length", MaxIDLen)
	if r.err == nil && n == 0 {
		r.fail("id", "is empty")
	}
	d.slot.id = r.bytes("id", n)
}

// maxRef is the largest reference a format-2 record may name.
const maxRef = 1 << 32

// maxTATAux bounds the TAT of a tat entry, which names no group: two of
// the widest windows, in ns.
const maxTATAux = 2 * int64(MaxScale)

// decodeRecord takes a record (format 1 or 2) apart, checking every
// field's range, and calls fn with each entry (d is reused between calls).
// It stops at the first error, from the record or from fn.
func decodeRecord(b []byte, fn func(d *decoded) error) error {
	var d decoded
	return decodeRecordInto(b, &d, fn)
}

// decodeRecordInto is decodeRecord with d, the caller's, as the entry
// passed to fn (a local would escape: one allocation per record).
func decodeRecordInto(b []byte, d *decoded, fn func(d *decoded) error) error {
	r := recordReader{b: b}
	format := r.byte("kind")
	if r.err == nil && format != recordBatch && format != recordBatch2 {
		r.fail("kind", fmt.Sprintf("is %#x, not a record (0x10 or 0x20)", format))
	}
	v2 := format == recordBatch2
	*d = decoded{}
	hasGroup, entries := false, 0
	for r.err == nil && len(r.b) > 0 {
		kind := r.byte("entry")
		switch {
		case kind == entryGroup:
			r.group(&d.key)
			hasGroup = true
			continue
		case kind == recordPut && !v2, kind == recordDelete, kind == entryPutRef && v2:
			if !hasGroup {
				r.fail("entry", "comes before any group")
				continue
			}
			d.ref = 0
			if kind == entryPutRef {
				d.ref = uint64(r.uvarint("ref", maxRef))
				kind = recordPut
			}
			d.kind = kind
			r.entry(d)
		case v2 && (kind == entryDrop || kind == entryCount || kind == entryTAT):
			d.kind, d.slot = kind, slot{}
			d.ref = uint64(r.uvarint("ref", maxRef))
			if r.err == nil && d.ref == 0 {
				r.fail("ref", "is 0, which names no bucket")
			}
			if kind != entryDrop {
				d.slot.count = r.uvarint("count", 1<<63-1)
			}
			if kind == entryTAT {
				d.slot.aux = r.varint("aux", 0, maxTATAux)
			}
			if kind != entryDrop {
				d.slot.modified = r.varint("modified", 0, maxMs)
			}
		default:
			r.fail("entry", fmt.Sprintf("kind is %#x, unknown", kind))
			continue
		}
		if r.err == nil {
			entries++
			if err := fn(d); err != nil {
				return err
			}
		}
	}
	if r.err == nil && entries == 0 {
		r.fail("record", "holds no entry")
	}
	return r.err
}
