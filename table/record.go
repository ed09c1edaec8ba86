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
//	algorithm  1 byte
//	scale      uvarint  milliseconds
//	limit      uvarint
//	window     varint   floor(unix_ms / scale_ms)
//	count      uvarint  put only
//	created    varint   put only: unix ms minus the window's start
//	modified   varint   put only: unix ms minus created
//	id length  uvarint  1 to MaxIDLen
//	id         bytes
//
// A record with a 12-byte id takes about 30 bytes.

// appendRecord appends the record of one bucket to b.
func appendRecord(b []byte, kind byte, k groupKey, window int64, s *slot) []byte {
	b = append(b, kind, byte(k.alg))
	b = binary.AppendUvarint(b, uint64(k.scaleMs))
	b = binary.AppendUvarint(b, uint64(k.limit))
	b = binary.AppendVarint(b, window)
	if kind == recordPut {
		b = binary.AppendUvarint(b, uint64(s.count))
		b = binary.AppendVarint(b, s.created-window*k.scaleMs)
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

// decodeRecord takes a record apart, checking every field's range.
func decodeRecord(b []byte) (decoded, error) {
	r := recordReader{b: b}
	var d decoded
	d.kind = r.byte("kind")
	if r.err == nil && d.kind != recordPut && d.kind != recordDelete {
		r.fail("kind", fmt.Sprintf("is %#x, not put (0x01) or delete (0x02)", d.kind))
	}
	d.key.alg = Algorithm(r.byte("algorithm"))
	if r.err == nil && !d.key.alg.valid() {
		r.fail("algorithm", fmt.Sprintf("is %d, unknown", d.key.alg))
	}
	d.key.scaleMs = r.uvarint("scale", uint64(MaxScale/time.Millisecond))
	if r.err == nil && d.key.scaleMs < 1 {
		r.fail("scale", "is 0")
	}
	d.key.limit = r.uvarint("limit", 1<<63-1)
	if r.err == nil {
		// Windows whose start in ms fits the table's time range.
		d.window = r.varint("window", -maxMs/d.key.scaleMs, maxMs/d.key.scaleMs-1)
	}
	if d.kind == recordPut {
		d.slot.count = r.uvarint("count", 1<<63-1)
		d.slot.created = d.window*d.key.scaleMs + r.varint("created", 0, d.key.scaleMs-1)
		d.slot.modified = d.slot.created + r.varint("modified", 0, d.key.scaleMs-1)
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
