// Command ratelimitd is the rate-limiting server: it answers
// GET/POST /check_rate, /healthz and /metrics over HTTP (see package api),
// counting in an embedded actor system (see package actors).
//
// Usage:
//
//	ratelimitd [flags]
//
// Flags (also accepted with a single dash):
//
//	--listen ADDR             address to serve HTTP on (default 127.0.0.1:8080; port 0 picks a free one)
//	--sweep-interval DUR      how often expired buckets are swept (default 10s)
//	--bucket-ttl DUR          keep idle buckets this much longer after they expire (default 0)
//	--shards N                shard owners; 0 means 4 × GOMAXPROCS (default 0)
//	--deny-status CODE        status of a denied check: 413 or 429 (default 413)
//	--log-format FORMAT       text or json (default text)
//	--log-level LEVEL         debug, info, warn or error (default info)
//	--shutdown-timeout DUR    how long to drain HTTP requests, and then the actors, on shutdown (default 10s)
//	--max-conns N             connections each HTTP listener holds open at most (default: sized to the descriptor limit)
//	--version                 print the version and exit
//
// Logs are structured (log/slog) and go to standard error. Once the listener
// is open, the daemon logs msg=listening with addr set to the bound address.
// SIGINT or SIGTERM starts a graceful shutdown: the HTTP server stops
// accepting and drains in-flight requests, then the actor system stops, each
// step within --shutdown-timeout. Further signals meanwhile are ignored.
//
// Exit status: 0 after a clean shutdown (or --version, --help), 1 when the
// daemon could not start or stop cleanly, 2 for invalid flags (nothing is
// started then).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/clientip"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/metrics"
)

// Exit codes of run.
const (
	exitOK      = 0
	exitFailure = 1 // could not start, or could not stop cleanly
	exitUsage   = 2 // invalid flags; nothing was started
)

// Timeouts and limits of the HTTP server. They are not flags: they bound
// abuse (slowloris, huge headers), not normal use.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 10 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 64 << 10
)

func main() {
	// SIGINT and SIGTERM stay caught until exit: a second one during the
	// shutdown (bounded by --shutdown-timeout) cannot cut the actors' stop short.
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags say.
type config struct {
	listen          string
	sweepInterval   time.Duration
	bucketTTL       time.Duration
	shards          int
	denyStatus      int
	logFormat       string
	logLevel        slog.Level
	shutdownTimeout time.Duration
	version         bool

	dataDir             string
	journalSync         actors.SyncMode
	journalSyncInterval time.Duration
	onJournalError      actors.JournalErrorPolicy
	journalRepair       bool
	segmentSize         int64
	snapshotThreshold   int64

	maxBuckets  int
	evictOldest bool

	maxConns int // per HTTP listener; 0: sized to the descriptor limit

	rulesFile      string
	adminListen    string
	adminTokenFile string

	proxy proxyConfig
}

// run is the daemon: it parses args, starts the actor system and the HTTP
// server, and serves until ctx is done; then it shuts down gracefully. It
// returns the process exit code. Logs go to stderr; only --version and
// --help write to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		return exitUsage
	case cfg.version:
		fmt.Fprintln(stdout, versionString())
		return exitOK
	}

	log := newLogger(stderr, cfg.logFormat, cfg.logLevel)
	log.Info("starting",
		"version", moduleVersion(),
		"go", runtime.Version(),
		"shards", cfg.shards,
		"sweep_interval", cfg.sweepInterval,
		"bucket_ttl", cfg.bucketTTL,
		"deny_status", cfg.denyStatus,
		"data_dir", cfg.dataDir,
		"journal_sync", cfg.journalSync,
		"on_journal_error", cfg.onJournalError,
		"max_buckets", cfg.maxBuckets,
		"evict_oldest", cfg.evictOldest,
		"proxy_upstream", cfg.proxy.upstream,
	)

	// Before any journal or listener opens: the soft descriptor limit up to
	// the hard one, which sizes the connection caps.
	nofile, nofileHard, err := raiseNoFile()
	if err != nil {
		log.Warn("cannot raise the descriptor limit", "err", err)
	}
	log.Info("descriptor limit", "soft", nofile, "hard", nofileHard)

	// The token and the rules first: a refused file stops the start before
	// any recovery.
	var adminToken string
	if cfg.adminTokenFile != "" {
		if adminToken, err = readToken(cfg.adminTokenFile); err != nil {
			log.Error("cannot read the admin token", "err", err)
			return exitFailure
		}
	}
	prom := metrics.New()
	rs, err := startRules(&cfg, log, prom)
	if err != nil {
		log.Error("cannot load the rules", "err", err)
		return exitFailure
	}
	defer rs.close()

	sys, err := actors.Start(ctx, actors.Config{
		Shards:        cfg.shards,
		SweepInterval: cfg.sweepInterval,
		BucketTTL:     cfg.bucketTTL,
		Logger:        log.With("component", "actors"),
		SweepObserver: sweepMetrics{prom},

		DataDir:             cfg.dataDir,
		JournalSync:         cfg.journalSync,
		JournalSyncInterval: cfg.journalSyncInterval,
		OnJournalError:      cfg.onJournalError,
		JournalRepair:       cfg.journalRepair,
		SegmentSize:         cfg.segmentSize,
		SnapshotThreshold:   cfg.snapshotThreshold,

		MaxBuckets:  cfg.maxBuckets,
		EvictOldest: cfg.evictOldest,
	})
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			log.Info("stopped while starting", "cause", context.Cause(ctx))
			return exitOK
		}
		log.Error("cannot start the actor system", "err", err)
		return exitFailure
	}
	// From here on every return path stops sys.
	prom.Observe(metricsStats(sys))

	budget, err := connCaps(&cfg, sys.Stats().Shards, nofile)
	if err != nil {
		log.Error("cannot size the connection caps", "err", err)
		stopActors(log, sys, cfg.shutdownTimeout)
		return exitFailure
	}
	log.Info("connection caps", "max_conns", budget.maxConns, "listeners", len(listenerCosts(&cfg)),
		"descriptor_limit", budget.nofile, "reserve", budget.reserve, "shards", budget.shards, "per_shard", budget.perShard,
		"from_flag", cfg.maxConns > 0)
	if need := uint64(budget.reserve) + uint64(budget.maxConns)*uint64(budget.perConnAll); cfg.maxConns > 0 && need > nofile {
		log.Warn("--max-conns allows more connections than the descriptor limit leaves free: a flood may starve the journal",
			"max_conns", budget.maxConns, "descriptors_needed", need, "descriptor_limit", nofile)
	}

	var handler http.Handler
	if cfg.proxy.upstream != "" {
		// Proxy mode: the public listener proxies everything; metrics are
		// on the admin listener.
		handler, err = newProxy(&cfg, log, sys, rs, prom)
	} else {
		handler, err = httpapi.NewHandler(sys, httpapi.Options{
			DenyStatus: cfg.denyStatus,
			Metrics:    prom,
			Logger:     log.With("component", "api"),
			Rules:      rs.store,
		})
	}
	if err != nil {
		log.Error("cannot build the HTTP handler", "err", err)
		stopActors(log, sys, cfg.shutdownTimeout)
		return exitFailure
	}
	admin, err := startAdmin(&cfg, adminToken, budget.maxConns, log, sys, rs, prom)
	if err != nil {
		log.Error("cannot start the admin API", "err", err)
		stopActors(log, sys, cfg.shutdownTimeout)
		return exitFailure
	}

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		log.Error("cannot listen", "addr", cfg.listen, "err", err)
		admin.shutdown(context.Background(), log)
		stopActors(log, sys, cfg.shutdownTimeout)
		return exitFailure
	}
	if log.Enabled(ctx, slog.LevelDebug) {
		handler = httpapi.AccessLog(log.With("component", "http"), handler)
	}
	srv := newServer(handler, log.With("component", "http"))
	name := "public"
	if cfg.proxy.upstream != "" {
		name = "proxy"
	}
	capped := limitConns(ln, srv, budget.maxConns, name, log.With("component", "http"), prom)
	log.Info("listening", "addr", ln.Addr().String(), "max_conns", budget.maxConns)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(capped) }()

	code := exitOK
	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "cause", context.Cause(ctx), "timeout", cfg.shutdownTimeout)
	case serveErr = <-served:
		// Serve returns before Shutdown only on a failure to accept.
		log.Error("HTTP server failed; shutting down", "err", serveErr)
		code = exitFailure
	}

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.shutdownTimeout)
	err = srv.Shutdown(shutdownCtx)
	admin.shutdown(shutdownCtx, log)
	cancel()
	if err != nil {
		log.Warn("HTTP server did not drain in time; closing the remaining connections", "err", err)
		_ = srv.Close()
	}
	if serveErr == nil {
		// Shutdown has closed the listener, so Serve returns (ErrServerClosed).
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP server failed", "err", err)
			code = exitFailure
		}
	}
	log.Info("HTTP server stopped")

	if !stopActors(log, sys, cfg.shutdownTimeout) {
		code = exitFailure
	}
	log.Info("stopped", "exit_code", code)
	return code
}

// newServer returns an HTTP server for h with the daemon's timeouts.
func newServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// stopActors stops sys within timeout and logs the outcome. It reports
// whether sys stopped cleanly.
func stopActors(log *slog.Logger, sys *actors.System, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := sys.Stop(ctx); err != nil {
		log.Error("actor system did not stop cleanly", "err", err)
		return false
	}
	log.Info("actor system stopped")
	return true
}

// newLogger returns a slog.Logger writing format ("text" or "json") to w.
// Both handlers quote or escape attribute values, so a client-supplied value
// logged as an attribute cannot forge a log line.
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// parseFlags parses args into a config. On invalid flags it writes a message
// naming the flag and the usage to stderr and returns an error; on -h or
// --help it writes the usage and returns flag.ErrHelp.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := config{
		listen:          "127.0.0.1:8080",
		sweepInterval:   10 * time.Second,
		denyStatus:      http.StatusRequestEntityTooLarge,
		logFormat:       "text",
		logLevel:        slog.LevelInfo,
		shutdownTimeout: 10 * time.Second,

		dataDir:             "data",
		journalSync:         actors.SyncInterval,
		journalSyncInterval: 100 * time.Millisecond,
		onJournalError:      actors.FailClosed,
		segmentSize:         actors.DefaultSegmentSize,
		snapshotThreshold:   actors.DefaultSnapshotThreshold,

		maxBuckets: actors.DefaultMaxBuckets,

		adminListen: "127.0.0.1:8081",
	}
	proxyMode := len(args) > 0 && args[0] == "proxy"
	if proxyMode {
		args = args[1:]
	}
	fs := flag.NewFlagSet("ratelimitd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: ratelimitd [flags]\n       ratelimitd proxy --upstream URL [flags]\n\nA rate-limiting HTTP server, or (proxy) a rate-limiting reverse proxy. Flags may be written with one or two dashes.\n\n")
		fs.PrintDefaults()
	}

	fs.Func("listen", "`address` (host:port) to serve HTTP on; port 0 picks a free port (default 127.0.0.1:8080)", func(s string) error {
		if err := checkListenAddr(s); err != nil {
			return err
		}
		cfg.listen = s
		return nil
	})
	durationFlag(fs, &cfg.sweepInterval, "sweep-interval", "how often expired buckets are swept, a positive `duration`", false)
	durationFlag(fs, &cfg.bucketTTL, "bucket-ttl", "keep idle buckets this much longer after they expire, for inspection (a `duration`; never shorter)", true)
	durationFlag(fs, &cfg.shutdownTimeout, "shutdown-timeout", "on SIGINT or SIGTERM, how long to drain in-flight HTTP requests, and then to stop the actors (a positive `duration`)", false)
	fs.Func("shards", "`number` of shard owners, 0 to "+strconv.Itoa(actors.MaxShards)+"; 0 means 4 × GOMAXPROCS (default 0)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > actors.MaxShards {
			return fmt.Errorf("must be an integer from 0 to %d", actors.MaxShards)
		}
		cfg.shards = n
		return nil
	})
	fs.Func("deny-status", "HTTP `status` of a denied check: 413 or 429 (default 413)", func(s string) error {
		switch s {
		case "413":
			cfg.denyStatus = http.StatusRequestEntityTooLarge
		case "429":
			cfg.denyStatus = http.StatusTooManyRequests
		default:
			return errors.New("must be 413 or 429")
		}
		return nil
	})
	fs.Func("log-format", "log `format`: text or json (default text)", func(s string) error {
		switch s {
		case "text", "json":
			cfg.logFormat = s
			return nil
		}
		return errors.New("must be text or json")
	})
	fs.Func("log-level", "log `level`: debug, info, warn or error (default info)", func(s string) error {
		switch strings.ToLower(s) {
		case "debug":
			cfg.logLevel = slog.LevelDebug
		case "info":
			cfg.logLevel = slog.LevelInfo
		case "warn":
			cfg.logLevel = slog.LevelWarn
		case "error":
			cfg.logLevel = slog.LevelError
		default:
			return errors.New("must be debug, info, warn or error")
		}
		return nil
	})
	fs.StringVar(&cfg.dataDir, "data-dir", cfg.dataDir, "`directory` of the journals that keep counters across restarts and crashes (locked: one process per directory); empty keeps state in memory only")
	fs.Func("journal-sync", "when journals are flushed to disk: none (survives a process crash, not a power loss), interval (every --journal-sync-interval) or always (before each reply) (default interval)", func(s string) error {
		m, err := actors.ParseSyncMode(s)
		if err != nil {
			return errors.New("must be none, interval or always")
		}
		cfg.journalSync = m
		return nil
	})
	durationFlag(fs, &cfg.journalSyncInterval, "journal-sync-interval", "`period` of the journal flush in interval mode", false)
	fs.Func("on-journal-error", "what a shard does while its journal fails (full disk, I/O error): closed refuses checks with 503, open answers from memory (default closed)", func(s string) error {
		p, err := actors.ParseJournalErrorPolicy(s)
		if err != nil {
			return errors.New("must be closed or open")
		}
		cfg.onJournalError = p
		return nil
	})
	fs.BoolVar(&cfg.journalRepair, "journal-repair", false, "start even if a journal is damaged in its middle, cutting it at the damage (the rest is kept as *.broken)")
	bytesFlag(fs, &cfg.segmentSize, "journal-segment-size", "`size` of each journal segment file, e.g. 8MiB (a multiple of 64KiB)")
	bytesFlag(fs, &cfg.snapshotThreshold, "snapshot-threshold", "journal `size` of a shard past which it writes a snapshot and drops the segments it covers, e.g. 32MiB")
	fs.Func("max-buckets", "`number` of buckets held at most, all shards together: memory stays bounded however many ids arrive (default "+strconv.Itoa(actors.DefaultMaxBuckets)+", about 1.9 GB resident when full)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return errors.New("must be a positive integer")
		}
		cfg.maxBuckets = n
		return nil
	})
	fs.Func("max-conns", "`number` of connections each HTTP listener (public or proxy, and admin) holds open at most: at the cap the longest-idle keep-alive connection is closed to make room, else new connections wait in the listen backlog (default: the descriptor limit less the journal's reserve, shared by the listeners that are on; see README)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return errors.New("must be a positive integer")
		}
		cfg.maxConns = n
		return nil
	})
	fs.Func("on-full", "what a full table does with a new id, once expired buckets are gone: deny-new (503 with Retry-After) or evict-oldest (the bucket closest to expiring goes) (default deny-new)", func(s string) error {
		switch s {
		case "deny-new":
			cfg.evictOldest = false
		case "evict-oldest":
			cfg.evictOldest = true
		default:
			return errors.New("must be deny-new or evict-oldest")
		}
		return nil
	})
	fs.StringVar(&cfg.rulesFile, "rules", "", "YAML `file` of named rules (rules: [{name, algorithm, scale, limit, burst, shadow, match}]); reloaded when it changes and on SIGHUP")
	fs.Func("admin-listen", "`address` (host:port) of the admin API (rules, reset, inspect); served only with --admin-token-file (default 127.0.0.1:8081)", func(s string) error {
		if err := checkListenAddr(s); err != nil {
			return err
		}
		cfg.adminListen = s
		return nil
	})
	fs.StringVar(&cfg.adminTokenFile, "admin-token-file", "", "`file` holding the admin API's bearer token, at least 16 bytes, in a file no group or other user may access (mode 0600 or 0400); without it the admin API is off")
	upstream := func(s string) error {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("must be an http or https URL with a host, such as http://127.0.0.1:9000")
		}
		cfg.proxy.upstream = s
		return nil
	}
	fs.Func("upstream", "proxy mode: the `URL` admitted requests are proxied to (same as --proxy-upstream)", upstream)
	fs.Func("proxy-upstream", "serve as a rate-limiting reverse proxy to this `URL` instead of the check_rate API", upstream)
	fs.Func("trusted-proxies", "comma-separated `CIDRs` (or IPs) of proxies whose X-Forwarded-For, Forwarded and X-Real-IP are believed (default none)", func(s string) error {
		p, err := clientip.ParsePrefixes(s)
		if err != nil {
			return err
		}
		cfg.proxy.trusted = p
		return nil
	})
	fs.Func("client-ip-header", "with --trusted-proxies, read only this forwarding `header` (Forwarded, X-Forwarded-For or X-Real-IP) instead of the first present in that order; set it to the header your proxy writes, so a client cannot pick its own address with another", func(s string) error {
		switch strings.ToLower(s) {
		case "forwarded", "x-forwarded-for", "x-real-ip":
			cfg.proxy.header = s
			return nil
		}
		return errors.New("must be Forwarded, X-Forwarded-For or X-Real-IP")
	})
	fs.Func("ipv6-prefix", "IPv6 clients are limited per `prefix` length, so rotating addresses of one allocation share a budget (default 64)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 128 {
			return errors.New("must be an integer from 1 to 128")
		}
		cfg.proxy.ipv6Prefix = n
		return nil
	})
	limitFlag(fs.Func, &cfg.proxy.client, "client-limit", "proxy mode: the per-client `limit` as LIMIT/SCALE[/ALGORITHM[/BURST]], e.g. 100/1s")
	limitFlag(fs.Func, &cfg.proxy.host, "host-limit", "proxy mode: the per-host (domain) `limit`, LIMIT/SCALE[/ALGORITHM[/BURST]]")
	limitFlag(fs.Func, &cfg.proxy.global, "global-limit", "proxy mode: the global ceiling, `LIMIT/SCALE[/ALGORITHM[/BURST]]`")
	fs.BoolVar(&cfg.version, "version", false, "print the version and exit")

	if err := fs.Parse(args); err != nil {
		// flag has already written the error, naming the flag, and the usage.
		return config{}, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected argument %q: ratelimitd takes flags only (or proxy, then flags)", fs.Arg(0))
		fmt.Fprintln(stderr, err)
		fs.Usage()
		return config{}, err
	}
	if proxyMode && cfg.proxy.upstream == "" && !cfg.version {
		err := errors.New("ratelimitd proxy needs --upstream URL")
		fmt.Fprintln(stderr, err)
		fs.Usage()
		return config{}, err
	}
	return cfg, nil
}

// durationFlag defines a duration flag on fs that rejects negative values
// and, unless zeroOK, zero.
func durationFlag(fs *flag.FlagSet, p *time.Duration, name, usage string, zeroOK bool) {
	usage = fmt.Sprintf("%s (default %v)", usage, *p)
	fs.Func(name, usage, func(s string) error {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return errors.New("must be a duration such as 500ms, 10s or 1m")
		case d < 0 || (d == 0 && !zeroOK):
			if zeroOK {
				return errors.New("must not be negative")
			}
			return errors.New("must be positive")
		}
		*p = d
		return nil
	})
}

// bytesFlag defines a size flag on fs: a positive whole number of bytes,
// optionally with a suffix KiB, MiB or GiB.
func bytesFlag(fs *flag.FlagSet, p *int64, name, usage string) {
	usage = fmt.Sprintf("%s (default %s)", usage, formatBytes(*p))
	fs.Func(name, usage, func(s string) error {
		n, err := parseBytes(s)
		if err != nil {
			return err
		}
		*p = n
		return nil
	})
}

var byteUnits = []struct {
	suffix string
	size   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}, {"", 1}}

// parseBytes parses a size such as 65536, 64KiB or 8MiB.
func parseBytes(s string) (int64, error) {
	bad := errors.New("must be a positive whole number of bytes, optionally with KiB, MiB or GiB, such as 8MiB")
	for _, u := range byteUnits {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n <= 0 || n > (1<<50)/u.size {
			return 0, bad
		}
		return n * u.size, nil
	}
	return 0, bad
}

// formatBytes writes n with the largest unit that divides it.
func formatBytes(n int64) string {
	for _, u := range byteUnits[:3] {
		if n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// checkListenAddr reports whether s is a host:port that net.Listen("tcp")
// could accept: the host may be empty, a name or an IP; the port a number
// from 0 to 65535 or a service name.
func checkListenAddr(s string) error {
	// The messages never repeat s: flag quotes it already, and a raw value
	// could hold a newline.
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		reason := "malformed"
		var ae *net.AddrError
		if errors.As(err, &ae) {
			reason = ae.Err
		}
		return fmt.Errorf("must be host:port, such as 127.0.0.1:8080 or :8080 (%s)", reason)
	}
	if strings.ContainsAny(host, " \t\r\n/") {
		return errors.New("must be host:port with a host name or IP address")
	}
	if port == "" {
		return errors.New("must be host:port with a port; use port 0 for any free port")
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return errors.New("must be host:port with a port from 0 to 65535 or a known service name")
	}
	return nil
}

// versionString returns "ratelimitd VERSION (GOVERSION)", for --version.
func versionString() string {
	return fmt.Sprintf("ratelimitd %s (%s)", moduleVersion(), runtime.Version())
}

// moduleVersion returns the module version the binary was built from (as
// with go install …@v1.2.3), else "devel-" and the VCS revision it was built
// from, else "devel".
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return "devel-" + s.Value
		}
	}
	return "devel"
}
