package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/admin"
	"github.com/ratelimitd/ratelimitd/api/clientip"
	"github.com/ratelimitd/ratelimitd/table"
)

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
	// adminAuthFailures is admin.Options.AuthFailures: 0 its default,
	// negative no limit.
	adminAuthFailures int
	// adminPprof is admin.Options.Profiling.
	adminPprof bool

	proxy proxyConfig

	redis     respConfig
	cluster   clusterConfig
	rls       rlsConfig
	dashboard dashboardConfig
	tls       tlsConfig
}

// parseFlags parses args into a config. On invalid flags it writes a message
// naming the flag and the usage to stderr and returns an error; on -h or
// --help it writes the usage and returns flag.ErrHelp.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := defaultConfig()
	proxyMode := len(args) > 0 && args[0] == "proxy"
	if proxyMode {
		args = args[1:]
	}
	fs := newFlagSet(&cfg, stderr)
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
	if cfg.cluster.forward > cfg.cluster.timeout {
		err := fmt.Errorf("--cluster-forward-timeout %v is longer than --cluster-timeout %v: a check would give up before its batch could", cfg.cluster.forward, cfg.cluster.timeout)
		fmt.Fprintln(stderr, err)
		return config{}, err
	}
	if cfg.adminPprof && cfg.adminTokenFile == "" {
		err := errors.New("--admin-pprof needs --admin-token-file: the profiles are served on the admin listener, behind its token")
		fmt.Fprintln(stderr, err)
		return config{}, err
	}
	if err := checkClusterTLS(&cfg.cluster); err != nil {
		fmt.Fprintln(stderr, err)
		return config{}, err
	}
	if err := cfg.tls.check(); err != nil {
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

// defaultConfig is the config of no flags at all.
func defaultConfig() config {
	return config{
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

		cluster:   defaultClusterConfig(),
		dashboard: dashboardConfig{on: true, topKeys: true},
	}
}

// newFlagSet returns the flags of the daemon, which set cfg, writing
// errors and the usage to out.
func newFlagSet(cfg *config, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("ratelimitd", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: ratelimitd [flags]\n       ratelimitd proxy --upstream URL [flags]\n       ratelimitd check [proxy] [flags]\n\nA rate-limiting HTTP server, or (proxy) a rate-limiting reverse proxy; check reads the files the flags name (rules, RLS config, secrets, TLS) as the start would, reports each, and starts nothing (exit 0: all good, 1: one is not). Flags may be written with one or two dashes.\n\n")
		fs.PrintDefaults()
	}
	serverFlags(fs, cfg)
	limiterFlags(fs, cfg)
	journalFlags(fs, cfg)
	rulesFlags(fs, cfg)
	proxyFlags(fs, cfg)
	respFlags(fs, cfg)
	clusterFlags(fs, cfg)
	rlsFlags(fs, cfg)
	dashboardFlags(fs, cfg)
	listenerTLSFlags(fs, cfg)
	return fs
}

// serverFlags defines the flags of the HTTP server, the logs and the
// process: listen address, shutdown, deny status, logging, connection cap,
// version.
func serverFlags(fs *flag.FlagSet, cfg *config) {
	addrFlag(fs, &cfg.listen, "listen", "`address` (host:port) to serve HTTP on; port 0 picks a free port (default 127.0.0.1:8080)")
	durationFlag(fs, &cfg.shutdownTimeout, "shutdown-timeout", "on SIGINT or SIGTERM, how long to drain in-flight HTTP requests, and then to stop the actors (a positive `duration`)", false)
	choiceFlag(fs, "deny-status", "HTTP `status` of a denied check: 413 or 429 (default 413)", false, []string{"413", "429"}, func(i int, _ string) {
		cfg.denyStatus = []int{http.StatusRequestEntityTooLarge, http.StatusTooManyRequests}[i]
	})
	choiceFlag(fs, "log-format", "log `format`: text or json (default text)", false, []string{"text", "json"}, func(_ int, s string) { cfg.logFormat = s })
	choiceFlag(fs, "log-level", "log `level`: debug, info, warn or error (default info)", true, []string{"debug", "info", "warn", "error"}, func(i int, _ string) {
		cfg.logLevel = []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError}[i]
	})
	intFlag(fs, &cfg.maxConns, "max-conns", "`number` of connections each listener (public or proxy, admin, and gRPC) holds open at most: at the cap the longest-idle keep-alive connection is closed to make room, else new connections wait in the listen backlog (default: the descriptor limit less the journal's reserve, shared by the listeners that are on; see README)", 1, 0)
	fs.BoolVar(&cfg.version, "version", false, "print the version and exit")
}

// limiterFlags defines the flags of the actor system: shards, sweeps and
// the table's bounds.
func limiterFlags(fs *flag.FlagSet, cfg *config) {
	durationFlag(fs, &cfg.sweepInterval, "sweep-interval", "how often expired buckets are swept, a positive `duration`", false)
	durationFlag(fs, &cfg.bucketTTL, "bucket-ttl", "keep idle buckets this much longer after they expire, for inspection (a `duration`; never shorter)", true)
	intFlag(fs, &cfg.shards, "shards", "`number` of shard owners, 0 to "+strconv.Itoa(actors.MaxShards)+"; 0 means 4 × GOMAXPROCS (default 0)", 0, actors.MaxShards)
	intFlag(fs, &cfg.maxBuckets, "max-buckets", "`number` of buckets held at most, all shards together: memory stays bounded however many ids arrive (default "+strconv.Itoa(actors.DefaultMaxBuckets)+", about 1.1 GB resident when full)", 1, 0)
	choiceFlag(fs, "on-full", "what a full table does with a new id, once expired buckets are gone: deny-new (503 with Retry-After) or evict-oldest (the bucket closest to expiring goes) (default deny-new)", false, []string{"deny-new", "evict-oldest"}, func(i int, _ string) { cfg.evictOldest = i == 1 })
}

// journalFlags defines the flags of durability: the data directory, the
// journal's sync and failure policies, segments and snapshots.
func journalFlags(fs *flag.FlagSet, cfg *config) {
	fs.StringVar(&cfg.dataDir, "data-dir", cfg.dataDir, "`directory` of the journals that keep counters across restarts and crashes (locked: one process per directory); empty keeps state in memory only")
	fs.Func("journal-sync", "when journals are flushed to disk: none (survives a process crash, not a power loss), interval (every --journal-sync-interval) or always (before each reply) (default interval)", func(s string) error {
		m, err := actors.ParseSyncMode(s)
		if err != nil {
			return errors.New("must be none, interval or always")
		}
		cfg.journalSync = m
		return nil
	})
	durationFlag(fs, &cfg.journalSyncInterval, "journal-sync-interval", "`period` of the journal flush in interval mode (with none, of the background passes that map the journal's next pages ahead)", false)
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
}

// rulesFlags defines the flags of the named rules and of the admin API.
func rulesFlags(fs *flag.FlagSet, cfg *config) {
	fs.StringVar(&cfg.rulesFile, "rules", "", "YAML `file` of named rules (rules: [{name, algorithm, scale, limit, burst, shadow, match}]); reloaded when it changes and on SIGHUP")
	addrFlag(fs, &cfg.adminListen, "admin-listen", "`address` (host:port) of the admin API (rules, reset, inspect); served only with --admin-token-file (default 127.0.0.1:8081)")
	fs.StringVar(&cfg.adminTokenFile, "admin-token-file", "", "`file` holding the admin API's bearer token, at least 16 bytes, in a file no group or other user may access (mode 0600 or 0400): one per line, any of them accepted; re-read when it changes, so a token rotates without a restart; without it the admin API is off")
	fs.BoolVar(&cfg.adminPprof, "admin-pprof", false, "serve the Go runtime's profiles (CPU, heap, goroutines...) and execution traces, for go tool pprof and go tool trace, on the admin listener, under /debug/pprof and behind the admin token; needs --admin-token-file")
	authFailuresFlag(fs, &cfg.adminAuthFailures, "admin-auth-failures", "`number` of requests with a wrong token a client address may send to the admin listener at once, then per minute, before its requests with a token are answered 429 for a while, their tokens not compared; 0 turns the limit off, for callers that share an address behind a proxy or NAT (default "+strconv.Itoa(admin.DefaultAuthFailures)+")")
}

// authFailuresFlag defines a flag of the failed attempts at a secret a
// client address may make (secret.Limiter): p gets the number, or -1 for
// 0, which turns the limit off; left alone, p stays 0, the default.
func authFailuresFlag(fs *flag.FlagSet, p *int, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		n, err := strconv.Atoi(s)
		switch {
		case err != nil || n < 0:
			return errors.New("must be a number, 0 or more")
		case n == 0:
			*p = -1
		default:
			*p = n
		}
		return nil
	})
}

// proxyFlags defines the flags of proxy mode: the upstream, who the
// client is, and the limits of the layers.
func proxyFlags(fs *flag.FlagSet, cfg *config) {
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
	choiceFlag(fs, "client-ip-header", "with --trusted-proxies, read only this forwarding `header` (Forwarded, X-Forwarded-For or X-Real-IP) instead of the first present in that order; set it to the header your proxy writes, so a client cannot pick its own address with another", true, []string{"Forwarded", "X-Forwarded-For", "X-Real-IP"}, func(_ int, s string) { cfg.proxy.header = s })
	intFlag(fs, &cfg.proxy.ipv6Prefix, "ipv6-prefix", "IPv6 clients are limited per `prefix` length, so rotating addresses of one allocation share a budget (default 64)", 1, 128)
	limitFlag(fs.Func, &cfg.proxy.client, "client-limit", "proxy mode: the per-client `limit` as LIMIT/SCALE[/ALGORITHM[/BURST]], e.g. 100/1s")
	limitFlag(fs.Func, &cfg.proxy.host, "host-limit", "proxy mode: the per-host (domain) `limit`, LIMIT/SCALE[/ALGORITHM[/BURST]]")
	limitFlag(fs.Func, &cfg.proxy.global, "global-limit", "proxy mode: the global ceiling, `LIMIT/SCALE[/ALGORITHM[/BURST]]`")
}

// choiceFlag defines a flag on fs that takes one of choices, in any case
// when fold, and calls set with its index and the value as given.
func choiceFlag(fs *flag.FlagSet, name, usage string, fold bool, choices []string, set func(i int, s string)) {
	fs.Func(name, usage, func(s string) error {
		for i, c := range choices {
			if s == c || fold && strings.EqualFold(s, c) {
				set(i, s)
				return nil
			}
		}
		return errors.New("must be " + strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1])
	})
}

// addrFlag defines a listen address flag on fs (see checkListenAddr).
func addrFlag(fs *flag.FlagSet, p *string, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		if err := checkListenAddr(s); err != nil {
			return err
		}
		*p = s
		return nil
	})
}

// intFlag defines an integer flag on fs of at least lo and, unless hi is
// 0, at most hi.
func intFlag(fs *flag.FlagSet, p *int, name, usage string, lo, hi int) {
	fs.Func(name, usage, func(s string) error {
		n, err := strconv.Atoi(s)
		switch {
		case hi == 0 && (err != nil || n < lo):
			return errors.New("must be a positive integer")
		case hi != 0 && (err != nil || n < lo || n > hi):
			return fmt.Errorf("must be an integer from %d to %d", lo, hi)
		}
		*p = n
		return nil
	})
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

// proxyConfig is what the proxy flags say.
type proxyConfig struct {
	upstream             string // "": not a proxy
	trusted              []netip.Prefix
	ipv6Prefix           int
	header               string // the one forwarding header to read, or "" for the automatic order
	client, host, global *table.Policy
}

// parseLimitSpec parses a proxy layer's limit, table.ParsePolicy's
// LIMIT/SCALE[/ALGORITHM[/BURST]] with a LIMIT of at least 1, e.g. 100/1s
// or 600/1m/token_bucket/50.
func parseLimitSpec(s string) (*table.Policy, error) {
	if limit, _, _ := strings.Cut(s, "/"); limit == "0" || strings.HasPrefix(limit, "-") {
		return nil, table.ErrPolicySyntax
	}
	p, err := table.ParsePolicy(s)
	var fe *table.FieldError
	switch {
	case errors.As(err, &fe) && fe.Field == "algorithm":
		return nil, fmt.Errorf("algorithm %s", fe.Message)
	case err != nil:
		return nil, err
	case p.Limit < 1:
		return nil, table.ErrPolicySyntax
	}
	return &p, nil
}

// limitFlag defines a LIMIT/SCALE flag that sets *p.
func limitFlag(set func(name, usage string, fn func(string) error), p **table.Policy, name, usage string) {
	set(name, usage, func(s string) error {
		l, err := parseLimitSpec(s)
		if err != nil {
			return err
		}
		*p = l
		return nil
	})
}
