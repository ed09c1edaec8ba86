package main

// End-to-end tests of cluster mode: a real etcd (Debian's etcd-server) and
// three or four daemons on loopback, each with its own data directory,
// HTTP port, admin port and cluster port, under load while members leave,
// join, crash, pause, and etcd dies. They run one at a time (not
// t.Parallel): each loads every core with several daemons and measures
// windows of a second or two, which a neighbour's load would blur.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
)

// clusterMember is one daemon of a test cluster.
type clusterMember struct {
	*daemon
	admin string // its admin API's base URL
	label string // m0, m1, … for messages
}

// memberFlags are the flags of every member: a lease of 1s (etcd grants
// its minimum, 2s), JSON logs (for the vshard lines), the admin API.
func memberFlags(t *testing.T, etcd *actorstest.Etcd, name string) []string {
	t.Helper()
	tok := filepath.Join(t.TempDir(), "token")
	writeFile(t, tok, adminToken+"\n")
	return []string{"--cluster-etcd", etcd.URL, "--cluster-listen", "127.0.0.1:0", "--cluster-name", name,
		"--cluster-lease", "1s", "--log-format", "json", "--admin-token-file", tok, "--admin-listen", "127.0.0.1:0",
		"--shutdown-timeout", "8s"}
}

// startMember starts member i of the cluster name.
func startMember(t *testing.T, etcd *actorstest.Etcd, name string, i int, extra ...string) *clusterMember {
	t.Helper()
	d := startDaemon(t, append(memberFlags(t, etcd, name), extra...)...)
	line, err := d.logs.waitLine(startTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == "admin listening" })
	if err != nil {
		t.Fatalf("member %d: no admin listening line: %v\n%s", i, err, d.logs)
	}
	d.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 128
	return &clusterMember{daemon: d, admin: "http://" + line["addr"], label: "m" + strconv.Itoa(i)}
}

// startMembers starts n members of a new cluster on etcd.
func startMembers(t *testing.T, etcd *actorstest.Etcd, n int, extra ...string) []*clusterMember {
	t.Helper()
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	ms := make([]*clusterMember, n)
	for i := range ms {
		ms[i] = startMember(t, etcd, name, i, extra...)
	}
	return ms
}

// memberStatus is the part of GET /cluster the tests read.
type memberStatus struct {
	Member     string `json:"member"`
	Epoch      int64  `json:"epoch"`
	VShards    int    `json:"vshards"`
	Serving    int    `json:"serving"`
	LeaseValid bool   `json:"lease_valid"`
	Unowned    int    `json:"unowned"`
	Members    []struct {
		ID      string `json:"id"`
		VShards int    `json:"vshards"`
		Placed  int    `json:"placed"`
		Leaving bool   `json:"leaving"`
	} `json:"members"`
	Handoffs []json.RawMessage `json:"handoffs"`
	Stats    struct {
		ForwardedChecks  int64 `json:"forwarded_checks"`
		ForwardedBatches int64 `json:"forwarded_batches"`
		Fenced           int64 `json:"fenced"`
		Unavailable      int64 `json:"unavailable"`
		HandoffsOut      int64 `json:"handoffs_out"`
		VShardsOut       int64 `json:"vshards_out"`
		VShardsIn        int64 `json:"vshards_in"`
		BucketsOut       int64 `json:"buckets_out"`
		HandoffTime      int64 `json:"handoff_time_ns"`
		Takeovers        int64 `json:"takeovers"`
		LeaseLapses      int64 `json:"lease_lapses"`
		EtcdErrors       int64 `json:"etcd_errors"`
	} `json:"stats"`
}

// status reads GET /cluster; ok is false if the member does not answer.
func (m *clusterMember) status(t *testing.T) (st memberStatus, ok bool) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, m.admin+"/cluster", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: GET /cluster: %d", m.label, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("%s: GET /cluster: %v", m.label, err)
	}
	return st, true
}

// adminGet reads GET path of m's admin API, which must answer 200, into v.
func (m *clusterMember) adminGet(t *testing.T, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, m.admin+path, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: GET %s: %v", m.label, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: GET %s: %d %s", m.label, path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("%s: GET %s: %v in %s", m.label, path, err, body)
	}
}

// settled reports whether ms agree: each lists exactly ms as members, each
// owns the vshards placement gives it and serves them, none is moving.
func settled(t *testing.T, ms []*clusterMember) bool {
	t.Helper()
	serving := 0
	for _, m := range ms {
		st, ok := m.status(t)
		if !ok || len(st.Members) != len(ms) || st.Unowned != 0 || len(st.Handoffs) != 0 || !st.LeaseValid {
			return false
		}
		for _, mem := range st.Members {
			if mem.VShards != mem.Placed || mem.Leaving {
				return false
			}
		}
		serving += st.Serving
		if st.VShards != 1024 {
			t.Fatalf("%s: %d vshards, want the default 1024", m.label, st.VShards)
		}
	}
	return serving == 1024
}

// waitSettled waits until ms are settled, at most within, and returns how
// long that took.
func waitSettled(t *testing.T, ms []*clusterMember, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for !settled(t, ms) {
		if time.Since(start) > within {
			for _, m := range ms {
				st, _ := m.status(t)
				t.Logf("%s: %+v", m.label, st)
			}
			t.Fatalf("the cluster did not settle within %v", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// clusterLoad sends checks, round-robin over members and keys, until
// finished, counting what each key admitted on any member and when checks
// failed.
type clusterLoad struct {
	t       *testing.T
	targets atomic.Pointer[[]*clusterMember]
	keys    []string
	limit   int64
	scaleMs int64
	allowed []atomic.Int64 // by key
	denied  []atomic.Int64 // by key
	sent    atomic.Int64
	stop    chan struct{}
	wg      sync.WaitGroup

	mu    sync.Mutex
	fails []failSpan
}

// failSpan is a check answered 503 (or not at all) by a member in the targets.
type failSpan struct {
	start, end time.Time
	member     string
	what       string
}

// startLoad starts workers sending checks for n keys of limit each (one
// window for the whole test) to ms.
func startLoad(t *testing.T, ms []*clusterMember, n int, limit int64, workers int) *clusterLoad {
	t.Helper()
	l := &clusterLoad{t: t, limit: limit, scaleMs: stableScaleMs(time.Now()), allowed: make([]atomic.Int64, n), denied: make([]atomic.Int64, n), stop: make(chan struct{})}
	for i := range n {
		l.keys = append(l.keys, fmt.Sprintf("%s-k%d", t.Name(), i))
	}
	l.setTargets(ms)
	for w := range workers {
		l.wg.Go(func() { l.work(w) })
	}
	t.Cleanup(l.finish)
	return l
}

func (l *clusterLoad) setTargets(ms []*clusterMember) {
	ms = slices.Clone(ms)
	l.targets.Store(&ms)
}

func (l *clusterLoad) work(w int) {
	for i := w; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		ms := *l.targets.Load()
		m := ms[i%len(ms)]
		k := (i*7 + w) % len(l.keys)
		start := time.Now()
		resp, err := m.client.Get(m.base + checkQuery(l.keys[k], l.scaleMs, l.limit, 1))
		l.sent.Add(1)
		what := ""
		switch {
		case err != nil:
			what = err.Error()
		default:
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				l.allowed[k].Add(1)
			case http.StatusRequestEntityTooLarge:
				l.denied[k].Add(1)
			default:
				what = resp.Status
			}
		}
		if what != "" && slices.Contains(*l.targets.Load(), m) {
			l.mu.Lock()
			l.fails = append(l.fails, failSpan{start: start, end: time.Now(), member: m.label, what: what})
			l.mu.Unlock()
		}
	}
}

// finish stops the workers; it is idempotent.
func (l *clusterLoad) finish() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// over returns, per key, what it admitted beyond its limit: the largest
// excess, the sum, and how many keys exceeded it.
func (l *clusterLoad) over() (most, sum int64, keys int) {
	for i := range l.allowed {
		if x := l.allowed[i].Load() - l.limit; x > 0 {
			most, sum, keys = max(most, x), sum+x, keys+1
		}
	}
	return most, sum, keys
}

// exhausted reports whether every key has been denied: it is at its
// limit (a check answered 503 may have been counted, so a key's admitted
// checks may fall short of it).
func (l *clusterLoad) exhausted() bool {
	for i := range l.denied {
		if l.denied[i].Load() == 0 {
			return false
		}
	}
	return true
}

// failures returns the failed checks and the total time during which at
// least one was in flight (the union of their spans).
func (l *clusterLoad) failures() (n int, window time.Duration, first string) {
	l.mu.Lock()
	spans := slices.Clone(l.fails)
	l.mu.Unlock()
	slices.SortFunc(spans, func(a, b failSpan) int { return a.start.Compare(b.start) })
	var end time.Time
	for _, s := range spans {
		switch {
		case s.start.After(end):
			window += s.end.Sub(s.start)
			end = s.end
		case s.end.After(end):
			window += s.end.Sub(end)
			end = s.end
		}
	}
	if len(spans) > 0 {
		first = spans[0].member + ": " + spans[0].what
	}
	return len(spans), window, first
}

// drainKeys keeps the load on until every key has been denied, and
// then for extra checks more: a key whose count was lost would admit
// beyond its limit then.
func (l *clusterLoad) drainKeys(t *testing.T, extra int64) {
	t.Helper()
	if waitFor(t, 60*time.Second, "every key at its limit", func() bool {
		if l.exhausted() {
			return true
		}
		select {
		case <-l.stop:
			return true
		default:
			return false
		}
	}); !l.exhausted() {
		n, window, first := l.failures()
		var short []string
		for i := range l.allowed {
			if l.denied[i].Load() == 0 {
				short = append(short, fmt.Sprintf("%s=%d", l.keys[i], l.allowed[i].Load()))
			}
		}
		t.Fatalf("keys below their limit: %v; %d checks failed over %v (%s)", short[:min(5, len(short))], n, window, first)
	}
	sent := l.sent.Load()
	waitFor(t, 30*time.Second, "checks past the limits", func() bool { return l.sent.Load() > sent+extra })
	l.finish()
}

// vshardsIn sums the vshards handed over to ms so far.
func vshardsIn(t *testing.T, ms []*clusterMember) (in int64) {
	t.Helper()
	for _, m := range ms {
		st, _ := m.status(t)
		in += st.Stats.VShardsIn
	}
	return in
}

// waitFor polls cond every 20ms, failing t after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Errorf("%s: not within %v", what, within)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// servingSpan is one member's serving of one vshard, from its logs.
type servingSpan struct {
	member     string
	start, end time.Time
	epoch      string
}

// checkServing reads the vshard lines of every member's log and fails t if
// two members ever served one vshard at the same moment. A member still
// serving at the end serves until then; one that was killed, until its
// kill (ended). It returns how many vshards were served.
func checkServing(t *testing.T, ms []*clusterMember, ended map[*clusterMember]time.Time) int {
	t.Helper()
	spans := map[string][]servingSpan{}
	for _, m := range ms {
		lines, _ := m.logs.lines()
		open := map[string]servingSpan{}
		for _, line := range lines {
			rec, err := parseLogLine(line)
			if err != nil || (rec["msg"] != "vshard serving" && rec["msg"] != "vshard stopped") {
				continue
			}
			v := rec["vshard"]
			at, err := time.Parse(time.RFC3339Nano, rec["time"])
			if err != nil {
				t.Fatalf("%s: log time %q: %v", m.label, rec["time"], err)
			}
			if rec["msg"] == "vshard serving" {
				if _, dup := open[v]; dup {
					t.Errorf("%s started vshard %s twice", m.label, v)
				}
				open[v] = servingSpan{member: m.label, start: at, epoch: rec["epoch"]}
				continue
			}
			s, ok := open[v]
			if !ok {
				t.Errorf("%s stopped vshard %s it did not serve: %s", m.label, v, line)
				continue
			}
			delete(open, v)
			if s.end, err = time.Parse(time.RFC3339Nano, rec["served_until"]); err != nil {
				t.Fatalf("%s: served_until %q: %v", m.label, rec["served_until"], err)
			}
			spans[v] = append(spans[v], s)
		}
		end, killed := ended[m]
		if !killed {
			end = time.Now().Add(time.Hour)
		}
		for v, s := range open {
			s.end = end
			spans[v] = append(spans[v], s)
		}
	}
	for v, ss := range spans {
		slices.SortFunc(ss, func(a, b servingSpan) int { return a.start.Compare(b.start) })
		for i := 1; i < len(ss); i++ {
			// Every later span must start after every earlier one ended.
			for j := 0; j < i; j++ {
				if p, c := ss[j], ss[i]; p.member != c.member && c.start.Before(p.end) {
					t.Errorf("vshard %s: served by %s (epoch %s) from %s to %s and by %s (epoch %s) from %s",
						v, p.member, p.epoch, p.start.Format(time.StampMicro), p.end.Format(time.StampMicro),
						c.member, c.epoch, c.start.Format(time.StampMicro))
				}
			}
		}
	}
	return len(spans)
}

// checkAcross makes 10 checks of id (limit 5) through the two members ms in
// turn: the first 5 are allowed and the rest 413, each with its count, and
// the members forwarded 5 of them between them, whichever owns id.
func checkAcross(t *testing.T, ms []*clusterMember, id string) {
	t.Helper()
	scale := stableScaleMs(time.Now())
	for i := range 10 {
		r := ms[i%2].check(t, id, scale, 5, 1)
		want := http.StatusOK
		if i >= 5 {
			want = http.StatusRequestEntityTooLarge
		}
		d, ok := decodeDecision(t, r)
		if r.status != want || !ok || d.Count != int64(min(i+1, 5)) {
			t.Fatalf("check %d via %s: %v, want %d with count %d", i+1, ms[i%2].label, r, want, min(i+1, 5))
		}
	}
	var forwarded int64
	for _, m := range ms {
		st, _ := m.status(t)
		forwarded += st.Stats.ForwardedChecks
	}
	if forwarded != 5 {
		t.Fatalf("%d checks forwarded, want 5 (the other member's half of 10)", forwarded)
	}
}

// TestE2EClusterTwoMembers: the smoke test: two members share the 1024
// vshards, either answers any check (the other's forwarded), GET /cluster
// and the cluster metrics show it (each member opens its link to the
// other ahead of any check: one stream each), and a member started with
// another number of vshards is refused.
func TestE2EClusterTwoMembers(t *testing.T) {
	etcd := actorstest.StartEtcd(t)
	ms := startMembers(t, etcd, 2)
	waitSettled(t, ms, 30*time.Second)
	checkAcross(t, ms, "smoke")
	var forwardedSeries, streams float64
	for deadline := time.Now().Add(10 * time.Second); ; {
		forwardedSeries, streams = 0, 0
		for _, m := range ms {
			if v, ok := m.metric(t, "ratelimitd_cluster_members"); !ok || v != 2 {
				t.Fatalf("%s: ratelimitd_cluster_members %v (found %v), want 2", m.label, v, ok)
			}
			f, ok1 := m.metric(t, "ratelimitd_cluster_forwarded_checks_total")
			n, ok2 := m.metric(t, "ratelimitd_cluster_forward_streams_total")
			if !ok1 || !ok2 {
				t.Fatalf("%s: no forwarded-checks or forward-streams series", m.label)
			}
			forwardedSeries, streams = forwardedSeries+f, streams+n
		}
		if streams >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if forwardedSeries != 5 || streams != 2 {
		t.Fatalf("/metrics: %v checks forwarded over %v streams, want 5 over 2 (each member's link to the other)", forwardedSeries, streams)
	}
	code, _, stderr := runDaemonOnce(t, append(memberFlags(t, etcd, strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())),
		"--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--cluster-vshards", "512")...)
	if code != exitFailure || !strings.Contains(stderr, "has 1024 vshards") || !strings.Contains(stderr, "start it with 1024") {
		t.Fatalf("a member with 512 vshards: exit %d, want 1 naming the cluster's 1024; stderr:\n%s", code, stderr)
	}
}

// TestE2EClusterBadFlags: the cluster flags refuse bad values (exit 2,
// naming the flag).
func TestE2EClusterBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--cluster-etcd", "127.0.0.1:2379"},
		{"--cluster-etcd", "http://127.0.0.1"},
		{"--cluster-lease", "1500ms"},
		{"--cluster-lease", "0s"},
		{"--cluster-vshards", "0"},
		{"--cluster-vshards", "70000"},
		{"--cluster-name", "a/b"},
		{"--cluster-advertise", "127.0.0.1:0"},
		{"--on-cluster-error", "maybe"},
		{"--cluster-timeout", "0s"},
		{"--cluster-forward-timeout", "-1s"},
		{"--cluster-forward-timeout", "2s"}, // longer than --cluster-timeout's 1s
	} {
		code, _, stderr := runDaemonOnce(t, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
		if code != exitUsage || !strings.Contains(stderr, strings.TrimPrefix(args[0], "--")) {
			t.Errorf("%v: exit %d, want 2 naming the flag; stderr:\n%s", args, code, stderr)
		}
	}
}

// TestE2EClusterExact: 1,000 concurrent checks on one key with a limit of
// 100, round-robin over the three members, admit exactly 100: for every
// algorithm, 20 times.
func TestE2EClusterExact(t *testing.T) {
	etcd := actorstest.StartEtcd(t)
	// A check about exactness, not faults: waits long enough for a loaded
	// machine (-race, the other tests) never to time a forwarded batch out.
	ms := startMembers(t, etcd, 3, "--cluster-lease", "10s", "--cluster-timeout", "20s", "--cluster-forward-timeout", "10s")
	waitSettled(t, ms, 30*time.Second)
	scale := stableScaleMs(time.Now())
	for _, alg := range []string{"fixed_window", "sliding_window", "token_bucket", "leaky_bucket"} {
		for rep := range 20 {
			id := fmt.Sprintf("exact-%s-%d", alg, rep)
			q := url.Values{"id": {id}, "scale": {strconv.FormatInt(scale, 10)}, "limit": {"100"}, "burst": {"100"}, "algorithm": {alg}}
			path := "/check_rate?" + q.Encode()
			var allowed, denied, other atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for g := range 1000 {
				wg.Go(func() {
					<-start
					{
						m := ms[g%3]
						r, ok := m.do(t, http.MethodGet, path, "", nil)
						switch {
						case !ok:
							other.Add(1)
						case r.status == http.StatusOK:
							allowed.Add(1)
						case r.status == http.StatusRequestEntityTooLarge:
							denied.Add(1)
						default:
							other.Add(1)
							t.Errorf("%s via %s: %v", id, m.label, r)
						}
					}
				})
			}
			close(start)
			wg.Wait()
			if allowed.Load() != 100 || denied.Load() != 900 || other.Load() != 0 {
				t.Fatalf("%s: %d allowed, %d denied, %d failed; want 100, 900, 0", id, allowed.Load(), denied.Load(), other.Load())
			}
		}
	}
}

// TestE2EClusterLeaveUnderLoad: SIGTERM to one of three members while
// clients load all three on 100 keys below their limits: its vshards move
// with their counts, so no key admits more than its limit, and checks
// fail (503) for at most 1s in all.
func TestE2EClusterLeaveUnderLoad(t *testing.T) {
	etcd := actorstest.StartEtcd(t)
	ms := startMembers(t, etcd, 3)
	waitSettled(t, ms, 30*time.Second)
	load := startLoad(t, ms, 100, 30, 8)
	waitFor(t, 20*time.Second, "load", func() bool { return load.sent.Load() > 1500 })
	leaver := ms[2]
	load.setTargets(ms[:2])
	before, _ := leaver.status(t)
	in0 := vshardsIn(t, ms[:2])
	took := leaver.stop()
	waitSettled(t, ms[:2], 10*time.Second)
	load.drainKeys(t, 3000)
	most, sum, keys := load.over()
	n, window, first := load.failures()
	in := vshardsIn(t, ms[:2]) - in0
	for _, m := range ms[:2] {
		st, _ := m.status(t)
		if st.Stats.Takeovers != 0 {
			t.Errorf("%s took %d vshards over; the leaver handed them all off", m.label, st.Stats.Takeovers)
		}
	}
	t.Logf("leave: %d checks sent; the leaver served %d vshards and exited in %v; %d vshards arrived with their buckets; %d checks failed over %v (%s); over-admission: %d keys, %d in all, %d at most",
		load.sent.Load(), before.Serving, took.Round(time.Millisecond), in, n, window.Round(time.Millisecond), first, keys, sum, most)
	if keys != 0 {
		t.Errorf("%d keys admitted more than their limit (%d in all, %d at most), want none", keys, sum, most)
	}
	if in != int64(before.Serving) {
		t.Errorf("%d vshards arrived with their buckets, want the leaver's %d", in, before.Serving)
	}
	if window > time.Second {
		t.Errorf("checks failed for %v in all, want at most 1s", window)
	}
	checkServing(t, ms, nil)
}

// TestE2EClusterJoinUnderLoad: a fourth member joins three under load: the
// vshards placement gives it move with their counts, no key admits more
// than its limit, and no two members ever serve one vshard at once (from
// their logs).
func TestE2EClusterJoinUnderLoad(t *testing.T) {
	etcd := actorstest.StartEtcd(t)
	ms := startMembers(t, etcd, 3)
	waitSettled(t, ms, 30*time.Second)
	load := startLoad(t, ms, 100, 30, 8)
	waitFor(t, 20*time.Second, "load", func() bool { return load.sent.Load() > 1500 })
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	joiner := startMember(t, etcd, name, 3)
	ms = append(ms, joiner)
	took := waitSettled(t, ms, 20*time.Second)
	load.setTargets(ms)
	load.drainKeys(t, 3000)
	most, sum, keys := load.over()
	n, window, first := load.failures()
	js, _ := joiner.status(t)
	t.Logf("join: %d checks sent; settled %v after the start; the joiner serves %d vshards, %d arrived with their buckets; %d checks failed over %v (%s); over-admission: %d keys, %d in all",
		load.sent.Load(), took.Round(time.Millisecond), js.Serving, js.Stats.VShardsIn, n, window.Round(time.Millisecond), first, keys, sum)
	if keys != 0 {
		t.Errorf("%d keys admitted more than their limit (%d in all, %d at most), want none", keys, sum, most)
	}
	if js.Stats.VShardsIn != int64(js.Serving) || js.Serving < 200 {
		t.Errorf("the joiner serves %d vshards, %d of them handed over; want about 256, all handed over", js.Serving, js.Stats.VShardsIn)
	}
	if served := checkServing(t, ms, nil); served != 1024 {
		t.Errorf("the logs show %d vshards served, want 1024", served)
	}
}

// TestE2EClusterCrashUnderLoad: SIGKILL one of three members under load:
// its vshards are served again within the lease + 1s, starting from
// nothing, so a key admits at most one limit more than its limit.
func TestE2EClusterCrashUnderLoad(t *testing.T) {
	etcd := actorstest.StartEtcd(t)
	ms := startMembers(t, etcd, 3)
	waitSettled(t, ms, 30*time.Second)
	const limit = 30
	load := startLoad(t, ms, 100, limit, 8)
	waitFor(t, 20*time.Second, "load", func() bool { return load.sent.Load() > 1500 })
	victim := ms[2]
	vs, _ := victim.status(t)
	load.setTargets(ms[:2])
	crashed := time.Now()
	victim.kill()
	back := waitFor(t, 10*time.Second, "the crashed member's vshards served again", func() bool { return settled(t, ms[:2]) })
	load.drainKeys(t, 3000)
	most, sum, keys := load.over()
	n, window, first := load.failures()
	var took int64
	for _, m := range ms[:2] {
		st, _ := m.status(t)
		took += st.Stats.Takeovers
	}
	t.Logf("crash: the victim served %d vshards; all served again %v after the SIGKILL (%d taken over); %d checks failed over %v (%s); over-admission: %d of 100 keys, %d in all, %d at most (limit %d)",
		vs.Serving, back.Round(time.Millisecond), took, n, window.Round(time.Millisecond), first, keys, sum, most, limit)
	if lease := 2 * time.Second; back > lease+time.Second {
		t.Errorf("the vshards were served again %v after the crash, want within the lease (%v) + 1s", back, lease)
	}
	if took != int64(vs.Serving) {
		t.Errorf("%d vshards taken over, want the victim's %d", took, vs.Serving)
	}
	if most > limit {
		t.Errorf("a key admitted %d beyond its limit of %d; the crash bound is one limit", most, limit)
	}
	checkServing(t, ms, map[*clusterMember]time.Time{victim: crashed})
}

// TestE2EClusterPause: SIGSTOP one of three members for twice its lease,
// under load, then SIGCONT: its vshards were taken over meanwhile; after
// it, each vshard has one owner, and the paused member served nothing it
// had lost (its serving ended at its lease deadline, before the others
// began).
func TestE2EClusterPause(t *testing.T) {
	etcd := actorstest.StartEtcd(t)
	ms := startMembers(t, etcd, 3)
	waitSettled(t, ms, 30*time.Second)
	load := startLoad(t, ms, 100, 30, 8)
	waitFor(t, 20*time.Second, "load", func() bool { return load.sent.Load() > 1500 })
	paused := ms[2]
	load.setTargets(ms[:2])
	if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // twice the lease etcd grants (2s): the pause itself, not a timing assertion
	if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	load.setTargets(ms)
	took := waitSettled(t, ms, 20*time.Second)
	load.drainKeys(t, 3000)
	ps, _ := paused.status(t)
	most, sum, keys := load.over()
	t.Logf("pause: settled %v after SIGCONT; the paused member serves %d vshards again, lapsed %d times; over-admission: %d keys, %d in all, %d at most",
		took.Round(time.Millisecond), ps.Serving, ps.Stats.LeaseLapses, keys, sum, most)
	if ps.Stats.LeaseLapses == 0 {
		t.Errorf("the paused member counts no lease lapse")
	}
	if most > load.limit {
		t.Errorf("a key admitted %d beyond its limit of %d; a pause past the lease costs at most one limit, as a crash", most, load.limit)
	}
	checkServing(t, ms, nil)
}

// TestE2EClusterEtcdRestart: etcd killed under load: the members serve
// what they hold until their lease deadline, then answer 503 (closed);
// nothing panics; etcd restarted, ownership resumes and checks succeed.
func TestE2EClusterEtcdRestart(t *testing.T) {
	etcd := actorstest.StartEtcd(t)
	ms := startMembers(t, etcd, 3)
	waitSettled(t, ms, 30*time.Second)
	load := startLoad(t, ms, 100, 1_000_000, 4)
	waitFor(t, 20*time.Second, "load", func() bool { return load.sent.Load() > 1000 })
	etcd.Kill()
	failed := waitFor(t, 10*time.Second, "503s after etcd died", func() bool { n, _, _ := load.failures(); return n > 0 })
	time.Sleep(time.Second) // a while with etcd down, under load
	etcd.Restart()
	back := waitFor(t, 30*time.Second, "the cluster settled again", func() bool { return settled(t, ms) })
	nBefore, _, _ := load.failures()
	sent := load.sent.Load()
	waitFor(t, 20*time.Second, "load after etcd's return", func() bool { return load.sent.Load() > sent+1000 })
	load.finish()
	nAfter, window, first := load.failures()
	t.Logf("etcd down: first 503 %v after the kill (%s), %d checks failed over %v; settled %v after the restart; %d failed after it",
		failed.Round(time.Millisecond), first, nAfter, window.Round(time.Millisecond), back.Round(time.Millisecond), nAfter-nBefore)
	if failed > 3*time.Second {
		t.Errorf("members served %v after etcd died, past their lease (2s)", failed)
	}
	if nAfter != nBefore {
		t.Errorf("%d checks failed after the cluster settled again, want none", nAfter-nBefore)
	}
	for _, m := range ms {
		st, _ := m.status(t)
		if st.Stats.LeaseLapses == 0 || st.Stats.EtcdErrors == 0 {
			t.Errorf("%s: lease lapses %d, etcd errors %d; want both counted", m.label, st.Stats.LeaseLapses, st.Stats.EtcdErrors)
		}
		if strings.Contains(m.logs.String(), "panic") {
			t.Errorf("%s panicked:\n%s", m.label, m.logs)
		}
	}
	checkServing(t, ms, nil)
}
