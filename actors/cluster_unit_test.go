package actors

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// fencedCluster is a member without etcd: vshards 0 and 1 active at
// epoch 10, 2 moving, the others not served here; its lease deadline at
// monotonic 1s, its clock at *now.
func fencedCluster(now *atomic.Int64) *cluster {
	cl := &cluster{n: 8, vs: make([]vshard, 8), mono: func() time.Duration { return time.Duration(now.Load()) }}
	cl.vs[0] = vshard{state: vsActive, epoch: 10}
	cl.vs[1] = vshard{state: vsActive, epoch: 10}
	cl.vs[2] = vshard{state: vsMoving, epoch: 10}
	cl.deadline.Store(int64(time.Second))
	return cl
}

func TestFenceAnswersWhatIsNotServedHereUncounted(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	cl := fencedCluster(&now)
	mk := func(v int32, epoch int64) *call {
		return &call{vshard: v, epoch: epoch, done: make(chan struct{}, 1)}
	}
	served := []*call{mk(0, 10), mk(1, 3), mk(0, 0)}
	moved := []*call{mk(0, 11), mk(2, 10), mk(5, 1)}
	cancelled := mk(7, 1)
	cancelled.state.Store(stateCancelled)
	batch := []*call{served[0], moved[0], served[1], moved[1], cancelled, served[2], moved[2]}
	kept := cl.fence(batch)
	if want := []*call{served[0], served[1], cancelled, served[2]}; !slices.Equal(kept, want) {
		t.Fatalf("kept %d calls, want the 3 served here and the cancelled one (left for serve to skip)", len(kept))
	}
	for i, c := range moved {
		if c.state.Load() != stateTaken || !errors.Is(c.err, errMoved) || len(c.done) != 1 {
			t.Fatalf("moved call %d: state %d, err %v, signalled %d; want taken, errMoved, 1", i, c.state.Load(), c.err, len(c.done))
		}
	}
	if got := cl.stats.fenced.Load(); got != 3 {
		t.Fatalf("fenced %d, want 3", got)
	}
	// Past the lease deadline nothing is served, whatever the vshard.
	now.Store(int64(time.Second))
	late := []*call{mk(0, 10), mk(1, 10)}
	if kept := cl.fence(slices.Clone(late)); len(kept) != 0 {
		t.Fatalf("past the deadline fence kept %d calls, want 0", len(kept))
	}
	for _, c := range late {
		if !errors.Is(c.err, errLeaseLapsed) {
			t.Fatalf("past the deadline: %v, want errLeaseLapsed", c.err)
		}
	}
	if err := cl.lapsedErr(); !errors.Is(err, ErrClusterUnavailable) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a batch decided past the deadline: %v, want ErrClusterUnavailable (an ErrUnavailable)", err)
	}
	now.Store(int64(time.Second) - 1)
	if err := cl.lapsedErr(); err != nil {
		t.Fatalf("a batch decided before the deadline: %v, want nil", err)
	}
}

func TestForwardWireRoundTrip(t *testing.T) {
	t.Parallel()
	pol := table.Policy{Algorithm: table.TokenBucket, Scale: 1500 * time.Millisecond, Limit: 40, Burst: 7}
	calls := []*call{
		{op: opCheck, vshard: 5, epoch: 77, req: table.Request{ID: "alice", Policy: pol, Hits: 3, Namespace: "api"}},
		{op: opRefund, vshard: 0, epoch: 1, req: table.Request{ID: "bob", Policy: pol, Hits: 2, Window: 1_700_000_000_123}},
		{op: opReset, vshard: 63, epoch: 9, req: table.Request{ID: "carol", Policy: pol}},
		{op: opBuckets, vshard: 2, epoch: 9, req: idRequest("dave")},
		{op: opAll, all: &allCall{unit: 42, reqs: []table.Request{{ID: "e", Policy: pol, Hits: 1}, {ID: "f", Policy: pol, Hits: 1}}, vshards: []int32{1, 2}, epochs: []int64{3, 4}}},
		{op: opResetID, vshard: 11, epoch: 9, req: idRequest("erin")},
	}
	calls[5].req.Namespace = "CL.THROTTLE"
	h := fwdHeader{sender: "m-1", incarnation: 99, seq: 12345}
	b := encodeForward(nil, h, calls)
	gh, got, err := decodeForward(b, 64, func() *call { return &call{} })
	if err != nil || gh != h || len(got) != len(calls) {
		t.Fatalf("decode: header %+v, %d calls, %v", gh, len(got), err)
	}
	for i, c := range calls {
		g := got[i]
		if g.op != c.op || g.vshard != c.vshard || g.epoch != c.epoch || g.req != c.req {
			t.Fatalf("call %d: got %+v, want %+v", i, g, c)
		}
	}
	if a := got[4].all; a.unit != 42 || !slices.Equal(a.reqs, calls[4].all.reqs) || !slices.Equal(a.vshards, []int32{1, 2}) || !slices.Equal(a.epochs, []int64{3, 4}) {
		t.Fatalf("unit: got %+v", got[4].all)
	}
	// The reply.
	d := table.Decision{Allowed: true, Count: 3, Limit: 7, Remaining: 4, ResetAfter: time.Second, RetryAfter: 0, Full: false}
	got[0].res = table.Reservation{Decision: d, Window: 1_700_000_000_000}
	got[1].err = errMoved
	got[2].n = 2
	got[3].buckets = []table.Bucket{{ID: "dave", Policy: table.Policy{Scale: time.Second, Limit: 5}, Window: 17, Count: 2,
		CreatedAt: time.UnixMilli(1000), ModifiedAt: time.UnixMilli(1500), FullAt: time.Unix(0, 123456789), Expired: true}}
	got[4].all.allowed = false
	got[4].all.decs = []table.Decision{d, {Full: true, Limit: 7, RetryAfter: time.Second}}
	got[4].all.wins = []int64{5, 0}
	got[5].n = 3
	rep := encodeReply(nil, got)
	back := make([]*call, len(calls))
	for i, c := range calls {
		back[i] = &call{op: c.op}
		if c.all != nil {
			back[i].all = &allCall{reqs: c.all.reqs}
		}
	}
	if err := decodeReply(rep, back, "m-2"); err != nil {
		t.Fatal(err)
	}
	if back[0].err != nil || back[0].res != got[0].res {
		t.Fatalf("check: got %+v, %v", back[0].res, back[0].err)
	}
	if !errors.Is(back[1].err, errMoved) || back[2].n != 2 || !slices.Equal(back[3].buckets, got[3].buckets) || back[5].err != nil || back[5].n != 3 {
		t.Fatalf("refund %v, reset %d, buckets %+v, reset of an id %d (%v)", back[1].err, back[2].n, back[3].buckets, back[5].n, back[5].err)
	}
	if a := back[4].all; a.allowed || !slices.Equal(a.decs, got[4].all.decs) || !slices.Equal(a.wins, []int64{5, 0}) {
		t.Fatalf("unit: got %+v", a)
	}
	// Errors keep their kind across the wire.
	for _, tc := range []struct {
		err  error
		want error
	}{{ErrStopped, errMoved}, {errLeaseLapsed, errMoved}, {ErrUnavailable, ErrUnavailable},
		{errors.Join(ErrUnavailable, ErrJournal), ErrJournal}, {ErrClusterUnavailable, ErrClusterUnavailable}} {
		c := []*call{{op: opCheck, err: tc.err}}
		r := []*call{{op: opCheck}}
		if err := decodeReply(encodeReply(nil, c), r, "m"); err != nil || !errors.Is(r[0].err, tc.want) {
			t.Fatalf("%v across the wire: %v (decode %v), want %v", tc.err, r[0].err, err, tc.want)
		}
	}
}

func TestForwardWireRefusesDamage(t *testing.T) {
	t.Parallel()
	req := table.Request{ID: "alice", Policy: table.Policy{Scale: time.Second, Limit: 5}, Hits: 1}
	b := encodeForward(nil, fwdHeader{sender: "m", seq: 1}, []*call{{op: opCheck, vshard: 3, epoch: 1, req: req}})
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"version", append([]byte{9}, b[1:]...)},
		{"cut", b[:len(b)-1]},
		{"trailing", append(slices.Clone(b), 0)},
		{"vshard out of range", encodeForward(nil, fwdHeader{}, []*call{{op: opCheck, vshard: 64, req: req}})},
		{"huge count", []byte{wireVersion, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f}},
	} {
		if _, _, err := decodeForward(tc.b, 64, func() *call { return &call{} }); !errors.Is(err, errBadWire) {
			t.Errorf("%s: got %v, want errBadWire", tc.name, err)
		}
	}
}

// TestForwardInvalidRequestAnsweredAlone: a well-formed request the owner
// finds invalid (of another version's rules, or a sender's bug) is answered
// invalid, its CheckAll unit with it, and the batch's other calls are
// decided: the message is not refused, which ended the stream and failed
// every call in flight on it (a Buckets call did so until it sent a policy).
func TestForwardInvalidRequestAnsweredAlone(t *testing.T) {
	t.Parallel()
	_, cl := loneMember(t, ClusterConfig{Etcd: []string{"http://127.0.0.1:1"}})
	good := table.Request{ID: "alice", Policy: table.Policy{Scale: time.Second, Limit: 5}, Hits: 1}
	bad := table.Request{ID: "bob"} // no policy
	calls := []*call{
		{op: opCheck, vshard: 3, epoch: 1, req: bad},
		{op: opCheck, vshard: 3, epoch: 1, req: good},
		{op: opAll, all: &allCall{unit: 1, reqs: []table.Request{good, bad}, vshards: []int32{1, 2}, epochs: []int64{1, 1}}},
	}
	_, got, err := decodeForward(encodeForward(nil, fwdHeader{sender: "a", seq: 1}, calls), cl.n, func() *call { return &call{} })
	if err != nil || len(got) != 3 || !errors.Is(got[0].err, table.ErrInvalid) || got[1].err != nil || !errors.Is(got[2].err, table.ErrInvalid) {
		t.Fatalf("decode: %v, calls %+v", err, got)
	}
	sh := cl.shardOf(3)
	sh.mu.Lock()
	cl.vs[3] = vshard{state: vsActive, epoch: 1, since: time.Now()} // served here
	sh.mu.Unlock()
	rep, err := cl.decideBatch(encodeForward(nil, fwdHeader{sender: "a", incarnation: 1, seq: 2}, calls))
	if err != nil {
		t.Fatalf("decideBatch refused the batch: %v", err)
	}
	back := []*call{{op: opCheck}, {op: opCheck}, {op: opAll, all: &allCall{reqs: make([]table.Request, 2)}}}
	seq, n := binary.Uvarint(rep) // the reply follows its batch's seq
	if seq != 2 {
		t.Fatalf("reply to seq %d, want 2", seq)
	}
	if err := decodeReply(rep[n:], back, "b"); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(back[0].err, table.ErrInvalid) || errors.Is(back[0].err, ErrUnavailable) || !strings.Contains(back[0].err.Error(), "member b, the owner, refused") {
		t.Errorf("the invalid check: %v, want ErrInvalid from b", back[0].err)
	}
	if d := back[1].res.Decision; back[1].err != nil || !d.Allowed || d.Count != 1 {
		t.Errorf("the valid check beside it: %+v, %v; want decided, allowed at count 1", d, back[1].err)
	}
	if !errors.Is(back[2].err, table.ErrInvalid) {
		t.Errorf("the unit holding the invalid check: %v, want ErrInvalid", back[2].err)
	}
}

func FuzzDecodeForward(f *testing.F) {
	req := table.Request{ID: "alice", Policy: table.Policy{Scale: time.Second, Limit: 5}, Hits: 1}
	f.Add(encodeForward(nil, fwdHeader{sender: "m", seq: 1}, []*call{{op: opCheck, vshard: 3, epoch: 1, req: req}}))
	f.Add(encodeForward(nil, fwdHeader{sender: "m", seq: 2}, []*call{{op: opAll, all: &allCall{reqs: []table.Request{req}, vshards: []int32{1}, epochs: []int64{1}}}}))
	f.Add(encodePrepare(&prepareMsg{xfer: 1, from: "a", vshards: []int32{1}, epochs: []int64{2}, recs: []vrecord{{vshard: 1, rec: []byte{0x10}}}, last: true}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, calls, err := decodeForward(b, 64, func() *call { return &call{} })
		if err == nil {
			for _, c := range calls {
				switch {
				case c.err != nil:
					if !errors.Is(c.err, table.ErrInvalid) {
						t.Fatalf("refused %+v with %v, want ErrInvalid", c, c.err)
					}
				case c.op != opAll && (c.vshard < 0 || c.vshard >= 64 || c.req.Validate() != nil):
					t.Fatalf("accepted %+v", c)
				}
			}
			_ = decodeReply(encodeReply(nil, calls), calls, "m")
		}
		_, _ = decodePrepare(b, 64)
		_, _ = decodeMove(b, 64)
		_ = decodeReply(b, []*call{{op: opCheck}, {op: opBuckets}, {op: opAll, all: &allCall{reqs: make([]table.Request, 2)}}}, "m")
	})
}

func TestDedupeRunsEachBatchOnce(t *testing.T) {
	t.Parallel()
	var d dedupe
	d.init()
	var runs atomic.Int64
	h := fwdHeader{sender: "a", incarnation: 1, seq: 7}
	release := make(chan struct{})
	fn := func() []byte {
		runs.Add(1)
		<-release
		return []byte("reply")
	}
	var wg sync.WaitGroup
	var dups atomic.Int64
	for range 8 {
		wg.Go(func() {
			rep, dup := d.do(h, fn)
			if string(rep) != "reply" {
				t.Errorf("got %q, want the first run's reply", rep)
			}
			if dup {
				dups.Add(1)
			}
		})
	}
	time.Sleep(10 * time.Millisecond) // most duplicates queue behind the first; later ones find its reply
	close(release)
	wg.Wait()
	if runs.Load() != 1 || dups.Load() != 7 {
		t.Fatalf("ran %d times with %d duplicates, want 1 and 7", runs.Load(), dups.Load())
	}
	other := h
	other.incarnation = 2 // the sender restarted: its sequence starts again
	if _, dup := d.do(other, func() []byte { runs.Add(1); return nil }); dup || runs.Load() != 2 {
		t.Fatalf("another incarnation's batch 7: dup=%v runs=%d, want a new run", dup, runs.Load())
	}
	d.keepUnit(h, 3, unitOutcome{allowed: true, wins: []int64{9}})
	if u, ok := d.unit(h, 3); !ok || !u.allowed || u.wins[0] != 9 {
		t.Fatalf("unit 3: %+v %v", u, ok)
	}
	if _, ok := d.unit(other, 3); ok {
		t.Fatal("another incarnation sees unit 3")
	}
}
