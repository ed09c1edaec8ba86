package main

// Section 5, the Redis protocol: redis-benchmark, the one load client,
// against ratelimitd's CL.THROTTLE and against a redis-server running the
// Lua fixed window and the Lua GCRA by EVALSHA, and plain INCR.

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/bench/internal/proc"
	"github.com/ratelimitd/ratelimitd/bench/internal/report"
	"github.com/ratelimitd/ratelimitd/bench/internal/serve"
)

// The load of the section: respConns connections, respKeys keys, and a
// budget that no run spends, so that every request is admitted and
// counted: a bucket of 10⁶ tokens per key refilling at 1,000 an hour (a
// token every 3.6 s, so that the buckets' state lasts, as the fixed
// window's one-hour keys do), and a one-hour fixed window.
const (
	respConns    = 50
	respKeys     = 1000
	respMaxBurst = "999999"
	respCount    = "1000"
	respPeriod   = "3600"
	respWindowMs = "3600000"
)

// respPipelines are the pipeline depths (redis-benchmark -P).
var respPipelines = []int{1, 16}

// respTarget is one server being measured.
type respTarget struct {
	rp    report.RESPPeer
	addr  string
	args  []string        // the command redis-benchmark sends
	procs []*proc.Process // whose CPU is the server's
	// probe reads, after the runs, what the server counted for the
	// first key.
	probe func(ctx context.Context) (string, error)
}

// respPlan is how many requests each run makes.
type respPlan struct {
	rounds   int
	perRound time.Duration // 0: fixed requests, no warm-up
	fixed    map[int]int   // requests per pipeline, without a warm-up
}

func (r *runner) respSection(ctx context.Context) error {
	x := &report.RESP{Conns: respConns, Keys: respKeys, Pipelines: respPipelines, Rounds: 5, PerRound: 2 * time.Second}
	plan := respPlan{rounds: 5, perRound: 2 * time.Second}
	if r.o.short {
		x.Rounds, x.PerRound = 1, 0
		plan = respPlan{rounds: 1, fixed: map[int]int{1: 2_000, 16: 16_000}}
	}
	r.rep.RESP = x
	bench, err := exec.LookPath("redis-benchmark")
	if err != nil {
		x.Error = "redis-benchmark not found (Debian: apt-get install redis-tools)"
		r.logf("resp: skipped: %s", x.Error)
		return nil
	}
	out, err := exec.CommandContext(ctx, bench, "--version").Output()
	if err != nil {
		return fmt.Errorf("redis-benchmark --version: %w", err)
	}
	x.Client = "redis-benchmark " + versionOf(string(out))
	r.rep.Versions = append(r.rep.Versions, report.Version{Name: "redis-benchmark", Version: versionOf(string(out)),
		How: "Debian's redis-tools: the one load client of the Redis protocol section, a child process"})

	targets, err := r.respTargets(ctx)
	if err != nil {
		return err
	}
	for _, t := range targets {
		x.Peers = append(x.Peers, t.rp)
	}
	var live []*respTarget
	for i, t := range targets {
		if t.rp.Error == "" {
			live = append(live, targets[i])
		}
	}
	runs := map[string]map[int]*runAcc{}
	for _, t := range live {
		runs[t.rp.Short] = map[int]*runAcc{}
		for _, pipe := range respPipelines {
			runs[t.rp.Short][pipe] = &runAcc{}
		}
	}
	requests := map[string]map[int]int{}
	for _, t := range live {
		requests[t.rp.Short] = map[int]int{}
		for _, pipe := range respPipelines {
			n := plan.fixed[pipe]
			if plan.perRound > 0 {
				// A warm-up, whose rate sizes the measured runs.
				warm := 5_000 * pipe
				res, err := r.benchmark(ctx, bench, t, pipe, warm)
				if err != nil {
					runs[t.rp.Short][pipe].err = "warm-up: " + firstLine(err.Error())
					r.fail("resp %s -P %d: warm-up: %v", t.rp.Short, pipe, err)
					continue
				}
				n = calibrated(res.rps, plan.perRound)
			}
			requests[t.rp.Short][pipe] = n
		}
	}
	for round := range plan.rounds {
		order := slices.Clone(live)
		for range round % max(len(order), 1) {
			order = append(order[1:], order[0]) // rotate: no peer always first
		}
		for _, pipe := range respPipelines {
			for _, t := range order {
				acc := runs[t.rp.Short][pipe]
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if acc.err != "" {
					continue
				}
				res, err := r.benchmark(ctx, bench, t, pipe, requests[t.rp.Short][pipe])
				if err != nil {
					acc.err = firstLine(err.Error())
					r.fail("resp %s -P %d: %v", t.rp.Short, pipe, err)
					continue
				}
				acc.add(res)
				r.logf("resp %-28s -P %-2d %10.0f req/s p50 %v p99 %v", t.rp.Short, pipe, res.rps, res.p50, res.p99)
			}
		}
	}
	for i := range x.Peers {
		p := &x.Peers[i]
		if p.Error != "" {
			continue
		}
		for _, pipe := range respPipelines {
			p.Runs = append(p.Runs, runs[p.Short][pipe].result(pipe))
		}
	}
	for _, t := range live {
		p := x.Peer(t.rp.Short)
		if v, err := t.probe(ctx); err != nil {
			r.fail("resp %s: after the runs: %v", t.rp.Short, err)
			p.Verified = "the read after the runs failed: " + firstLine(err.Error())
		} else {
			p.Verified = v
		}
	}
	for _, t := range targets {
		for _, pr := range t.procs {
			if pr != r.redisProc { // Redis is the run's, stopped at its end
				if err := pr.Stop(15 * time.Second); err != nil {
					r.fail("resp %s: %v", t.rp.Short, err)
				}
			}
		}
	}
	return nil
}

// calibrated is the requests of a run of about d at rps requests/s,
// between 10,000 (a run too short to time is noise) and 20,000,000.
func calibrated(rps float64, d time.Duration) int {
	return int(min(max(rps*d.Seconds(), 10_000), 20_000_000))
}

// versionOf returns the version in redis-benchmark --version's output
// ("redis-benchmark 7.0.15"), or the output.
func versionOf(out string) string {
	f := strings.Fields(out)
	if len(f) >= 2 {
		return f[1]
	}
	return strings.TrimSpace(out)
}

// respTargets starts the servers: the ratelimitd daemon with its Redis
// protocol listener, and a redis-server with both scripts loaded (its
// three targets say why they are skipped when it cannot run).
func (r *runner) respTargets(ctx context.Context) ([]*respTarget, error) {
	first := "user:" + strings.Repeat("0", 12) // the first key __rand_int__ makes
	rl, err := r.respDaemon(ctx)
	if err != nil {
		return nil, err
	}
	rl.probe = func(ctx context.Context) (string, error) {
		rdb := serve.NewRedisClient(rl.addr, 1, 10*time.Second)
		defer rdb.Close()
		v, err := rdb.Do(ctx, "CL.THROTTLE", first, respMaxBurst, respCount, respPeriod, 0).Int64Slice()
		if err != nil || len(v) != 5 {
			return "", fmt.Errorf("CL.THROTTLE %s (a peek): %v %v", first, v, err)
		}
		return fmt.Sprintf("after the runs, a peek of %s (quantity 0) left %d of %d tokens: %d spent", first, v[2], v[1], v[1]-v[2]), nil
	}
	targets := []*respTarget{rl}

	fixed := &respTarget{rp: report.RESPPeer{Name: "redis-server, Lua fixed window by EVALSHA", Short: report.ShortRESPFixedLua, CPUSource: "/proc/PID/stat of redis-server"}}
	gcra := &respTarget{rp: report.RESPPeer{Name: "redis-server, Lua GCRA by EVALSHA", Short: report.ShortRESPGCRALua, CPUSource: "/proc/PID/stat of redis-server"}}
	incr := &respTarget{rp: report.RESPPeer{Name: "redis-server, INCR (the ceiling)", Short: report.ShortRESPIncr, Ceiling: true, CPUSource: "/proc/PID/stat of redis-server"}}
	redisTargets := []*respTarget{fixed, gcra, incr}
	targets = append(targets, redisTargets...)
	fixed.args = []string{"EVALSHA", serve.FixedWindow.Hash(), "1", "rl:user:__rand_int__", respWindowMs}
	gcra.args = []string{"EVALSHA", serve.GCRA.Hash(), "1", "gcra:user:__rand_int__", respMaxBurst, respCount, respPeriod, "1"}
	incr.args = []string{"INCR", "incr:user:__rand_int__"}
	for _, t := range redisTargets {
		t.rp.Command = strings.Join(t.args, " ")
	}
	skip := func(why string) []*respTarget {
		for _, t := range redisTargets {
			t.rp.Error = why
		}
		return targets
	}
	if err := r.startRedis(ctx); err != nil {
		r.fail("resp: starting Redis: %v", err)
		return skip(firstLine(err.Error())), nil
	}
	if r.redisAddr == "" {
		r.logf("resp: Redis skipped: %s", r.redisErr)
		return skip("skipped: " + r.redisErr), nil
	}
	rdb := serve.NewRedisClient(r.redisAddr, 1, 2*time.Minute)
	defer rdb.Close()
	// What the sections before left in Redis goes, and the scripts are loaded for EVALSHA.
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return nil, fmt.Errorf("resp: FLUSHALL: %w", err)
	}
	for _, s := range []*redis.Script{serve.FixedWindow, serve.GCRA} {
		if err := s.Load(ctx, rdb).Err(); err != nil {
			return nil, fmt.Errorf("resp: SCRIPT LOAD: %w", err)
		}
	}
	gcra.probe = func(ctx context.Context) (string, error) {
		c := serve.NewRedisClient(r.redisAddr, 1, 10*time.Second)
		defer c.Close()
		v, err := serve.GCRA.Run(ctx, c, []string{"gcra:" + first}, respMaxBurst, respCount, respPeriod, 0).Int64Slice()
		if err != nil || len(v) != 5 {
			return "", fmt.Errorf("the GCRA script's peek of gcra:%s: %v %v", first, v, err)
		}
		return fmt.Sprintf("after the runs, the script's peek of gcra:%s (quantity 0) left %d of %d tokens: %d spent", first, v[2], v[1], v[1]-v[2]), nil
	}
	get := func(key, what string) func(ctx context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			c := serve.NewRedisClient(r.redisAddr, 1, 10*time.Second)
			defer c.Close()
			v, err := c.Get(ctx, key).Result()
			if err != nil {
				return "", fmt.Errorf("GET %s: %w", key, err)
			}
			return fmt.Sprintf("after the runs, GET %s answered %s (%s)", key, v, what), nil
		}
	}
	fixed.probe = get("rl:"+first, "its count")
	incr.probe = get("incr:"+first, "its count")
	for _, t := range redisTargets {
		t.addr, t.procs = r.redisAddr, []*proc.Process{r.redisProc}
	}
	return targets, nil
}

// respDaemon builds (unless the HTTP section has) and starts the daemon
// with its Redis protocol listener on a free port.
func (r *runner) respDaemon(ctx context.Context) (*respTarget, error) {
	bin := filepath.Join(r.tmp, "ratelimitd")
	if _, err := os.Stat(bin); err != nil {
		r.logf("building the daemon: go build -o %s ./cmd/ratelimitd (in %s)", bin, r.rootDir)
		if _, err := goOutput(ctx, r.rootDir, "build", "-o", bin, "./cmd/ratelimitd"); err != nil {
			return nil, err
		}
	}
	data, err := r.sub("ratelimitd-resp-data")
	if err != nil {
		return nil, err
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"--listen", "127.0.0.1:0", "--data-dir", data, "--redis-listen", addr}
	r.rep.Commands = append(r.rep.Commands,
		report.Command{What: "the ratelimitd daemon of the Redis protocol section (its defaults otherwise: journal sync interval, metrics on)",
			Line: "$TMP/ratelimitd --listen 127.0.0.1:0 --data-dir $TMP/ratelimitd-resp-data --redis-listen 127.0.0.1:PORT"},
		report.Command{What: "each run of the Redis protocol section (N from the warm-up in full mode; PORT and COMMAND the server's)",
			Line: fmt.Sprintf("redis-benchmark -h 127.0.0.1 -p PORT -c %d -n N -P 1|16 -r %d --csv COMMAND", respConns, respKeys)})
	p, _, err := r.start(ctx, "ratelimitd-resp", bin, args, "")
	if err != nil {
		return nil, err
	}
	t := &respTarget{
		rp:   report.RESPPeer{Name: "ratelimitd CL.THROTTLE", Short: report.ShortRESPRatelimitd, CPUSource: "/proc/PID/stat of the daemon"},
		addr: addr, procs: []*proc.Process{p},
		args: []string{"CL.THROTTLE", "user:__rand_int__", respMaxBurst, respCount, respPeriod, "1"},
	}
	t.rp.Command = strings.Join(t.args, " ")
	rdb := serve.NewRedisClient(addr, 1, 5*time.Second)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("ratelimitd's Redis protocol listener %s: PING: %w", addr, err)
	}
	return t, nil
}

// benchResult is one redis-benchmark run.
type benchResult struct {
	requests  int
	rps       float64
	p50, p99  time.Duration
	serverCPU float64
	clientCPU float64
}

// benchmark runs redis-benchmark against t: n requests of t's command at
// pipeline pipe, and reads the server's CPU around it.
func (r *runner) benchmark(ctx context.Context, bench string, t *respTarget, pipe, n int) (benchResult, error) {
	host, port, _ := strings.Cut(t.addr, ":")
	args := append([]string{"-h", host, "-p", port, "-c", strconv.Itoa(respConns), "-n", strconv.Itoa(n),
		"-P", strconv.Itoa(pipe), "-r", strconv.Itoa(respKeys), "--csv"}, t.args...)
	cpu := cpuOf(t.procs...)
	before, err := cpu()
	if err != nil {
		return benchResult{}, err
	}
	cmd := exec.CommandContext(ctx, bench, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return benchResult{}, fmt.Errorf("redis-benchmark %s: %v: %s", shellJoin(args), err, firstLine(stderr.String()))
	}
	after, err := cpu()
	if err != nil {
		return benchResult{}, err
	}
	res, err := parseBenchCSV(stdout.Bytes())
	if err != nil {
		return benchResult{}, fmt.Errorf("redis-benchmark %s: %w; stderr %q", shellJoin(args), err, firstLine(stderr.String()))
	}
	res.requests = n
	res.serverCPU = after - before
	res.clientCPU = cmd.ProcessState.UserTime().Seconds() + cmd.ProcessState.SystemTime().Seconds()
	return res, nil
}

// parseBenchCSV reads redis-benchmark --csv's output: a header row naming
// the columns (rps, p50_latency_ms, p99_latency_ms among them) and one row
// for the command.
func parseBenchCSV(out []byte) (benchResult, error) {
	rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		return benchResult{}, fmt.Errorf("its CSV: %w", err)
	}
	if len(rows) != 2 {
		return benchResult{}, fmt.Errorf("its CSV has %d rows, want a header and one result: %q", len(rows), out)
	}
	col := func(name string) (float64, error) {
		i := slices.Index(rows[0], name)
		if i < 0 || i >= len(rows[1]) {
			return 0, fmt.Errorf("its CSV has no %s column: %q", name, rows[0])
		}
		v, err := strconv.ParseFloat(rows[1][i], 64)
		if err != nil {
			return 0, fmt.Errorf("its CSV's %s: %w", name, err)
		}
		return v, nil
	}
	var res benchResult
	var p50, p99 float64
	for _, c := range []struct {
		name string
		v    *float64
	}{{"rps", &res.rps}, {"p50_latency_ms", &p50}, {"p99_latency_ms", &p99}} {
		if *c.v, err = col(c.name); err != nil {
			return benchResult{}, err
		}
	}
	if res.rps <= 0 {
		return benchResult{}, fmt.Errorf("its CSV says %v requests/s", res.rps)
	}
	res.p50, res.p99 = time.Duration(p50*1e6), time.Duration(p99*1e6)
	return res, nil
}

// runAcc sums the rounds of one peer at one pipeline.
type runAcc struct {
	requests  int64
	elapsed   time.Duration
	p50, p99  []time.Duration
	rps       []float64 // each round's
	serverCPU float64
	clientCPU float64
	err       string
}

func (a *runAcc) add(res benchResult) {
	a.requests += int64(res.requests)
	a.elapsed += time.Duration(float64(res.requests) / res.rps * 1e9)
	a.p50, a.p99 = append(a.p50, res.p50), append(a.p99, res.p99)
	a.rps = append(a.rps, res.rps)
	a.serverCPU += res.serverCPU
	a.clientCPU += res.clientCPU
}

// result is the report's run: the sums, and the median latencies.
func (a *runAcc) result(pipe int) report.RESPRun {
	if a == nil {
		return report.RESPRun{Pipeline: pipe, Error: "not run"}
	}
	median := func(ds []time.Duration) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	return report.RESPRun{Pipeline: pipe, Requests: a.requests, Elapsed: a.elapsed, P50: median(a.p50), P99: median(a.p99),
		ServerCPU: a.serverCPU, ClientCPU: a.clientCPU, RoundRPS: a.rps, Error: a.err}
}
