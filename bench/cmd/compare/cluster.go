package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/keys"
	"github.com/ratelimitd/ratelimitd/bench/internal/load"
	"github.com/ratelimitd/ratelimitd/bench/internal/proc"
	"github.com/ratelimitd/ratelimitd/bench/internal/report"
)

// clusterMembers is how many daemons the cluster of section 6 has.
const clusterMembers = 3

// clusterSection measures cluster mode: a single-node daemon against
// three members of one cluster (one loaded alone, then all round-robin),
// and the handoff of vshards with their buckets to a member that joins.
func (r *runner) clusterSection(ctx context.Context) error {
	c := &report.Cluster{Members: clusterMembers, Conns: r.o.conns, Keys: httpKeys, Rounds: 4, PerRound: 2 * time.Second, Warmup: time.Second}
	buckets := 100_000
	if r.o.short {
		c.Rounds, c.PerRound, c.Warmup = 2, 500*time.Millisecond, 300*time.Millisecond
		buckets = 10_000
	}
	r.rep.Cluster = c
	etcdBin, err := exec.LookPath("etcd")
	if err != nil {
		c.Error = "no etcd binary (apt-get install -y etcd-server)"
		r.logf("cluster: skipped: %s", c.Error)
		return nil
	}
	bin, err := r.daemon(ctx)
	if err != nil {
		return err
	}
	etcd, etcdURL, err := r.startEtcd(ctx, etcdBin)
	if err != nil {
		return err
	}
	defer func() { _ = etcd.Stop(10 * time.Second) }()
	r.rep.Commands = append(r.rep.Commands, report.Command{
		What: "cluster mode: an etcd on free loopback ports and three members (section 6)",
		Line: "etcd --data-dir $TMP/etcd --listen-client-urls http://127.0.0.1:C …; $TMP/ratelimitd --listen 127.0.0.1:0 --data-dir $TMP/mN --cluster-etcd http://127.0.0.1:C --cluster-listen 127.0.0.1:0 --cluster-name bench",
	})

	single, singleAddr, err := r.startNode(ctx, bin, "ratelimitd single node")
	if err != nil {
		return err
	}
	var members []*proc.Process
	var bases []string
	for i := range clusterMembers {
		p, addr, err := r.startNode(ctx, bin, fmt.Sprintf("member %d", i), "--cluster-etcd", etcdURL, "--cluster-listen", "127.0.0.1:0", "--cluster-name", "bench")
		if err != nil {
			return err
		}
		members, bases = append(members, p), append(bases, "http://"+addr)
	}
	if err := waitServing(ctx, bases); err != nil {
		return err
	}
	if err := primeLinks(ctx, bases); err != nil {
		return err
	}
	paths := getPaths()
	targets := []*load.Target{
		{Name: "single node", Base: "http://" + singleAddr, Method: http.MethodGet, Paths: paths, ChecksPerRequest: 1, CPU: cpuOf(single)},
		{Name: "one member", Base: bases[0], Method: http.MethodGet, Paths: paths, ChecksPerRequest: 1, CPU: cpuOf(members...)},
		{Name: "round-robin", Base: bases[0], Also: bases[1:], Method: http.MethodGet, Paths: paths, ChecksPerRequest: 1, CPU: cpuOf(members...)},
	}
	names := []struct{ name, short string }{
		{"single node", report.ShortSingle},
		{fmt.Sprintf("one member of %d, alone", clusterMembers), report.ShortOneMember},
		{fmt.Sprintf("round-robin over %d members", clusterMembers), report.ShortRoundRobin},
	}
	before, err := sumMetrics(ctx, bases, "ratelimitd_cluster_forwarded_checks_total", "ratelimitd_cluster_forwarded_batches_total")
	if err != nil {
		return err
	}
	plan := load.Plan{Conns: c.Conns, Rounds: c.Rounds, PerRound: c.PerRound, Warmup: c.Warmup}
	r.logf("cluster: %d targets, %d rounds of %s after a %s warm-up, %d connections", len(targets), plan.Rounds, plan.PerRound, plan.Warmup, plan.Conns)
	results := load.Compare(ctx, plan, targets)
	after, err := sumMetrics(ctx, bases, "ratelimitd_cluster_forwarded_checks_total", "ratelimitd_cluster_forwarded_batches_total")
	if err != nil {
		return err
	}
	c.Forwarded, c.Batches = int64(after[0]-before[0]), int64(after[1]-before[1])
	for i, res := range results {
		if res.Err != nil {
			for _, m := range members {
				for _, l := range strings.Split(m.Tail(), "\n") {
					if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
						r.logf("cluster %s: %s", m.Name(), l)
					}
				}
			}
		}
		c.Peers = append(c.Peers, r.clusterPeer(names[i].name, names[i].short, res))
	}
	c.Direct = r.directForwardCost(ctx, plan, bases, paths, cpuOf(members...))
	for _, p := range append(members, single) {
		if err := p.Stop(15 * time.Second); err != nil {
			r.fail("cluster: %v", err)
		}
	}
	c.Handoff = r.measureHandoff(ctx, bin, etcdURL, buckets)
	return nil
}

// directForwardCost loads member bases[0] alone, in alternating rounds,
// with the ids it decides itself and with the ids the other members own,
// the server CPU summed over every member (cpu): the cost of a forwarded
// check against a local one on the same processes.
func (r *runner) directForwardCost(ctx context.Context, plan load.Plan, bases, paths []string, cpu func() (float64, error)) *report.DirectForward {
	d := &report.DirectForward{}
	local, remote, err := splitByOwner(ctx, bases[0], paths)
	if err != nil {
		d.Error = firstLine(err.Error())
		r.fail("cluster direct: %v", err)
		return d
	}
	d.LocalIDs, d.ForwardedIDs = len(local), len(remote)
	if len(local) == 0 || len(remote) == 0 {
		d.Error = fmt.Sprintf("member 0 owns %d of %d ids", len(local), len(paths))
		return d
	}
	targets := []*load.Target{
		{Name: "member 0, its own ids", Base: bases[0], Method: http.MethodGet, Paths: local, ChecksPerRequest: 1, CPU: cpu},
		{Name: "member 0, the other members' ids", Base: bases[0], Method: http.MethodGet, Paths: remote, ChecksPerRequest: 1, CPU: cpu},
	}
	names := []string{report.ShortLocalIDs, report.ShortForwardedIDs}
	before, err := metricValues(ctx, bases[0], "ratelimitd_cluster_forwarded_checks_total", "ratelimitd_cluster_forwarded_batches_total")
	if err != nil {
		d.Error = firstLine(err.Error())
		return d
	}
	results := load.Compare(ctx, plan, targets)
	after, err := metricValues(ctx, bases[0], "ratelimitd_cluster_forwarded_checks_total", "ratelimitd_cluster_forwarded_batches_total")
	if err != nil {
		d.Error = firstLine(err.Error())
		return d
	}
	d.Forwarded, d.Batches = int64(after[0]-before[0]), int64(after[1]-before[1])
	for i, res := range results {
		d.Peers = append(d.Peers, r.clusterPeer(targets[i].Name, names[i], res))
	}
	return d
}

// clusterPeer is the row of a cluster target (one GET check per request)
// that res measured, logged; a failed one is counted as the run's failure.
func (r *runner) clusterPeer(name, short string, res *load.Result) report.HTTPPeer {
	p := report.HTTPPeer{Name: name, Short: short, Request: "GET /check_rate", ChecksPerRequest: 1}
	if res.Err != nil {
		r.fail("cluster %s: %v", name, res.Err)
		p.Error = firstLine(res.Err.Error())
		return p
	}
	p.Requests, p.Elapsed, p.ServerCPU, p.ClientCPU = res.Requests, res.Elapsed, res.ServerCPU, res.ClientCPU
	p.P50, p.P99, p.P999 = load.Quantile(res.Lat, 0.5), load.Quantile(res.Lat, 0.99), load.Quantile(res.Lat, 0.999)
	r.logf("cluster %-32s %9.0f req/s p99 %v cpu %.3f s/1k checks", p.Name, p.ReqPerSec(), p.P99, p.CPUPer1kChecks())
	return p
}

// splitByOwner splits paths (one check each) into those member base
// decides itself and those it forwards: it sends each once, in turn, and
// reads the member's forwarded-checks counter after each answer (a
// forwarded batch is counted before its checks are answered).
func splitByOwner(ctx context.Context, base string, paths []string) (local, remote []string, err error) {
	const series = "ratelimitd_cluster_forwarded_checks_total"
	last, err := metricValues(ctx, base, series)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range paths {
		var a checkAnswer
		if err := fetch(ctx, http.MethodGet, base+p, nil, &a); err != nil {
			return nil, nil, err
		}
		now, err := metricValues(ctx, base, series)
		if err != nil {
			return nil, nil, err
		}
		switch now[0] - last[0] {
		case 0:
			local = append(local, p)
		case 1:
			remote = append(remote, p)
		default:
			return nil, nil, fmt.Errorf("one check of %s moved the forwarded checks by %v", p, now[0]-last[0])
		}
		last = now
	}
	return local, remote, nil
}

// daemon builds the daemon once and returns its path.
func (r *runner) daemon(ctx context.Context) (string, error) {
	if r.daemonBin != "" {
		return r.daemonBin, nil
	}
	bin := filepath.Join(r.tmp, "ratelimitd")
	r.logf("building the daemon: go build -o %s ./cmd/ratelimitd (in %s)", bin, r.rootDir)
	if _, err := goOutput(ctx, r.rootDir, "build", "-o", bin, "./cmd/ratelimitd"); err != nil {
		return "", err
	}
	r.daemonBin = bin
	return bin, nil
}

// startNode starts a daemon on a data directory of its own, with flags.
func (r *runner) startNode(ctx context.Context, bin, name string, flags ...string) (*proc.Process, string, error) {
	data, err := r.sub("node")
	if err != nil {
		return nil, "", err
	}
	return r.start(ctx, name, bin, append([]string{"--listen", "127.0.0.1:0", "--data-dir", data}, flags...), "")
}

// startEtcd starts an etcd on free loopback ports and waits for it.
func (r *runner) startEtcd(ctx context.Context, bin string) (*proc.Process, string, error) {
	dir, err := r.sub("etcd")
	if err != nil {
		return nil, "", err
	}
	client, peer := "http://"+freeAddr(), "http://"+freeAddr()
	p, _, err := proc.Start(ctx, proc.Options{Name: "etcd", Path: bin, Args: []string{
		"--data-dir", filepath.Join(dir, "data"), "--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "default=" + peer, "--log-level", "error",
	}})
	if err != nil {
		return nil, "", err
	}
	r.group.Add(p)
	for deadline := time.Now().Add(20 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", strings.TrimPrefix(client, "http://"), 100*time.Millisecond); err == nil {
			c.Close()
			return p, client, nil
		}
		if time.Now().After(deadline) || p.Exited() {
			return nil, "", fmt.Errorf("etcd did not listen on %s: %s", client, p.Tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeAddr returns a loopback host:port that was free a moment ago.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer ln.Close()
	return ln.Addr().String()
}

// metricValues reads the named series (without labels) of a daemon's
// /metrics.
func metricValues(ctx context.Context, base string, names ...string) ([]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	vals := make([]float64, len(names))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for i, n := range names {
			if name == n {
				vals[i], _ = strconv.ParseFloat(val, 64)
			}
		}
	}
	return vals, sc.Err()
}

// sumMetrics sums the named series over the daemons of bases.
func sumMetrics(ctx context.Context, bases []string, names ...string) ([]float64, error) {
	sum := make([]float64, len(names))
	for _, b := range bases {
		vals, err := metricValues(ctx, b, names...)
		if err != nil {
			return nil, err
		}
		for i, v := range vals {
			sum[i] += v
		}
	}
	return sum, nil
}

// waitServing waits until the members of bases serve the 1024 vshards
// between them, each seeing all of them, with no handoff committed for a
// second (ten readings in a row): placement is done moving vshards.
func waitServing(ctx context.Context, bases []string) error {
	stable, last := 0, -1.0
	for deadline := time.Now().Add(60 * time.Second); stable < 10; {
		served, handoffs, members := 0.0, 0.0, true
		for _, b := range bases {
			v, err := metricValues(ctx, b, "ratelimitd_cluster_vshards_served", "ratelimitd_cluster_members", `ratelimitd_cluster_handoffs_total{result="committed"}`)
			if err != nil {
				return err
			}
			served, handoffs = served+v[0], handoffs+v[2]
			members = members && int(v[1]) == len(bases)
		}
		if served == 1024 && members && handoffs == last {
			stable++
		} else {
			stable = 0
		}
		last = handoffs
		if time.Now().After(deadline) {
			return fmt.Errorf("the %d members did not settle within 60s (they serve %v vshards)", len(bases), served)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// primeIDs and primeWithin bound primeLinks.
const (
	primeIDs    = 64 // per member: each other member owns some of them
	primeWithin = 15 * time.Second
)

// primeLinks makes each member forward checks to the others before any
// timing. A member opens its link to a peer in the background once it
// sees the peer, and on a loaded 2-core host that opening can still be
// under way when a target starts (a CI run, when a member dialled at its
// first forwarded check, saw 25 checks answered 503 at the first instant
// of a target); the first batches on a link also cost more. Each member
// checks primeIDs ids of its own
// ("prime-N", not the load's, so the counts the runs report are
// untouched); a 503 is retried until primeWithin, any other failure ends
// the section.
func primeLinks(ctx context.Context, bases []string) error {
	deadline := time.Now().Add(primeWithin)
	for _, b := range bases {
		for i := range primeIDs {
			url := fmt.Sprintf("%s/check_rate?id=prime-%d&scale=%d&limit=%d", b, i, httpScaleMs, httpLimit)
			for {
				var a struct {
					Allowed bool `json:"allowed"`
				}
				err := fetch(ctx, http.MethodGet, url, nil, &a)
				if err == nil && a.Allowed {
					break
				}
				if err == nil {
					return fmt.Errorf("priming the members' links: GET %s: denied", url)
				}
				if !strings.Contains(err.Error(), "503 Service Unavailable") || time.Now().After(deadline) {
					return fmt.Errorf("priming the members' links: %w", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return nil
}

// measureHandoff starts a member alone, gives it n buckets, starts a
// second member and reads what the first handed off.
func (r *runner) measureHandoff(ctx context.Context, bin, etcdURL string, n int) *report.Handoff {
	h := &report.Handoff{Buckets: n}
	fail := func(err error) *report.Handoff {
		h.Error = firstLine(err.Error())
		r.fail("cluster handoff: %v", err)
		return h
	}
	flags := []string{"--cluster-etcd", etcdURL, "--cluster-listen", "127.0.0.1:0", "--cluster-name", "bench-handoff"}
	a, addrA, err := r.startNode(ctx, bin, "handoff member a", flags...)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = a.Stop(15 * time.Second) }()
	baseA := "http://" + addrA
	if err := waitServing(ctx, []string{baseA}); err != nil {
		return fail(err)
	}
	for i := 0; i < n; i += batchSize {
		var b strings.Builder
		b.WriteByte('[')
		for j := i; j < min(i+batchSize, n); j++ {
			if j > i {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":"h-%s","scale":%d,"limit":1000}`, keys.ID(j), httpScaleMs)
		}
		b.WriteByte(']')
		var ans batchAnswer
		if err := fetch(ctx, http.MethodPost, baseA+"/check_rate", []byte(b.String()), &ans); err != nil {
			return fail(err)
		}
	}
	p, addrB, err := r.startNode(ctx, bin, "handoff member b", flags...)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = p.Stop(15 * time.Second) }()
	if err := waitServing(ctx, []string{baseA, "http://" + addrB}); err != nil {
		return fail(err)
	}
	v, err := metricValues(ctx, baseA, `ratelimitd_cluster_handoff_vshards_total{direction="out"}`, "ratelimitd_cluster_handoff_buckets_total",
		`ratelimitd_cluster_handoffs_total{result="committed"}`, "ratelimitd_cluster_handoff_seconds_total")
	if err != nil {
		return fail(err)
	}
	h.VShards, h.Moved, h.Handoffs, h.Time = int64(v[0]), int64(v[1]), int64(v[2]), time.Duration(v[3]*1e9)
	r.logf("cluster handoff: %d vshards, %d buckets, %d handoffs, %v", h.VShards, h.Moved, h.Handoffs, h.Time)
	return h
}
