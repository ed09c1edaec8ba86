package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/report"
)

// goOutput runs the go command in dir and returns its trimmed stdout.
func goOutput(ctx context.Context, dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin(), args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// goBin returns the go command: the one on PATH, else the toolchain's.
func goBin() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if p := os.Getenv("GOROOT"); p != "" {
		return p + "/bin/go"
	}
	return "/usr/local/go/bin/go"
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Bounds of lineHandoff: the turns each goroutine takes (a few tens of
// milliseconds at most on a machine whose CPUs are far apart), and the
// time past which it gives up (a goroutine descheduled that long).
const (
	handoffRounds = 100_000
	handoffBudget = 2 * time.Second
)

// lineHandoff returns how long a cache line takes to pass from one CPU to
// another: two goroutines take turns incrementing one counter, each
// spinning until the other has taken its turn, handoffRounds times each.
// It returns 0 with fewer than two processors, or past handoffBudget.
// A host that moves a virtual machine's CPUs between neighbouring cores
// and distant ones while it runs changes this several times over, and with
// it every figure of checks made on two cores at once.
func lineHandoff() time.Duration {
	if runtime.GOMAXPROCS(0) < 2 {
		return 0
	}
	var turn atomic.Int64
	var gaveUp atomic.Bool
	start := time.Now()
	deadline := start.Add(handoffBudget)
	var wg sync.WaitGroup
	for g := range int64(2) {
		wg.Go(func() {
			for range handoffRounds {
				for n := 1; turn.Load()%2 != g; n++ {
					if n%1024 == 0 && (gaveUp.Load() || time.Now().After(deadline)) {
						gaveUp.Store(true)
						return
					}
				}
				turn.Add(1)
			}
		})
	}
	wg.Wait()
	if gaveUp.Load() {
		return 0
	}
	return time.Since(start) / (2 * handoffRounds)
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

func osName() string {
	b, err := os.ReadFile("/etc/os-release")
	if err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				return strings.Trim(v, `"`) + " " + runtime.GOOS + "/" + runtime.GOARCH
			}
		}
	}
	return runtime.GOOS + "/" + runtime.GOARCH
}

// depVersion returns the version of module path built into this program.
func depVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "?"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				if d.Replace.Version == "" {
					return "working tree (" + d.Replace.Path + ")"
				}
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "?"
}

// ratelimitdVersion names the working tree: its commit and whether the
// module's files (bench/ aside) have uncommitted changes.
func (r *runner) ratelimitdVersion(ctx context.Context) string {
	cmd := exec.CommandContext(ctx, "git", "-C", r.rootDir, "rev-parse", "--short", "HEAD")
	out, err := cmd.Output()
	if err != nil {
		return "working tree (no git)"
	}
	v := "working tree at " + strings.TrimSpace(string(out))
	st, err := exec.CommandContext(ctx, "git", "-C", r.rootDir, "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench").Output()
	if err == nil && len(bytes.TrimSpace(st)) > 0 {
		v += " + uncommitted changes"
	}
	return v
}

// redisVersion returns redis-server's version, or why there is none.
func (r *runner) redisVersion(ctx context.Context) (string, error) {
	path, err := exec.LookPath(r.o.redisServer)
	if err != nil {
		return "", fmt.Errorf("%s not found (Debian: apt-get install redis-server)", r.o.redisServer)
	}
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	for f := range strings.FieldsSeq(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v, nil
		}
	}
	return strings.TrimSpace(string(out)), nil
}

// describe fills in the machine, the versions and the commands.
func (r *runner) describe(ctx context.Context) {
	rep := r.rep
	rep.LoadAvgStart = loadAvg()
	rep.Machine = report.Machine{
		CPU: cpuModel(), Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Kernel: readTrim("/proc/sys/kernel/osrelease"), OS: osName(), Go: runtime.Version(), MemTotal: memTotal(),
	}
	redisV, err := r.redisVersion(ctx)
	if err != nil {
		r.redisErr = err.Error()
		redisV = "not available: " + err.Error()
	}
	rep.Versions = []report.Version{
		{Name: "ratelimitd", Version: r.ratelimitdVersion(ctx), How: "HTTP: the daemon binary built from the working tree (`go build ./cmd/ratelimitd`), a child process; embedded and scaling: packages actors and table, in this process"},
		{Name: "gubernator", Version: depVersion("github.com/gubernator-io/gubernator/v2"), How: "gubernator.SpawnDaemon (gRPC + its HTTP/JSON gateway), a single node owning every key, in a child process (`compare -serve gubernator`)"},
		{Name: "Redis", Version: redisV, How: "Debian's redis-server, a child process, no persistence"},
		{Name: "go-redis", Version: depVersion("github.com/redis/go-redis/v9"), How: "the Redis+Lua front's client (`compare -serve redisfront`, a child process), pool of 64"},
		{Name: "golang.org/x/time/rate", Version: depVersion("golang.org/x/time"), How: "in this process, one Limiter per key in a 256-shard map"},
		{Name: "sethvargo/go-limiter", Version: depVersion("github.com/sethvargo/go-limiter"), How: "in this process, memorystore"},
		{Name: "ulule/limiter", Version: depVersion("github.com/ulule/limiter/v3"), How: "in this process, memory store"},
		{Name: "gonum.org/v1/plot", Version: depVersion("gonum.org/v1/plot"), How: "the charts"},
	}
	args := strings.Join(os.Args[1:], " ")
	this := "cd bench && go run ./cmd/compare"
	if args != "" {
		this += " " + args
	}
	rep.Commands = []report.Command{
		{What: "this run", Line: this},
		{What: "full mode (writes bench/RESULTS.md and bench/charts/, and the performance block of README.md)", Line: "make bench-compare    # = cd bench && go run ./cmd/compare -readme ../README.md"},
		{What: "short mode, as CI runs it", Line: `cd bench && go run ./cmd/compare -short -out "$(mktemp -d)"`},
	}
}
