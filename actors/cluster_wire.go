// The members' wire format: what a forwarded batch, its reply and the
// messages of a handoff hold, as bytes that package peer carries. Every
// message starts with a version byte; integers are varints; a string is
// its length (uvarint) and its bytes. Decoding checks every length and
// range and reports the first fault (wireReader), so a damaged or hostile
// message is refused, never trusted. A well-formed request that is not
// valid here (table.Request.Validate) refuses only its own item, answered
// stInvalid: the members disagree on the rules (another version), and the
// batch's other calls are decided.
//
//	forward  1 sender(str) incarnation(u) seq(u) n(u) n×item
//	item     op(1) then, for opAll, unit(u) m(u) m×(vshard(u) epoch(u) request),
//	         else vshard(u) epoch(u) request
//	request  id(str) algorithm(1) scale_ms(u) limit(u) burst(u) hits(u) namespace(str) window(u)
//	reply    1 n(u) n×(status(1) [result, if status is ok])
//	result   opCheck: decision window(u); opRefund: decision; opReset, opResetID: n(u);
//	         opBuckets: m(u) m×bucket; opAll: allowed(1) m(u) m×(decision window(u))
//	decision flags(1: allowed 1, full 2) count(v) limit(u) remaining(u) reset_ns(u) retry_ns(u)
//	bucket   id(str) namespace(str) algorithm(1) scale_ms(u) limit(u) burst(u) window(v)
//	         count(v) previous(v) full_at_ns(v) created_ms(v) modified_ms(v) expired(1)
//	prepare  1 xfer(u) from(str) n(u) n×(vshard(u) epoch(u)) m(u) m×(vshard(u) record(bytes)) last(1)
//	commit   1 xfer(u) epoch(u) n(u) n×vshard(u)
//	abort    1 xfer(u) n(u) n×vshard(u)

package actors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// wireVersion is the first byte of every message.
const wireVersion = 1

// opAll is a forwarded item holding a CheckAll unit for one member.
const opAll op = 100

// Status of a forwarded item in its reply.
const (
	stOK          byte = iota // decided: the result follows
	stMoved                   // not served here at that epoch: not counted, route again
	stUnavailable             // the shard crashed holding it (ErrUnavailable)
	stJournal                 // the journal refused its batch (ErrJournal)
	stStopped                 // the member is stopping: not counted, route again
	stUnknown                 // decided, but the member's lease lapsed meanwhile (ErrClusterUnavailable)
	stInvalid                 // refused, not decided: the member found the request invalid (table.ErrInvalid)
)

// errBadWire is matched by every decoding error.
var errBadWire = errors.New("actors: bad cluster message")

// wireWriter appends the fields of a message.
type wireWriter struct{ b []byte }

func (w *wireWriter) byte(v byte)     { w.b = append(w.b, v) }
func (w *wireWriter) uvarint(v int64) { w.b = binary.AppendUvarint(w.b, uint64(v)) }
func (w *wireWriter) u64(v uint64)    { w.b = binary.AppendUvarint(w.b, v) }
func (w *wireWriter) varint(v int64)  { w.b = binary.AppendVarint(w.b, v) }
func (w *wireWriter) str(s string) {
	w.b = binary.AppendUvarint(w.b, uint64(len(s)))
	w.b = append(w.b, s...)
}
func (w *wireWriter) bytes(p []byte) {
	w.b = binary.AppendUvarint(w.b, uint64(len(p)))
	w.b = append(w.b, p...)
}

func (w *wireWriter) request(r *table.Request) {
	w.str(r.ID)
	w.byte(byte(r.Algorithm))
	w.uvarint(r.Scale.Milliseconds())
	w.uvarint(r.Limit)
	w.uvarint(r.Burst)
	w.uvarint(r.Hits)
	w.str(r.Namespace)
	w.uvarint(r.Window)
}

func (w *wireWriter) decision(d *table.Decision) {
	var f byte
	if d.Allowed {
		f |= 1
	}
	if d.Full {
		f |= 2
	}
	w.byte(f)
	w.varint(d.Count)
	w.uvarint(d.Limit)
	w.uvarint(d.Remaining)
	w.uvarint(int64(d.ResetAfter))
	w.uvarint(int64(d.RetryAfter))
}

func (w *wireWriter) bucket(b *table.Bucket) {
	w.str(b.ID)
	w.str(b.Namespace)
	w.byte(byte(b.Algorithm))
	w.uvarint(b.Scale.Milliseconds())
	w.uvarint(b.Limit)
	w.uvarint(b.Burst)
	w.varint(b.Window)
	w.varint(b.Count)
	w.varint(b.Previous)
	var full int64
	if !b.FullAt.IsZero() {
		full = b.FullAt.UnixNano()
	}
	w.varint(full)
	w.varint(b.CreatedAt.UnixMilli())
	w.varint(b.ModifiedAt.UnixMilli())
	if b.Expired {
		w.byte(1)
	} else {
		w.byte(0)
	}
}

// wireReader reads the fields of a message, remembering the first fault.
// With s, the message as a string, the strings it reads are parts of s
// rather than copies of their own.
type wireReader struct {
	b   []byte
	s   string
	err error
}

func (r *wireReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errBadWire, what)
	}
}

func (r *wireReader) byte(what string) byte {
	if r.err != nil || len(r.b) == 0 {
		r.fail(what + " missing")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *wireReader) u64(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what + " is not a uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// uvarint reads an unsigned value of at most max.
func (r *wireReader) uvarint(what string, max int64) int64 {
	v := r.u64(what)
	if v > uint64(max) {
		r.fail(fmt.Sprintf("%s %d is above %d", what, v, max))
		return 0
	}
	return int64(v)
}

func (r *wireReader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what + " is not a varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// raw reads a length-prefixed run of at most max bytes, which aliases the message.
func (r *wireReader) raw(what string, max int) []byte {
	if r.err != nil {
		return nil
	}
	u, k := binary.Uvarint(r.b)
	switch {
	case k <= 0:
		r.fail(what + " length is not a uvarint")
		return nil
	case u > uint64(max):
		r.fail(fmt.Sprintf("%s length %d is above %d", what, u, max))
		return nil
	}
	r.b = r.b[k:]
	n := int64(u)
	if int64(len(r.b)) < n {
		r.fail(what + " is cut short")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *wireReader) str(what string, max int) string {
	v := r.raw(what, max)
	if r.s == "" || len(v) == 0 {
		return string(v)
	}
	end := len(r.s) - len(r.b)
	return r.s[end-len(v) : end]
}

// count reads a number of entries, each at least min bytes long, that the
// rest of the message can hold: a hostile count cannot make us allocate.
func (r *wireReader) count(what string, min int) int {
	n := r.uvarint(what, int64(len(r.b)/min))
	return int(n)
}

// end reports the first fault, or trailing bytes.
func (r *wireReader) end() error {
	if r.err == nil && len(r.b) > 0 {
		r.fail(fmt.Sprintf("%d trailing bytes", len(r.b)))
	}
	return r.err
}

const maxMs = int64(table.MaxScale / time.Millisecond)

// request reads a request and returns why it is not valid, if it is not:
// a request this member refuses (one of another version's, or a sender's
// bug) is answered as invalid, alone, and the message is not refused.
func (r *wireReader) request(q *table.Request) error {
	q.ID = r.str("id", table.MaxIDLen)
	q.Algorithm = table.Algorithm(r.byte("algorithm"))
	q.Scale = time.Duration(r.uvarint("scale", maxMs)) * time.Millisecond
	q.Limit = r.uvarint("limit", 1<<62)
	q.Burst = r.uvarint("burst", 1<<62)
	q.Hits = r.uvarint("hits", 1<<62)
	q.Namespace = r.str("namespace", table.MaxNamespaceLen)
	q.Window = r.uvarint("window", 1<<62)
	if r.err != nil {
		return nil
	}
	return q.Validate()
}

func (r *wireReader) decision(d *table.Decision) {
	f := r.byte("decision flags")
	d.Allowed, d.Full = f&1 != 0, f&2 != 0
	d.Count = r.varint("count")
	d.Limit = r.uvarint("limit", 1<<62)
	d.Remaining = r.uvarint("remaining", 1<<62)
	d.ResetAfter = time.Duration(r.uvarint("reset", 1<<62))
	d.RetryAfter = time.Duration(r.uvarint("retry", 1<<62))
}

func (r *wireReader) bucket(b *table.Bucket) {
	b.ID = r.str("bucket id", table.MaxIDLen)
	b.Namespace = r.str("bucket namespace", table.MaxNamespaceLen)
	b.Algorithm = table.Algorithm(r.byte("bucket algorithm"))
	b.Scale = time.Duration(r.uvarint("bucket scale", maxMs)) * time.Millisecond
	b.Limit = r.uvarint("bucket limit", 1<<62)
	b.Burst = r.uvarint("bucket burst", 1<<62)
	b.Window = r.varint("bucket window")
	b.Count = r.varint("bucket count")
	b.Previous = r.varint("bucket previous")
	if full := r.varint("bucket full_at"); full != 0 {
		b.FullAt = time.Unix(0, full)
	}
	b.CreatedAt = time.UnixMilli(r.varint("bucket created"))
	b.ModifiedAt = time.UnixMilli(r.varint("bucket modified"))
	b.Expired = r.byte("bucket expired") != 0
}

// fwdHeader identifies a forwarded batch: its sender's process, and its
// sequence number there.
type fwdHeader struct {
	sender      string
	incarnation uint64
	seq         uint64
}

// encodeForward appends a batch of calls to b, for the member they go to.
func encodeForward(b []byte, h fwdHeader, calls []*call) []byte {
	// Grow b once: a check takes its id, its namespace and some 30 bytes.
	size := 32 + len(h.sender)
	for _, c := range calls {
		size += 40 + len(c.req.ID) + len(c.req.Namespace)
	}
	b = slices.Grow(b, size)
	w := wireWriter{b: append(b, wireVersion)}
	w.str(h.sender)
	w.u64(h.incarnation)
	w.u64(h.seq)
	w.uvarint(int64(len(calls)))
	for _, c := range calls {
		w.byte(byte(c.op))
		if c.op == opAll {
			a := c.all
			w.u64(a.unit)
			w.uvarint(int64(len(a.reqs)))
			for i := range a.reqs {
				w.uvarint(int64(a.vshards[i]))
				w.uvarint(a.epochs[i])
				w.request(&a.reqs[i])
			}
			continue
		}
		w.uvarint(int64(c.vshard))
		w.uvarint(c.epoch)
		w.request(&c.req)
	}
	return w.b
}

// decodeForward decodes a forwarded batch into calls made by get, which
// set their op, request, vshard and epoch (and, for opAll, all).
func decodeForward(b []byte, vshards int, get func() *call) (fwdHeader, []*call, error) {
	// One copy of the message holds every id and namespace of the batch.
	r := wireReader{b: b, s: string(b)}
	var h fwdHeader
	if v := r.byte("version"); r.err == nil && v != wireVersion {
		r.fail(fmt.Sprintf("version %d, not %d", v, wireVersion))
	}
	h.sender = r.str("sender", 256)
	h.incarnation = r.u64("incarnation")
	h.seq = r.u64("seq")
	n := r.count("items", 4)
	calls := make([]*call, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		c := get()
		calls = append(calls, c)
		c.op = op(r.byte("op"))
		switch c.op {
		case opCheck, opRefund, opReset, opBuckets, opResetID:
			c.vshard = int32(r.uvarint("vshard", int64(vshards-1)))
			c.epoch = r.uvarint("epoch", 1<<62)
			c.err = r.request(&c.req)
		case opAll:
			unit := r.u64("unit id")
			m := r.count("unit", 4)
			if r.err == nil && (m < 1 || m > MaxCheckAll) {
				r.fail(fmt.Sprintf("a unit of %d checks", m))
			}
			a := &allCall{unit: unit, reqs: make([]table.Request, m), vshards: make([]int32, m), epochs: make([]int64, m)}
			c.all = a
			for j := 0; j < m && r.err == nil; j++ {
				a.vshards[j] = int32(r.uvarint("vshard", int64(vshards-1)))
				a.epochs[j] = r.uvarint("epoch", 1<<62)
				if err := r.request(&a.reqs[j]); err != nil && c.err == nil {
					c.err = fmt.Errorf("check %d of the unit: %w", j, err) // the whole unit is refused
				}
			}
		default:
			r.fail(fmt.Sprintf("op %d", c.op))
		}
	}
	return h, calls, r.end()
}

// encodeReply appends the answers of calls (decided, or failed with err
// in c.err) to b.
func encodeReply(b []byte, calls []*call) []byte {
	// A check's answer takes about 20 bytes: grow b once, not as it fills.
	b = slices.Grow(b, 4+24*len(calls))
	w := wireWriter{b: append(b, wireVersion)}
	w.uvarint(int64(len(calls)))
	for _, c := range calls {
		st := statusOf(c.err)
		w.byte(st)
		if st != stOK {
			continue
		}
		switch c.op {
		case opCheck:
			w.decision(&c.res.Decision)
			w.uvarint(c.res.Window)
		case opRefund:
			w.decision(&c.res.Decision)
		case opReset, opResetID:
			w.uvarint(int64(c.n))
		case opBuckets:
			w.uvarint(int64(len(c.buckets)))
			for i := range c.buckets {
				w.bucket(&c.buckets[i])
			}
		case opAll:
			a := c.all
			if a.allowed {
				w.byte(1)
			} else {
				w.byte(0)
			}
			w.uvarint(int64(len(a.decs)))
			for i := range a.decs {
				w.decision(&a.decs[i])
				w.uvarint(a.wins[i])
			}
		}
	}
	return w.b
}

// statusOf is the wire status of a call's error.
func statusOf(err error) byte {
	switch {
	case err == nil:
		return stOK
	case errors.Is(err, errMoved), errors.Is(err, errLeaseLapsed):
		return stMoved
	case errors.Is(err, ErrStopped):
		return stStopped
	case errors.Is(err, ErrJournal):
		return stJournal
	case errors.Is(err, ErrClusterUnavailable):
		return stUnknown
	case errors.Is(err, table.ErrInvalid):
		return stInvalid
	}
	return stUnavailable
}

// errOfStatus is the error a caller gets for a status from member.
func errOfStatus(st byte, member string) error {
	switch st {
	case stMoved:
		return errMoved
	case stStopped:
		return errMoved
	case stJournal:
		return fmt.Errorf("%w: %w: on member %s", ErrUnavailable, ErrJournal, member)
	case stUnknown:
		return fmt.Errorf("%w: member %s lost its lease while deciding", ErrClusterUnavailable, member)
	case stInvalid:
		// Valid here, or it would not have been sent: the members disagree.
		return fmt.Errorf("%w: member %s, the owner, refused the request as invalid (do the members run the same version?)", table.ErrInvalid, member)
	}
	return fmt.Errorf("%w: on member %s", ErrUnavailable, member)
}

// decodeReply fills calls, the batch sent, from its reply.
func decodeReply(b []byte, calls []*call, member string) error {
	r := wireReader{b: b}
	if v := r.byte("version"); r.err == nil && v != wireVersion {
		r.fail(fmt.Sprintf("version %d, not %d", v, wireVersion))
	}
	if n := r.count("answers", 1); r.err == nil && n != len(calls) {
		r.fail(fmt.Sprintf("%d answers for %d items", n, len(calls)))
	}
	for _, c := range calls {
		if r.err != nil {
			break
		}
		st := r.byte("status")
		if st != stOK {
			c.err = errOfStatus(st, member)
			continue
		}
		c.err = nil
		switch c.op {
		case opCheck:
			r.decision(&c.res.Decision)
			c.res.Window = r.uvarint("window", 1<<62)
		case opRefund:
			r.decision(&c.res.Decision)
		case opReset, opResetID:
			c.n = int(r.uvarint("deleted", 1<<20))
		case opBuckets:
			m := r.count("buckets", 16)
			c.buckets = make([]table.Bucket, m)
			for i := range c.buckets {
				r.bucket(&c.buckets[i])
			}
		case opAll:
			a := c.all
			a.allowed = r.byte("allowed") != 0
			if m := r.count("decisions", 7); r.err == nil && m != len(a.reqs) {
				r.fail(fmt.Sprintf("%d decisions for %d checks", m, len(a.reqs)))
			}
			a.decs = make([]table.Decision, len(a.reqs))
			a.wins = make([]int64, len(a.reqs))
			for i := range a.decs {
				r.decision(&a.decs[i])
				a.wins[i] = r.uvarint("window", 1<<62)
			}
		}
	}
	return r.end()
}

// prepareMsg is one part of a handoff: the records of some of the vshards
// moving, and on the last part the promise that nothing else follows.
type prepareMsg struct {
	xfer    uint64
	from    string
	vshards []int32 // all the vshards moving, with epochs
	epochs  []int64
	recs    []vrecord
	last    bool
}

// vrecord is a table record holding buckets of one vshard only.
type vrecord struct {
	vshard int32
	rec    []byte
}

func encodePrepare(m *prepareMsg) []byte {
	w := wireWriter{b: []byte{wireVersion}}
	w.u64(m.xfer)
	w.str(m.from)
	w.uvarint(int64(len(m.vshards)))
	for i, v := range m.vshards {
		w.uvarint(int64(v))
		w.uvarint(m.epochs[i])
	}
	w.uvarint(int64(len(m.recs)))
	for _, r := range m.recs {
		w.uvarint(int64(r.vshard))
		w.bytes(r.rec)
	}
	if m.last {
		w.byte(1)
	} else {
		w.byte(0)
	}
	return w.b
}

func decodePrepare(b []byte, vshards int) (prepareMsg, error) {
	r := wireReader{b: b}
	var m prepareMsg
	if v := r.byte("version"); r.err == nil && v != wireVersion {
		r.fail(fmt.Sprintf("version %d, not %d", v, wireVersion))
	}
	m.xfer = r.u64("xfer")
	m.from = r.str("from", 256)
	n := r.count("vshards", 2)
	for i := 0; i < n && r.err == nil; i++ {
		m.vshards = append(m.vshards, int32(r.uvarint("vshard", int64(vshards-1))))
		m.epochs = append(m.epochs, r.uvarint("epoch", 1<<62))
	}
	k := r.count("records", 2)
	for i := 0; i < k && r.err == nil; i++ {
		v := int32(r.uvarint("vshard", int64(vshards-1)))
		m.recs = append(m.recs, vrecord{vshard: v, rec: r.raw("record", table.MaxRecordBytes)})
	}
	m.last = r.byte("last") != 0
	return m, r.end()
}

// moveMsg ends a handoff: a commit at epoch, or (epoch 0) an abort.
type moveMsg struct {
	xfer    uint64
	epoch   int64
	vshards []int32
}

func encodeMove(m *moveMsg) []byte {
	w := wireWriter{b: []byte{wireVersion}}
	w.u64(m.xfer)
	w.uvarint(m.epoch)
	w.uvarint(int64(len(m.vshards)))
	for _, v := range m.vshards {
		w.uvarint(int64(v))
	}
	return w.b
}

func decodeMove(b []byte, vshards int) (moveMsg, error) {
	r := wireReader{b: b}
	var m moveMsg
	if v := r.byte("version"); r.err == nil && v != wireVersion {
		r.fail(fmt.Sprintf("version %d, not %d", v, wireVersion))
	}
	m.xfer = r.u64("xfer")
	m.epoch = r.uvarint("epoch", 1<<62)
	n := r.count("vshards", 1)
	for i := 0; i < n && r.err == nil; i++ {
		m.vshards = append(m.vshards, int32(r.uvarint("vshard", int64(vshards-1))))
	}
	return m, r.end()
}
