package actors

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/internal/etcdtest"
	"github.com/ratelimitd/ratelimitd/table"
)

// events collects, from the logs of every member, when each served each
// vshard, to check that no two ever served one at the same moment.
type events struct {
	mu   sync.Mutex
	open map[string]map[int64]time.Time // member → vshard → since
	ivs  map[int64][]interval           // vshard → intervals served
	bad  []string
}

type interval struct {
	member     string
	start, end time.Time
}

func newEvents() *events {
	return &events{open: map[string]map[int64]time.Time{}, ivs: map[int64][]interval{}}
}

// handler returns a slog.Handler for member m that feeds e (and discards).
func (e *events) handler() slog.Handler { return &eventHandler{e: e} }

type eventHandler struct {
	e     *events
	attrs []slog.Attr
}

func (h *eventHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *eventHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &eventHandler{e: h.e, attrs: append(slices.Clone(h.attrs), as...)}
}
func (h *eventHandler) WithGroup(string) slog.Handler { return h }
func (h *eventHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "vshard serving" && r.Message != "vshard stopped" {
		return nil
	}
	var member, until string
	var v int64 = -1
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "member":
			member = a.Value.String()
		case "vshard":
			v = a.Value.Int64()
		case "served_until":
			until = a.Value.String()
		}
		return true
	})
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.open[member] == nil {
		e.open[member] = map[int64]time.Time{}
	}
	if r.Message == "vshard serving" {
		if _, dup := e.open[member][v]; dup {
			e.bad = append(e.bad, fmt.Sprintf("%s started vshard %d twice", member, v))
		}
		e.open[member][v] = r.Time
		return nil
	}
	start, ok := e.open[member][v]
	if !ok {
		e.bad = append(e.bad, fmt.Sprintf("%s stopped vshard %d it did not serve", member, v))
		return nil
	}
	delete(e.open[member], v)
	end, err := time.Parse(time.RFC3339Nano, until)
	if err != nil {
		e.bad = append(e.bad, fmt.Sprintf("%s stopped vshard %d with served_until %q", member, v, until))
		return nil
	}
	e.ivs[v] = append(e.ivs[v], interval{member: member, start: start, end: end})
	return nil
}

// check reports intervals of two members that overlap, the still-open
// ones running to now; it returns how many vshards were served.
func (e *events) check(t testing.TB) int {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, b := range e.bad {
		t.Error(b)
	}
	all := map[int64][]interval{}
	for v, ivs := range e.ivs {
		all[v] = slices.Clone(ivs)
	}
	now := time.Now().Add(time.Hour)
	for m, open := range e.open {
		for v, since := range open {
			all[v] = append(all[v], interval{member: m, start: since, end: now})
		}
	}
	for v, ivs := range all {
		slices.SortFunc(ivs, func(a, b interval) int { return a.start.Compare(b.start) })
		for i := 1; i < len(ivs); i++ {
			if p, c := ivs[i-1], ivs[i]; c.start.Before(p.end) && p.member != c.member {
				t.Errorf("vshard %d served by %s from %s to %s and by %s from %s",
					v, p.member, p.start.Format(time.StampMicro), p.end.Format(time.StampMicro), c.member, c.start.Format(time.StampMicro))
			}
		}
	}
	return len(all)
}

// member is one System of a test cluster.
type member struct {
	*System
	cfg Config
}

// testCluster starts members against one etcd.
type testCluster struct {
	t    testing.TB
	etcd *etcdtest.Etcd
	name string
	ev   *events
}

func newTestCluster(t testing.TB) *testCluster {
	t.Helper()
	return &testCluster{t: t, etcd: etcdtest.Start(t), name: strings.ReplaceAll(t.Name(), "/", "-"), ev: newEvents()}
}

// config returns the Config of a member with a lease of one second.
func (tc *testCluster) config(id string) Config {
	return Config{
		Shards: 4,
		Logger: slog.New(tc.ev.handler()),
		Cluster: &ClusterConfig{
			Etcd:     []string{tc.etcd.URL},
			Listen:   "127.0.0.1:0",
			Name:     tc.name,
			Lease:    time.Second,
			VShards:  64,
			MemberID: id,
		},
	}
}

// start starts a member of cfg, stopped at the end of the test.
func (tc *testCluster) start(cfg Config) *member {
	tc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		tc.t.Fatalf("Start member %s: %v", cfg.Cluster.MemberID, err)
	}
	tc.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
	})
	return &member{System: s, cfg: cfg}
}

// startPair starts a test cluster of two members, a and b, and waits
// until they have settled.
func startPair(t testing.TB) (tc *testCluster, a, b *member) {
	t.Helper()
	tc = newTestCluster(t)
	a = tc.start(tc.config("a"))
	b = tc.start(tc.config("b"))
	tc.settle(a, b)
	return tc, a, b
}

// settle waits until every vshard is served by exactly one of ms, each
// where placement puts it, and reports how long that took.
func (tc *testCluster) settle(ms ...*member) time.Duration {
	tc.t.Helper()
	start := time.Now()
	for deadline := start.Add(30 * time.Second); ; {
		served := 0
		ok := true
		for _, m := range ms {
			st, _ := m.ClusterStatus()
			served += st.Serving
			if len(st.Members) != len(ms) || len(st.Handoffs) > 0 {
				ok = false
			}
			for _, mem := range st.Members {
				if mem.VShards != mem.Placed {
					ok = false
				}
			}
		}
		if ok && served == ms[0].cl.n {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			for _, m := range ms {
				st, _ := m.ClusterStatus()
				tc.t.Logf("%s: serving %d, members %+v, handoffs %d", st.Member, st.Serving, st.Members, len(st.Handoffs))
			}
			tc.t.Fatalf("the cluster did not settle within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// crash ends m as kill -9 would, for the others: its lease is not revoked
// (it expires), its vshards are not handed off; its journals are closed,
// as the page cache keeps them across a kill.
func (m *member) crash(t testing.TB) {
	t.Helper()
	cl := m.cl
	cl.lease.Store(0) // Stop must not leave
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace for the calls in flight
	cl.close(ctx)
	m.stopOnce.Do(func() { m.stopErr = m.System.stop(context.Background()) })
	if m.stopErr != nil {
		t.Fatalf("crash: %v", m.stopErr)
	}
}

// awaitAddr waits until m's view has member id at addr: a member that
// restarts listens on a new port, which the others learn from etcd's watch,
// and until then they forward its checks to the old one.
func awaitAddr(t testing.TB, m *member, id, addr string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, _ := m.ClusterStatus()
		for _, mem := range st.Members {
			if mem.ID == id && mem.Addr == addr {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still does not see member %s at %s: %+v", st.Member, id, addr, st.Members)
		}
	}
}

// countOf returns the count of req's bucket, as m sees it.
func countOf(t testing.TB, m *member, req table.Request) int64 {
	t.Helper()
	req.Hits = 0
	d, err := m.Check(context.Background(), req)
	if err != nil {
		t.Fatalf("peek %s via %s: %v", req.ID, m.cl.id, err)
	}
	return d.Count
}

// servedHere reports whether m serves the vshard of id now.
func servedHere(m *member, id string) bool {
	v := shardOf(id, m.cl.n)
	sh := m.cl.shardOf(v)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return m.cl.vs[v].state == vsActive
}

// loneMember returns a System of 4 shards and, not joined, a member "b" of
// it with 8 vshards (cc's other fields as given), holding lease 7 for an
// hour: for a test that drives the member's steps itself, without its
// loops (cc.Etcd may be unreachable when it reads nothing from etcd).
func loneMember(t *testing.T, cc ClusterConfig) (*System, *cluster) {
	t.Helper()
	ctx := context.Background()
	s, err := Start(ctx, Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(ctx) })
	cc.Listen, cc.VShards = "127.0.0.1:0", 8
	cc, err = cc.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cl := newCluster(s, cc)
	cl.id = "b"
	cl.lease.Store(7)
	cl.extend(cl.mono(), time.Now(), time.Hour)
	return s, cl
}
