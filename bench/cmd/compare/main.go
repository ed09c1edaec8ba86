// Command compare runs ratelimitd beside its peers, side by side, in one
// run, and writes RESULTS.md and SVG charts:
//
//	cd bench && go run ./cmd/compare          # full mode (< 20 min): writes bench/RESULTS.md and bench/charts/
//	cd bench && go run ./cmd/compare -short   # smoke mode (< 3 min): writes to a new temp dir (or -out DIR)
//
// Sections: 1. HTTP (a bare net/http handler, the ratelimitd daemon's GET
// and batched POST /check_rate, gubernator v2, a Redis+Lua front), each
// server in a child process of its own; 2. embedded limiters in this
// process; 3. scaling (memory per bucket against Redis, sweep cost, check
// latency during a sweep, journal sync modes); 5. the Redis protocol
// (redis-benchmark against ratelimitd's CL.THROTTLE and a redis-server
// running Lua limiters and INCR); 6. cluster mode (a real etcd, three
// members against a single node, and a handoff); 4. the ratelimitd
// module's own Go benchmarks (go test -bench, a child process per package,
// in the module root; with -short, as a smoke test), run last. -only picks
// sections.
//
// With -readme PATH (full mode only; make bench-compare passes
// ../README.md) it also rewrites the block of that file between
// <!-- bench:begin --> and <!-- bench:end --> with a summary of the run,
// every figure as RESULTS.md prints it.
//
// Everything listens on 127.0.0.1 only. Every child runs in its own process
// group with a parent-death signal and is stopped (SIGTERM, then SIGKILL) on
// exit, SIGINT or SIGTERM included; temporary directories are removed. The
// exit status is 1 if a peer or a section failed (the report is written
// first) or the run was interrupted (no report is written then), 0
// otherwise: a peer skipped for a missing redis-server is not a failure.
//
// With -serve ROLE it is instead one of the suite's own servers (bare,
// gubernator, redisfront), which is how the suite starts them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/proc"
	"github.com/ratelimitd/ratelimitd/bench/internal/report"
	"github.com/ratelimitd/ratelimitd/bench/internal/serve"
)

// sections, in the order they run.
var sections = []string{"http", "rls", "embedded", "memory", "sweep", "sweeplat", "journal", "resp", "cluster", "gobench"}

type options struct {
	short       bool
	out         string
	only        []string
	conns       int
	redisServer string
	budget      time.Duration
	readme      string
}

func main() {
	serveRole := flag.String("serve", "", "internal: run as one of the suite's servers: "+strings.Join(serve.Roles, ", "))
	listen := flag.String("listen", "127.0.0.1:0", "internal: the address of -serve")
	redisAddr := flag.String("redis", "", "internal: the Redis of -serve redisfront")
	var o options
	flag.BoolVar(&o.short, "short", false, "smoke mode: small sizes and short rounds (< 3 min); writes to a temp dir unless -out is given")
	flag.StringVar(&o.out, "out", "", "directory for RESULTS.md and charts/ (default: the bench module's directory, or a new temp dir with -short)")
	only := flag.String("only", strings.Join(sections, ","), "comma-separated sections to run: "+strings.Join(sections, ","))
	flag.IntVar(&o.conns, "conns", 64, "keep-alive connections (and load goroutines) of the HTTP load client")
	flag.StringVar(&o.redisServer, "redis-server", "redis-server", "the redis-server binary (the Redis peer is skipped if it is missing)")
	flag.DurationVar(&o.budget, "budget", 0, "stop measuring after this long (default 19m, 170s with -short); the report is written anyway")
	flag.StringVar(&o.readme, "readme", "", "full mode only: rewrite the block between "+report.READMEBegin+" and "+report.READMEEnd+" of this file (the project's README.md) from the run's report")
	flag.Parse()

	if *serveRole != "" {
		if err := serve.Run(*serveRole, *listen, *redisAddr); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		return
	}
	for s := range strings.SplitSeq(*only, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(sections, s) {
			fmt.Fprintf(os.Stderr, "compare: unknown section %q in -only (want some of %s)\n", s, strings.Join(sections, ","))
			os.Exit(2)
		}
		o.only = append(o.only, s)
	}
	if o.readme != "" && o.short {
		fmt.Fprintln(os.Stderr, "compare: -readme needs the full mode: a short run's figures measure nothing")
		os.Exit(2)
	}
	if o.budget == 0 {
		o.budget = 19 * time.Minute
		if o.short {
			o.budget = 170 * time.Second
		}
	}
	os.Exit(run(o))
}

// run does the comparison and returns the exit status.
func run(o options) int {
	started := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	r := &runner{o: o, group: &proc.Group{}, rep: &report.Report{Started: started, Skipped: map[string]string{}}}
	r.rep.Mode = "full"
	if o.short {
		r.rep.Mode = "short"
	}
	var err error
	if r.benchDir, r.rootDir, err = moduleDirs(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		return 1
	}
	if r.tmp, err = os.MkdirTemp("", "ratelimitd-compare-"); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		return 1
	}
	defer os.RemoveAll(r.tmp)
	defer func() {
		if err := r.group.StopAll(15 * time.Second); err != nil {
			r.fail("stopping children: %v", err)
		}
	}()
	if r.self, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		return 1
	}

	out := o.out
	if out == "" {
		if o.short {
			if out, err = os.MkdirTemp("", "ratelimitd-compare-short-"); err != nil {
				fmt.Fprintln(os.Stderr, "compare:", err)
				return 1
			}
		} else {
			out = r.benchDir
		}
	}
	r.describe(ctx)
	r.logf("compare: %s mode, sections %s, writing to %s", r.rep.Mode, strings.Join(o.only, ","), out)

	mctx, cancel := context.WithTimeout(ctx, o.budget)
	defer cancel()
	for _, s := range sections {
		if !slices.Contains(o.only, s) {
			r.rep.Skipped[s] = "not selected (-only " + strings.Join(o.only, ",") + ")"
			continue
		}
		if err := mctx.Err(); err != nil {
			r.rep.Skipped[s] = "the run's time budget (" + o.budget.String() + ") was used up before it"
			r.fail("section %s not run: budget used up", s)
			continue
		}
		h := lineHandoff()
		r.rep.LineHandoffs = append(r.rep.LineHandoffs, report.LineHandoff{Section: s, Time: h})
		t0 := time.Now()
		r.logf("== %s (a cache line passes between two CPUs in %v)", s, h)
		if err := r.section(mctx, s); err != nil {
			r.fail("section %s: %v", s, err)
		}
		r.logf("== %s done in %s", s, time.Since(t0).Round(time.Millisecond))
	}
	if err := r.group.StopAll(15 * time.Second); err != nil {
		r.fail("stopping children: %v", err)
	}
	r.rep.LoadAvgEnd = loadAvg()
	r.rep.WallTime = time.Since(started)
	r.rep.Notes = append(r.rep.Notes, r.failures...)
	if ctx.Err() != nil {
		r.logf("compare: interrupted; no report written")
		return 1
	}
	files, err := report.Write(out, r.rep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare: writing the report:", err)
		return 1
	}
	for _, f := range files {
		r.logf("wrote %s", f)
	}
	if o.readme != "" {
		if err := writeREADME(o.readme, out, r.rep); err != nil {
			r.fail("updating %s: %v", o.readme, err)
		} else {
			r.logf("wrote the performance block of %s", o.readme)
		}
	}
	for _, g := range report.Goals(r.rep) {
		r.logf("goal %-12s %s %s", g.Status, g.Name, g.Measured)
	}
	r.logf("compare: %s mode done in %s", r.rep.Mode, time.Since(started).Round(time.Second))
	if len(r.failures) > 0 {
		r.logf("compare: %d failure(s):\n  %s", len(r.failures), strings.Join(r.failures, "\n  "))
		return 1
	}
	return 0
}

// runner holds a run's state.
type runner struct {
	o        options
	rep      *report.Report
	group    *proc.Group
	benchDir string // the bench module
	rootDir  string // the ratelimitd module (the working tree, by the replace)
	tmp      string // removed at the end
	self     string // this executable, for -serve children
	failures []string

	redisAddr string        // of the Redis child, once started
	redisProc *proc.Process // the Redis child
	redisErr  string        // why there is no Redis
	daemonBin string        // the built daemon, once built
}

func (r *runner) logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

// fail records a failure: it goes in the report's notes and makes the
// exit status 1.
func (r *runner) fail(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	r.failures = append(r.failures, "FAILED: "+msg)
	r.logf("FAILED: %s", msg)
}

func (r *runner) section(ctx context.Context, s string) error {
	switch s {
	case "http":
		return r.httpSection(ctx)
	case "rls":
		return r.rlsSection(ctx)
	case "embedded":
		return r.embeddedSection(ctx)
	case "memory":
		return r.memorySection(ctx)
	case "sweep":
		return r.sweepSection(ctx)
	case "sweeplat":
		return r.sweepLatSection(ctx)
	case "journal":
		return r.journalSection(ctx)
	case "resp":
		return r.respSection(ctx)
	case "cluster":
		return r.clusterSection(ctx)
	case "gobench":
		return r.gobenchSection(ctx)
	}
	return errors.New("unknown section")
}

// writeREADME rewrites the marked performance block of the README at path
// from rep, linking the RESULTS.md written in out.
func writeREADME(path, out string, rep *report.Report) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	results, err := filepath.Abs(filepath.Join(out, "RESULTS.md"))
	if err != nil {
		return err
	}
	link, err := filepath.Rel(filepath.Dir(abs), results)
	if err != nil {
		return err
	}
	return report.UpdateREADME(abs, rep, filepath.ToSlash(link))
}

// sub returns a new directory under the run's temporary directory.
func (r *runner) sub(name string) (string, error) {
	return os.MkdirTemp(r.tmp, name+"-")
}

// moduleDirs finds the bench module's directory and the ratelimitd
// module's (through the bench module's replace directive).
func moduleDirs(ctx context.Context) (bench, root string, err error) {
	gomod, err := goOutput(ctx, "", "env", "GOMOD")
	if err != nil {
		return "", "", err
	}
	b, err := os.ReadFile(gomod)
	if err != nil || !strings.Contains(string(b), "module github.com/ratelimitd/ratelimitd/bench\n") {
		return "", "", fmt.Errorf("run me from the bench module (cd bench && go run ./cmd/compare); go env GOMOD says %q", gomod)
	}
	bench = filepath.Dir(gomod)
	root, err = goOutput(ctx, bench, "list", "-m", "-f", "{{.Dir}}", "github.com/ratelimitd/ratelimitd")
	if err != nil {
		return "", "", err
	}
	return bench, root, nil
}
