package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/keys"
	"github.com/ratelimitd/ratelimitd/bench/internal/load"
	"github.com/ratelimitd/ratelimitd/bench/internal/proc"
	"github.com/ratelimitd/ratelimitd/bench/internal/report"
	"github.com/ratelimitd/ratelimitd/bench/internal/serve"
)

// The HTTP checks: httpKeys ids, a one-hour window, a limit no run reaches.
const (
	httpKeys    = 1000
	httpScaleMs = 3_600_000
	httpLimit   = 1_000_000_000_000
	batchSize   = 100
)

// peer is one HTTP peer being set up.
type peer struct {
	rp     report.HTTPPeer
	target *load.Target
	procs  []*proc.Process
	// probe sends one request and returns the count the peer reports for
	// user-0 after it (to verify that the peer counts).
	probe func(ctx context.Context) (int64, error)
}

func cpuOf(procs ...*proc.Process) func() (float64, error) {
	return func() (float64, error) {
		sum := 0.0
		for _, p := range procs {
			if p.Exited() {
				return 0, fmt.Errorf("%s exited; last output:\n%s", p.Name(), p.Tail())
			}
			s, err := proc.CPUSeconds(p.PID())
			if err != nil {
				return 0, err
			}
			sum += s
		}
		return sum, nil
	}
}

func (r *runner) start(ctx context.Context, name, path string, args []string, dir string) (*proc.Process, string, error) {
	p, addr, err := proc.Start(ctx, proc.Options{Name: name, Path: path, Args: args, Dir: dir, WaitAddr: true})
	if err != nil {
		return nil, "", err
	}
	r.group.Add(p)
	return p, addr, nil
}

func getPaths() []string {
	ps := make([]string, httpKeys)
	for i := range ps {
		ps[i] = fmt.Sprintf("/check_rate?id=%s&scale=%d&limit=%d", keys.ID(i), httpScaleMs, httpLimit)
	}
	return ps
}

func batchBodies() [][]byte {
	var bodies [][]byte
	for b := range httpKeys / batchSize {
		var sb strings.Builder
		sb.WriteByte('[')
		for i := range batchSize {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"id":%q,"scale":%d,"limit":%d}`, keys.ID(b*batchSize+i), httpScaleMs, httpLimit)
		}
		sb.WriteByte(']')
		bodies = append(bodies, []byte(sb.String()))
	}
	return bodies
}

func gubernatorBodies() [][]byte {
	bodies := make([][]byte, httpKeys)
	for i := range bodies {
		bodies[i] = serve.GubernatorBody(keys.ID(i), httpScaleMs, httpLimit)
	}
	return bodies
}

// fetch sends one request and decodes its JSON answer into v.
func fetch(ctx context.Context, method, url string, body []byte, v any) error {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %.300s", method, url, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s %s: %w in %.300s", method, url, err, b)
	}
	return nil
}

type checkAnswer struct {
	Allowed bool   `json:"allowed"`
	ID      string `json:"id"`
	Count   int64  `json:"count"`
}

type batchAnswer struct {
	Allowed bool          `json:"allowed"`
	Checks  []checkAnswer `json:"checks"`
}

type gubAnswer struct {
	Responses []struct {
		Status    string `json:"status"`
		Limit     string `json:"limit"`
		Remaining string `json:"remaining"`
		Error     string `json:"error"`
	} `json:"responses"`
}

func getProbe(base string) func(ctx context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		var a checkAnswer
		if err := fetch(ctx, http.MethodGet, base+getPaths()[0], nil, &a); err != nil {
			return 0, err
		}
		if !a.Allowed || a.ID != keys.ID(0) || a.Count < 1 {
			return 0, fmt.Errorf("unexpected answer %+v", a)
		}
		return a.Count, nil
	}
}

// bareTarget and friends set up each peer; an error means the peer could
// not be started.
func (r *runner) barePeer(ctx context.Context) (*peer, error) {
	p, addr, err := r.start(ctx, "bare", r.self, []string{"-serve", "bare", "-listen", "127.0.0.1:0"}, "")
	if err != nil {
		return nil, err
	}
	return &peer{
		rp: report.HTTPPeer{Name: "bare net/http handler (the ceiling)", Short: report.ShortBare, Ceiling: true,
			Request: "GET / → a fixed 120-byte JSON body", ChecksPerRequest: 1, CPUSource: "/proc/PID/stat of its process"},
		target: &load.Target{Name: "bare", Base: "http://" + addr, Method: http.MethodGet, Paths: []string{"/"}, ChecksPerRequest: 1, CPU: cpuOf(p)},
		procs:  []*proc.Process{p},
	}, nil
}

func (r *runner) ratelimitdPeers(ctx context.Context) ([]*peer, error) {
	bin, err := r.daemon(ctx)
	if err != nil {
		return nil, err
	}
	data, err := r.sub("ratelimitd-data")
	if err != nil {
		return nil, err
	}
	args := []string{"--listen", "127.0.0.1:0", "--data-dir", data}
	r.rep.Commands = append(r.rep.Commands,
		report.Command{What: "the ratelimitd daemon (built in the repository root, run with its defaults otherwise: journal sync interval, metrics on)",
			Line: "go build -o $TMP/ratelimitd ./cmd/ratelimitd && $TMP/ratelimitd --listen 127.0.0.1:0 --data-dir $TMP/ratelimitd-data"})
	p, addr, err := r.start(ctx, "ratelimitd", bin, args, "")
	if err != nil {
		return nil, err
	}
	base := "http://" + addr
	get := &peer{
		rp: report.HTTPPeer{Name: "ratelimitd GET /check_rate", Short: report.ShortGet,
			Request: "GET /check_rate?id=user-N&scale=3600000&limit=10^12", ChecksPerRequest: 1, CPUSource: "/proc/PID/stat of the daemon"},
		target: &load.Target{Name: "ratelimitd GET", Base: base, Method: http.MethodGet, Paths: getPaths(), ChecksPerRequest: 1, CPU: cpuOf(p)},
		procs:  []*proc.Process{p},
		probe:  getProbe(base),
	}
	bodies := batchBodies()
	batch := &peer{
		rp: report.HTTPPeer{Name: "ratelimitd POST /check_rate, batches of 100", Short: report.ShortBatch,
			Request: "POST /check_rate, a JSON array of 100 checks (all or nothing)", ChecksPerRequest: batchSize, CPUSource: "/proc/PID/stat of the daemon"},
		target: &load.Target{Name: "ratelimitd POST batch", Base: base, Method: http.MethodPost, Paths: []string{"/check_rate"}, Bodies: bodies, ChecksPerRequest: batchSize, CPU: cpuOf(p)},
		procs:  []*proc.Process{p},
		probe: func(ctx context.Context) (int64, error) {
			var a batchAnswer
			if err := fetch(ctx, http.MethodPost, base+"/check_rate", bodies[0], &a); err != nil {
				return 0, err
			}
			if !a.Allowed || len(a.Checks) != batchSize || a.Checks[0].ID != keys.ID(0) {
				return 0, fmt.Errorf("unexpected batch answer: allowed %v, %d checks", a.Allowed, len(a.Checks))
			}
			return a.Checks[0].Count, nil
		},
	}
	return []*peer{get, batch}, nil
}

func (r *runner) gubernatorPeer(ctx context.Context) (*peer, error) {
	p, addr, err := r.start(ctx, "gubernator", r.self, []string{"-serve", "gubernator", "-listen", "127.0.0.1:0"}, "")
	if err != nil {
		return nil, err
	}
	base := "http://" + addr
	bodies := gubernatorBodies()
	return &peer{
		rp: report.HTTPPeer{Name: "gubernator v2 POST /v1/GetRateLimits", Short: report.ShortGubernator,
			Request: "POST /v1/GetRateLimits, one rate limit (TOKEN_BUCKET, hits 1, duration 3600000, limit 10^12)", ChecksPerRequest: 1,
			CPUSource: "/proc/PID/stat of its process"},
		target: &load.Target{Name: "gubernator", Base: base, Method: http.MethodPost, Paths: []string{"/v1/GetRateLimits"}, Bodies: bodies, ChecksPerRequest: 1, CPU: cpuOf(p)},
		procs:  []*proc.Process{p},
		probe: func(ctx context.Context) (int64, error) {
			var a gubAnswer
			if err := fetch(ctx, http.MethodPost, base+"/v1/GetRateLimits", bodies[0], &a); err != nil {
				return 0, err
			}
			if len(a.Responses) != 1 || a.Responses[0].Status != "UNDER_LIMIT" || a.Responses[0].Error != "" {
				return 0, fmt.Errorf("unexpected gubernator answer %+v", a)
			}
			limit, err1 := strconv.ParseInt(a.Responses[0].Limit, 10, 64)
			rem, err2 := strconv.ParseInt(a.Responses[0].Remaining, 10, 64)
			if err1 != nil || err2 != nil {
				return 0, fmt.Errorf("gubernator answer %+v: %v %v", a, err1, err2)
			}
			return limit - rem, nil
		},
	}, nil
}

// startRedis starts redis-server on a free loopback port, without
// persistence, and waits until it answers.
func (r *runner) startRedis(ctx context.Context) error {
	if r.redisAddr != "" || r.redisErr != "" {
		return nil
	}
	port, err := proc.FreePort()
	if err != nil {
		return err
	}
	dir, err := r.sub("redis")
	if err != nil {
		return err
	}
	args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--protected-mode", "yes", "--logfile", ""}
	p, _, err := proc.Start(ctx, proc.Options{Name: "redis-server", Path: r.o.redisServer, Args: args})
	if err != nil {
		return err
	}
	r.group.Add(p)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	rdb := serve.NewRedisClient(addr, 1, 5*time.Second)
	defer rdb.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err = rdb.Ping(ctx).Err(); err == nil {
			break
		}
		if p.Exited() || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("redis-server did not answer PING: %v; its last output:\n%s", err, p.Tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.redisAddr, r.redisProc = addr, p
	r.rep.Commands = append(r.rep.Commands, report.Command{What: "Redis (no persistence, loopback, a free port)",
		Line: "redis-server " + strings.ReplaceAll(shellJoin(args), dir, "$TMP/redis")})
	return nil
}

func (r *runner) redisPeer(ctx context.Context) (*peer, error) {
	if err := r.startRedis(ctx); err != nil {
		return nil, err
	}
	if r.redisAddr == "" {
		return nil, fmt.Errorf("skipped: %s", r.redisErr)
	}
	p, addr, err := r.start(ctx, "redisfront", r.self, []string{"-serve", "redisfront", "-listen", "127.0.0.1:0", "-redis", r.redisAddr}, "")
	if err != nil {
		return nil, err
	}
	base := "http://" + addr
	return &peer{
		rp: report.HTTPPeer{Name: "Redis+Lua front (go-redis, EVALSHA of INCR+PEXPIRE)", Short: report.ShortRedis,
			Request: "GET /check_rate?id=user-N&scale=3600000&limit=10^12", ChecksPerRequest: 1,
			CPUSource: "/proc/PID/stat of the front + redis-server"},
		target: &load.Target{Name: "redis+lua", Base: base, Method: http.MethodGet, Paths: getPaths(), ChecksPerRequest: 1, CPU: cpuOf(p, r.redisProc)},
		procs:  []*proc.Process{p, r.redisProc},
		probe:  getProbe(base),
	}, nil
}

// cdf samples the CDF of sorted latencies.
func cdf(sorted []time.Duration) []report.CDFPoint {
	if len(sorted) == 0 {
		return nil
	}
	var qs []float64
	for i := 0; i <= 100; i++ {
		qs = append(qs, float64(i)/100)
	}
	qs = append(qs[:100], 0.995, 0.999, 0.9999, 1)
	pts := make([]report.CDFPoint, len(qs))
	for i, q := range qs {
		pts[i] = report.CDFPoint{Latency: load.Quantile(sorted, q), Fraction: q}
	}
	return pts
}

func (r *runner) httpSection(ctx context.Context) error {
	h := &report.HTTP{Conns: r.o.conns, Keys: httpKeys, Rounds: 6, PerRound: 2 * time.Second, Warmup: time.Second}
	if r.o.short {
		h.Rounds, h.PerRound, h.Warmup = 2, 500*time.Millisecond, 300*time.Millisecond
	}
	r.rep.HTTP = h
	r.rep.Commands = append(r.rep.Commands,
		report.Command{What: "the suite's own servers (child processes of compare)", Line: "compare -serve bare|gubernator -listen 127.0.0.1:0; compare -serve redisfront -listen 127.0.0.1:0 -redis 127.0.0.1:PORT"})

	type setup struct {
		name string
		fn   func(context.Context) ([]*peer, error)
	}
	one := func(f func(context.Context) (*peer, error)) func(context.Context) ([]*peer, error) {
		return func(ctx context.Context) ([]*peer, error) {
			p, err := f(ctx)
			if err != nil {
				return nil, err
			}
			return []*peer{p}, nil
		}
	}
	setups := []setup{
		{"bare", one(r.barePeer)},
		{"ratelimitd", r.ratelimitdPeers},
		{"gubernator", one(r.gubernatorPeer)},
		{"redis", one(r.redisPeer)},
	}
	placeholders := map[string][]report.HTTPPeer{
		"bare":       {{Name: "bare net/http handler (the ceiling)", Short: report.ShortBare, Ceiling: true, Request: "GET /"}},
		"ratelimitd": {{Name: "ratelimitd GET /check_rate", Short: report.ShortGet, Request: "GET /check_rate"}, {Name: "ratelimitd POST /check_rate, batches of 100", Short: report.ShortBatch, Request: "POST /check_rate ×100"}},
		"gubernator": {{Name: "gubernator v2 POST /v1/GetRateLimits", Short: report.ShortGubernator, Request: "POST /v1/GetRateLimits"}},
		"redis":      {{Name: "Redis+Lua front", Short: report.ShortRedis, Request: "GET /check_rate"}},
	}
	var peers []*peer
	for _, s := range setups {
		ps, err := s.fn(ctx)
		if err == nil {
			for _, p := range ps {
				if _, err = p.target.CPU(); err != nil {
					break
				}
				if p.probe != nil {
					if _, err = p.probe(ctx); err != nil {
						err = fmt.Errorf("first request: %w", err)
						break
					}
				}
			}
		}
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "skipped: ") {
				r.fail("HTTP peer %s: %v", s.name, err)
			} else {
				r.logf("HTTP peer %s %s", s.name, msg)
			}
			for _, ph := range placeholders[s.name] {
				ph.Error = firstLine(msg)
				h.Peers = append(h.Peers, ph)
			}
			continue
		}
		for _, p := range ps {
			peers = append(peers, p)
			h.Peers = append(h.Peers, p.rp)
		}
	}
	targets := make([]*load.Target, len(peers))
	for i, p := range peers {
		targets[i] = p.target
	}
	plan := load.Plan{Conns: h.Conns, Rounds: h.Rounds, PerRound: h.PerRound, Warmup: h.Warmup}
	r.logf("HTTP: %d targets, %d rounds of %s each after a %s warm-up, %d connections", len(targets), plan.Rounds, plan.PerRound, plan.Warmup, plan.Conns)
	results := load.Compare(ctx, plan, targets)
	for i, p := range peers {
		res := results[i]
		rp := findPeer(h, p.rp.Short)
		if res.Err != nil {
			r.fail("HTTP peer %s: %v", p.rp.Name, res.Err)
			rp.Error = firstLine(res.Err.Error())
			continue
		}
		rp.Requests, rp.Elapsed = res.Requests, res.Elapsed
		rp.P50, rp.P99, rp.P999 = load.Quantile(res.Lat, 0.5), load.Quantile(res.Lat, 0.99), load.Quantile(res.Lat, 0.999)
		rp.ServerCPU, rp.ClientCPU = res.ServerCPU, res.ClientCPU
		rp.CDF = cdf(res.Lat)
		if p.probe != nil {
			n, err := p.probe(ctx)
			if err != nil {
				r.fail("HTTP peer %s: after the run: %v", p.rp.Name, err)
				rp.Verified = "the request after the run failed: " + firstLine(err.Error())
			} else {
				rp.Verified = fmt.Sprintf("after the run, one more check of user-0 answered count %d (the measured rounds made %d checks over %d ids, and the warm-up more)",
					n, res.Requests*int64(p.rp.ChecksPerRequest), httpKeys)
			}
		}
		r.logf("HTTP %-45s %9.0f req/s %10.0f checks/s p50 %v p99 %v cpu %.2fs", p.rp.Name, rp.ReqPerSec(), rp.ChecksPerSec(), rp.P50, rp.P99, rp.ServerCPU)
	}
	// Stop the HTTP servers (Redis stays for the memory section).
	for _, p := range peers {
		for _, c := range p.procs {
			if c == r.redisProc {
				continue
			}
			if err := c.Stop(15 * time.Second); err != nil {
				r.fail("HTTP peer %s: %v", p.rp.Name, err)
			}
		}
	}
	return nil
}

func findPeer(h *report.HTTP, short string) *report.HTTPPeer {
	for i := range h.Peers {
		if h.Peers[i].Short == short {
			return &h.Peers[i]
		}
	}
	return nil
}

// shellJoin quotes args for a shell where needed.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$\\") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
