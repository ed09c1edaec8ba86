package table

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// ErrBadRecord is matched (errors.Is) by every error Restore returns for a
// record it cannot decode.
var ErrBadRecord = errors.New("bad bucket record")

// Record kinds: the first byte of a record, which also versions its layout.
const (
	recordPut    = 0x01 // the full state of one bucket
	recordDelete = 0x02 // a bucket that no longer exists
)

// A record is the full state of one bucket (or its deletion), so replaying
// records is idempotent and the last one for a bucket wins:
//
//	kind       1 byte   0x01 put, 0x02 delete
//	algorithm  1 byte   0 fixed_window, 1 sliding_window, 2 token_bucket, 3 leaky_bucket
//	namespace  uvarint length (0 to MaxNamespaceLen), then the bytes
//	scale      uvarint  milliseconds
//	width      uvarint  milliseconds: the key windows' width (the scale, or a
//	                    token or leaky bucket's longer refill time)
//	limit      uvarint  0 with a namespace
//	burst      uvarint  0 with a namespace or for the windows
//	window     varint   floor(unix_ms / width_ms)
//	count      uvarint  put only
//	aux        varint   put only: a sliding window's previous count, a GCRA
//	                    bucket's TAT in ns after the window's start, else 0
//	created    varint   put only: unix ms minus the window's start
//	modified   varint   put only: unix ms minus created
//	id length  uvarint  1 to MaxIDLen
//	id         bytes
//
// A fixed-window record with a 12-byte id and no namespace takes about 32
// bytes.

// appendRecord appends the record of one bucket to b.
func appendRecord(b []byte, kind byte, k *groupKey, window int64, s *slot) []byte {
	b = append(b, kind, byte(k.alg))
	b = binary.AppendUvarint(b, uint64(len(k.ns)))
	b = append(b, k.ns...)
	b = binary.AppendUvarint(b, uint64(k.scaleMs))
	b = binary.AppendUvarint(b, uint64(k.widthMs))
	b = binary.AppendUvarint(b, uint64(k.limit))
	b = binary.AppendUvarint(b, uint64(k.burst))
	b = binary.AppendVarint(b, window)
	if kind == recordPut {
		b = binary.AppendUvarint(b, uint64(s.count))
		b = binary.AppendVarint(b, s.aux)
		b = binary.AppendVarint(b, s.created-window*k.widthMs)
		b = binary.AppendVarint(b, s.modified-s.created)
	}
	b = binary.AppendUvarint(b, uint64(len(s.id)))
	return append(b, s.id...)
}

// decoded is a record taken apart.
type decoded struct {
	kind   byte
	key    groupKey
	window int64
	slot   slot
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

// maxMs bounds every time in a record (the year 292277026 in ms is far
// beyond; this is the largest ms count whose ns fits an int64), so that
// window arithmetic cannot overflow.
const maxMs = int64(1<<63-1) / int64(time.Millisecond)

// bytes reads n bytes.
func (r *recordReader) bytes(field string, n int64) string {
	if r.err != nil {
		return ""
	}
	if int64(len(r.b)) < n {
		r.fail(field, fmt.Sprintf("has %d bytes, want %d", len(r.b), n))
		return ""
	}
	v := string(r.b[:n])
	r.b = r.b[n:]
	return v
}

// decodeRecord takes a record apart, checking every field's range.
func decodeRecord(b []byte) (decoded, error) {
	r := recordReader{b: b}
	var d decoded
	k := &d.key
	d.kind = r.byte("kind")
	if r.err == nil && d.kind != recordPut && d.kind != recordDelete {
		r.fail("kind", fmt.Sprintf("is %#x, not put (0x01) or delete (0x02)", d.kind))
	}
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
	if r.err == nil {
		// Windows whose start in ms fits the table's time range.
		d.window = r.varint("window", -maxMs/k.widthMs, maxMs/k.widthMs-1)
	}
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
	if r.err == nil && (n == 0 || int64(len(r.b)) != n) {
		r.fail("id", fmt.Sprintf("has %d bytes, want %d (and at least 1)", len(r.b), n))
	}
	if r.err != nil {
		return decoded{}, r.err
	}
	d.slot.id = string(r.b)
	return d, nil
}
