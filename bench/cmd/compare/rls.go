package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/bench/internal/grpcload"
	"github.com/ratelimitd/ratelimitd/bench/internal/keys"
	"github.com/ratelimitd/ratelimitd/bench/internal/load"
	"github.com/ratelimitd/ratelimitd/bench/internal/proc"
	"github.com/ratelimitd/ratelimitd/bench/internal/report"
	"github.com/ratelimitd/ratelimitd/bench/internal/serve"
)

// The rls section: ShouldRateLimit, one descriptor (user = user-N) per
// request, a limit per hour no run reaches, 64 concurrent calls over 4
// HTTP/2 connections.
const (
	rlsDomain  = "bench"
	rlsKey     = "user"
	rlsLimit   = math.MaxUint32
	rlsStreams = 64
	rlsConns   = 4
	// The reference server, envoyproxy/ratelimit: its Go module, the
	// version the suite builds from the module proxy, and its command.
	rlsRefModule  = "github.com/envoyproxy/ratelimit"
	rlsRefVersion = "v1.4.1-0.20260122083618-3fb702589d36"
	rlsRefCmd     = rlsRefModule + "/src/service_cmd"
)

// rlsConfigFile is the config of both servers, in the reference's format.
func rlsConfigFile() string {
	return fmt.Sprintf("domain: %s\ndescriptors:\n  - key: %s\n    rate_limit: {unit: hour, requests_per_unit: %d}\n", rlsDomain, rlsKey, uint64(rlsLimit))
}

// rlsPeer is one peer of the section, however it is loaded.
type rlsPeer struct {
	rp    report.HTTPPeer
	run   func(ctx context.Context, d time.Duration, into *load.Result, record bool)
	probe func(ctx context.Context) (int64, error)
	close func()
}

func (r *runner) rlsSection(ctx context.Context) error {
	s := &report.RLS{Streams: rlsStreams, Conns: rlsConns, Keys: httpKeys, Rounds: 6, PerRound: 2 * time.Second, Warmup: time.Second}
	if r.o.short {
		s.Rounds, s.PerRound, s.Warmup = 2, 500*time.Millisecond, 300*time.Millisecond
	}
	r.rep.RLS = s
	ids := make([]string, httpKeys)
	for i := range ids {
		ids[i] = keys.ID(i)
	}
	reqs := grpcload.Requests(rlsDomain, rlsKey, ids)

	var peers []*rlsPeer
	ours, err := r.rlsRatelimitd(ctx, reqs)
	if err != nil {
		r.fail("rls peer ratelimitd: %v", err)
		for _, ph := range []report.HTTPPeer{{Name: "ratelimitd ShouldRateLimit", Short: report.ShortRLS}, {Name: "ratelimitd GET /check_rate", Short: report.ShortRLSHTTP}} {
			ph.Error = firstLine(err.Error())
			s.Peers = append(s.Peers, ph)
		}
	} else {
		peers = append(peers, ours...)
	}
	ref, err := r.rlsReference(ctx, reqs)
	switch {
	case err != nil:
		msg := err.Error()
		if strings.HasPrefix(msg, "skipped: ") {
			r.logf("rls peer envoyproxy/ratelimit %s", msg)
		} else {
			r.fail("rls peer envoyproxy/ratelimit: %v", err)
		}
		s.Peers = append(s.Peers, report.HTTPPeer{Name: "envoyproxy/ratelimit ShouldRateLimit", Short: report.ShortRLSRef, Error: firstLine(msg)})
	default:
		peers = append(peers, ref)
	}
	defer func() {
		for _, p := range peers {
			p.close()
		}
	}()
	for _, p := range peers {
		s.Peers = append(s.Peers, p.rp)
	}

	// Side by side: a warm-up each, then rounds, the order rotating.
	res := make([]*load.Result, len(peers))
	for i, p := range peers {
		res[i] = &load.Result{}
		warm := &load.Result{}
		p.run(ctx, s.Warmup, warm, false)
		res[i].Err = warm.Err
	}
	r.logf("rls: %d peers, %d rounds of %s each after a %s warm-up, %d concurrent calls", len(peers), s.Rounds, s.PerRound, s.Warmup, s.Streams)
	for round := range s.Rounds {
		for k := range peers {
			i := (k + round) % len(peers)
			peers[i].run(ctx, s.PerRound, res[i], true)
		}
	}
	for i, p := range peers {
		out := res[i]
		out.Finish()
		rp := rlsFind(s, p.rp.Short)
		if out.Err != nil {
			r.fail("rls peer %s: %v", p.rp.Name, out.Err)
			rp.Error = firstLine(out.Err.Error())
			continue
		}
		rp.Requests, rp.Elapsed = out.Requests, out.Elapsed
		rp.P50, rp.P99, rp.P999 = load.Quantile(out.Lat, 0.5), load.Quantile(out.Lat, 0.99), load.Quantile(out.Lat, 0.999)
		rp.ServerCPU, rp.ClientCPU = out.ServerCPU, out.ClientCPU
		if n, err := p.probe(ctx); err != nil {
			r.fail("rls peer %s: after the run: %v", p.rp.Name, err)
			rp.Verified = "the request after the run failed: " + firstLine(err.Error())
		} else {
			rp.Verified = fmt.Sprintf("after the run, one more check of user-0 answered count %d (the measured rounds made %d checks over %d ids, and the warm-up more)", n, out.Requests, httpKeys)
		}
		r.logf("rls %-40s %9.0f req/s p50 %v p99 %v cpu %.3fs per 1k", p.rp.Name, rp.ReqPerSec(), rp.P50, rp.P99, rp.CPUPer1kChecks())
	}
	return nil
}

func rlsFind(s *report.RLS, short string) *report.HTTPPeer {
	for i := range s.Peers {
		if s.Peers[i].Short == short {
			return &s.Peers[i]
		}
	}
	return nil
}

// rlsProbe returns the count a gRPC peer reports for user-0, after one
// more call.
func rlsProbe(c *grpcload.Client) func(ctx context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		resp, err := c.Call(ctx, 0)
		if err != nil {
			return 0, err
		}
		return int64(rlsLimit) - int64(resp.Statuses[0].LimitRemaining), nil
	}
}

// rlsRatelimitd starts the daemon with --grpc-listen and --rls-config, and
// returns two peers on it: ShouldRateLimit over gRPC, and HTTP GET
// /check_rate of the same ids.
func (r *runner) rlsRatelimitd(ctx context.Context, reqs []*rlsv3.RateLimitRequest) ([]*rlsPeer, error) {
	bin := filepath.Join(r.tmp, "ratelimitd")
	if _, err := os.Stat(bin); err != nil {
		r.logf("building the daemon: go build -o %s ./cmd/ratelimitd (in %s)", bin, r.rootDir)
		if _, err := goOutput(ctx, r.rootDir, "build", "-o", bin, "./cmd/ratelimitd"); err != nil {
			return nil, err
		}
	}
	conf, err := r.sub("rls-config")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(conf, "bench.yaml"), []byte(rlsConfigFile()), 0o644); err != nil {
		return nil, err
	}
	data, err := r.sub("rls-data")
	if err != nil {
		return nil, err
	}
	httpPort, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	grpcPort, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	httpAddr, grpcAddr := "127.0.0.1:"+strconv.Itoa(httpPort), "127.0.0.1:"+strconv.Itoa(grpcPort)
	args := []string{"--listen", httpAddr, "--grpc-listen", grpcAddr, "--rls-config", conf, "--data-dir", data}
	r.rep.Commands = append(r.rep.Commands, report.Command{
		What: "ratelimitd with Envoy's Rate Limit Service (the same binary; its defaults otherwise: journal sync interval, metrics on)",
		Line: "$TMP/ratelimitd --listen 127.0.0.1:PORT --grpc-listen 127.0.0.1:PORT --rls-config $TMP/rls-config --data-dir $TMP/rls-data   # rls-config/bench.yaml: " + strings.ReplaceAll(strings.TrimSpace(rlsConfigFile()), "\n", " "),
	})
	// The first "listening" line is the gRPC listener's: its address is
	// the one asked for.
	p, _, err := r.start(ctx, "ratelimitd-rls", bin, args, "")
	if err != nil {
		return nil, err
	}
	grpcT := &grpcload.Target{Name: "ratelimitd gRPC", Addr: grpcAddr, Requests: reqs, CPU: cpuOf(p)}
	gc, err := grpcload.NewClient(grpcT, rlsConns, rlsStreams)
	if err != nil {
		return nil, err
	}
	if _, err := gc.Call(ctx, 0); err != nil {
		gc.Close()
		return nil, fmt.Errorf("first request: %w", err)
	}
	httpT := &load.Target{Name: "ratelimitd GET (rls)", Base: "http://" + httpAddr, Method: http.MethodGet, Paths: getPaths(), ChecksPerRequest: 1, CPU: cpuOf(p)}
	hc, err := load.NewClient(httpT, rlsStreams)
	if err != nil {
		gc.Close()
		return nil, err
	}
	stop := func() {
		if err := p.Stop(15 * time.Second); err != nil {
			r.fail("rls peer ratelimitd: %v", err)
		}
	}
	return []*rlsPeer{
		{
			rp: report.HTTPPeer{Name: "ratelimitd ShouldRateLimit", Short: report.ShortRLS, ChecksPerRequest: 1,
				Request: "gRPC ShouldRateLimit, domain bench, one descriptor user=user-N", CPUSource: "/proc/PID/stat of the daemon"},
			run: func(ctx context.Context, d time.Duration, into *load.Result, record bool) {
				grpcload.Run(ctx, gc, d, into, record)
			},
			probe: rlsProbe(gc),
			close: func() { gc.Close() },
		},
		{
			rp: report.HTTPPeer{Name: "ratelimitd GET /check_rate", Short: report.ShortRLSHTTP, ChecksPerRequest: 1,
				Request: "GET /check_rate?id=user-N&scale=3600000&limit=10^12 (same daemon)", CPUSource: "/proc/PID/stat of the daemon"},
			run: func(ctx context.Context, d time.Duration, into *load.Result, record bool) {
				load.Run(ctx, hc, d, into, record)
			},
			probe: getProbe("http://" + httpAddr),
			close: func() { hc.Close(); stop() },
		},
	}, nil
}

// rlsReference builds envoyproxy/ratelimit from the Go module proxy (go
// install of its command at rlsRefVersion), starts it with the suite's
// redis-server as its backend and the same config, and returns its peer.
// It is skipped in short mode (building it from a cold module cache takes
// minutes) and without redis-server.
func (r *runner) rlsReference(ctx context.Context, reqs []*rlsv3.RateLimitRequest) (*rlsPeer, error) {
	if r.o.short {
		return nil, errors.New("skipped: short mode (building envoyproxy/ratelimit from a cold module cache takes minutes; the full mode builds it)")
	}
	if err := r.startRedis(ctx); err != nil {
		return nil, err
	}
	if r.redisAddr == "" {
		return nil, fmt.Errorf("skipped: %s", r.redisErr)
	}
	gobin, err := r.sub("rls-ref-bin")
	if err != nil {
		return nil, err
	}
	r.logf("building envoyproxy/ratelimit: go install %s@%s", rlsRefCmd, rlsRefVersion)
	bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	build := exec.CommandContext(bctx, goBin(), "install", rlsRefCmd+"@"+rlsRefVersion)
	build.Dir = gobin
	build.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go install %s@%s: %w: %s", rlsRefCmd, rlsRefVersion, err, strings.TrimSpace(string(out)))
	}
	runtime, err := r.sub("rls-ref-runtime")
	if err != nil {
		return nil, err
	}
	confDir := filepath.Join(runtime, "ratelimit", "config")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(confDir, "bench.yaml"), []byte(rlsConfigFile()), 0o644); err != nil {
		return nil, err
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = proc.FreePort(); err != nil {
			return nil, err
		}
	}
	env := []string{
		"USE_STATSD=false", "LOG_LEVEL=warn", "BACKEND_TYPE=redis",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + r.redisAddr, "REDIS_POOL_SIZE=64",
		"RUNTIME_ROOT=" + runtime, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[0]),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[2]),
	}
	r.rep.Versions = append(r.rep.Versions, report.Version{Name: "envoyproxy/ratelimit", Version: rlsRefVersion,
		How: "go install " + rlsRefCmd + "@" + rlsRefVersion + " (from the Go module proxy), a child process with the suite's redis-server as its backend"})
	r.rep.Commands = append(r.rep.Commands, report.Command{
		What: "envoyproxy/ratelimit (its defaults otherwise: fixed windows in Redis, denied hits counted)",
		Line: "GOBIN=$TMP/bin go install " + rlsRefCmd + "@" + rlsRefVersion + " && " +
			rlsShownEnv(env, runtime) + " $TMP/bin/service_cmd   # $TMP/rls-ref-runtime/ratelimit/config/bench.yaml: the same config",
	})
	p, _, err := proc.Start(ctx, proc.Options{Name: "envoyproxy/ratelimit", Path: filepath.Join(gobin, "service_cmd"), Env: env})
	if err != nil {
		return nil, err
	}
	r.group.Add(p)
	t := &grpcload.Target{Name: "envoyproxy/ratelimit", Addr: "127.0.0.1:" + strconv.Itoa(ports[1]), Requests: reqs, CPU: cpuOf(p, r.redisProc)}
	// It is ready when it answers; the client connects at once, so until
	// it listens each try is a new client.
	var c *grpcload.Client
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err = grpcload.NewClient(t, rlsConns, rlsStreams)
		if err == nil {
			if _, err = c.Call(ctx, 0); err == nil {
				break
			}
			c.Close()
		}
		if p.Exited() || time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("no answer to ShouldRateLimit: %v; its last output:\n%s", err, p.Tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &rlsPeer{
		rp: report.HTTPPeer{Name: "envoyproxy/ratelimit ShouldRateLimit", Short: report.ShortRLSRef, ChecksPerRequest: 1,
			Request: "gRPC ShouldRateLimit, the same requests and config", CPUSource: "/proc/PID/stat of it + redis-server"},
		run: func(ctx context.Context, d time.Duration, into *load.Result, record bool) {
			grpcload.Run(ctx, c, d, into, record)
		},
		probe: rlsProbe(c),
		close: func() {
			c.Close()
			if err := p.Stop(15 * time.Second); err != nil {
				r.fail("rls peer envoyproxy/ratelimit: %v", err)
			}
			// The memory section measures Redis from empty.
			rdb := serve.NewRedisClient(r.redisAddr, 1, 5*time.Second)
			defer rdb.Close()
			if err := rdb.FlushAll(context.Background()).Err(); err != nil {
				r.fail("rls: emptying Redis after envoyproxy/ratelimit: %v", err)
			}
		},
	}, nil
}

// rlsShownEnv is env as RESULTS.md shows it: the run's directory as
// $TMP/rls-ref-runtime, and free ports (which change every run) as PORT.
func rlsShownEnv(env []string, runtime string) string {
	shown := make([]string, len(env))
	for i, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasSuffix(k, "PORT"):
			v = "PORT"
		case k == "REDIS_URL":
			v = "127.0.0.1:PORT"
		case v == runtime:
			v = "$TMP/rls-ref-runtime"
		}
		shown[i] = k + "=" + v
	}
	return strings.Join(shown, " ")
}
