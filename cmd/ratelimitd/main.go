// Command ratelimitd is the rate-limiting server: it answers
// GET/POST /check_rate, /refund, /healthz and /metrics over HTTP (package
// api/httpapi), or, as ratelimitd proxy, limits the requests it proxies to
// an upstream (api/proxy), counting in an embedded actor system (package
// actors), with the admin API (api/admin) on a listener of its own and,
// with --redis-listen, the Redis protocol (api/resp) on another, and, with
// --grpc-listen, Envoy's Rate Limit Service over gRPC (api/rls), whose POST
// /json is on the public listener.
//
// Usage:
//
//	ratelimitd [flags]
//	ratelimitd proxy --upstream URL [flags]
//	ratelimitd check [proxy] [flags]
//
// check reads the files the flags name as the start would and reports
// each, starting nothing (see checkFiles).
//
// Flags may be written with one dash or two; README.md's flags table lists
// every one with its default (TestREADMEFlags keeps it in step with the
// binary), and ratelimitd --help prints them.
//
// Logs are structured (log/slog) and go to standard error. Once the listener
// is open, the daemon logs msg=listening with addr set to the bound address.
// SIGINT or SIGTERM starts a graceful shutdown: the HTTP and Redis protocol
// servers stop accepting and drain in-flight requests, then the actor system
// stops, each step within --shutdown-timeout. Further signals meanwhile are ignored.
// With --cluster-etcd the daemon is one member of a cluster (package
// actors, Cluster mode): on SIGTERM it hands its vshards, with their
// counts, to the other members before it stops.
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
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
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

// run is the daemon: it parses args, starts the actor system and the HTTP
// server, and serves until ctx is done; then it shuts down gracefully. It
// returns the process exit code. Logs go to stderr; only --version and
// --help write to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	check := len(args) > 0 && args[0] == checkCommand
	if check {
		args = args[1:]
	}
	cfg, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		return exitUsage
	case cfg.version:
		fmt.Fprintln(stdout, versionString())
		return exitOK
	case check:
		return checkFiles(&cfg, stdout, stderr)
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
		"cluster_etcd", strings.Join(cfg.cluster.etcd, ","),
	)
	d, code := start(ctx, &cfg, log)
	if d == nil {
		return code
	}
	return d.serve(ctx)
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
