package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/table"
)

// defaults is the config of no flags at all.
var defaults = config{
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

	cluster:   clusterConfig{listen: "127.0.0.1:7946", name: "ratelimitd", lease: 3 * time.Second, vshards: 1024, timeout: time.Second, forward: 500 * time.Millisecond},
	dashboard: dashboardConfig{on: true, topKeys: true},
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	with := func(f func(*config)) config {
		c := defaults
		f(&c)
		return c
	}
	tests := []struct {
		args []string
		want config
	}{
		{nil, defaults},
		{[]string{"--listen", ":0"}, with(func(c *config) { c.listen = ":0" })},
		{[]string{"-listen=[::1]:9000"}, with(func(c *config) { c.listen = "[::1]:9000" })},
		{[]string{"--listen", "localhost:http"}, with(func(c *config) { c.listen = "localhost:http" })},
		{[]string{"--sweep-interval", "20ms"}, with(func(c *config) { c.sweepInterval = 20 * time.Millisecond })},
		{[]string{"--bucket-ttl", "0"}, defaults},
		{[]string{"--bucket-ttl", "1h30m"}, with(func(c *config) { c.bucketTTL = 90 * time.Minute })},
		{[]string{"--shards", "0"}, defaults},
		{[]string{"--shards", "16"}, with(func(c *config) { c.shards = 16 })},
		{[]string{"--deny-status", "429"}, with(func(c *config) { c.denyStatus = http.StatusTooManyRequests })},
		{[]string{"--deny-status=413"}, defaults},
		{[]string{"--log-format", "json"}, with(func(c *config) { c.logFormat = "json" })},
		{[]string{"--log-level", "debug"}, with(func(c *config) { c.logLevel = slog.LevelDebug })},
		{[]string{"--log-level", "WARN"}, with(func(c *config) { c.logLevel = slog.LevelWarn })},
		{[]string{"--log-level", "error"}, with(func(c *config) { c.logLevel = slog.LevelError })},
		{[]string{"--shutdown-timeout", "1s"}, with(func(c *config) { c.shutdownTimeout = time.Second })},
		{[]string{"--version"}, with(func(c *config) { c.version = true })},
		{[]string{"--data-dir", "/var/lib/ratelimitd"}, with(func(c *config) { c.dataDir = "/var/lib/ratelimitd" })},
		{[]string{"--data-dir="}, with(func(c *config) { c.dataDir = "" })},
		{[]string{"--journal-sync", "always"}, with(func(c *config) { c.journalSync = actors.SyncAlways })},
		{[]string{"--journal-sync", "none"}, with(func(c *config) { c.journalSync = actors.SyncNone })},
		{[]string{"--journal-sync-interval", "1s"}, with(func(c *config) { c.journalSyncInterval = time.Second })},
		{[]string{"--on-journal-error", "open"}, with(func(c *config) { c.onJournalError = actors.FailOpen })},
		{[]string{"--journal-repair"}, with(func(c *config) { c.journalRepair = true })},
		{[]string{"--journal-segment-size", "64KiB"}, with(func(c *config) { c.segmentSize = 64 << 10 })},
		{[]string{"--snapshot-threshold", "1048576"}, with(func(c *config) { c.snapshotThreshold = 1 << 20 })},
		{[]string{"--snapshot-threshold", "2GiB"}, with(func(c *config) { c.snapshotThreshold = 2 << 30 })},
		{[]string{"--max-buckets", "100000"}, with(func(c *config) { c.maxBuckets = 100000 })},
		{[]string{"--on-full", "evict-oldest"}, with(func(c *config) { c.evictOldest = true })},
		{[]string{"--on-full", "deny-new"}, defaults},
		{[]string{"--max-conns", "8"}, with(func(c *config) { c.maxConns = 8 })},
		{[]string{"--rules", "rules.yaml"}, with(func(c *config) { c.rulesFile = "rules.yaml" })},
		{[]string{"--admin-listen", "127.0.0.1:0"}, with(func(c *config) { c.adminListen = "127.0.0.1:0" })},
		{[]string{"--admin-token-file", "/run/secrets/token"}, with(func(c *config) { c.adminTokenFile = "/run/secrets/token" })},
		{[]string{"--admin-auth-failures", "3"}, with(func(c *config) { c.adminAuthFailures = 3 })},
		{[]string{"--admin-auth-failures", "0"}, with(func(c *config) { c.adminAuthFailures = -1 })},
		{[]string{"--dashboard=false"}, with(func(c *config) { c.dashboard.on = false })},
		{[]string{"--top-keys=false", "--dashboard"}, with(func(c *config) { c.dashboard.topKeys = false })},
		{[]string{"--top-keys-sample", "1"}, with(func(c *config) { c.dashboard.topKeysSample = 1 })},
		{[]string{"--top-keys-sample", "1024"}, with(func(c *config) { c.dashboard.topKeysSample = 1024 })},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:9000"}, with(func(c *config) { c.proxy.upstream = "http://127.0.0.1:9000" })},
		{[]string{"--proxy-upstream", "https://app.internal"}, with(func(c *config) { c.proxy.upstream = "https://app.internal" })},
		{[]string{"--client-limit", "100/1s"}, with(func(c *config) { c.proxy.client = &table.Policy{Limit: 100, Scale: time.Second} })},
		{[]string{"--global-limit", "600/1m/token_bucket/50"}, with(func(c *config) {
			c.proxy.global = &table.Policy{Limit: 600, Scale: time.Minute, Algorithm: table.TokenBucket, Burst: 50}
		})},
		{[]string{"--trusted-proxies", "10.0.0.0/8, 192.0.2.1"}, with(func(c *config) {
			c.proxy.trusted = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32")}
		})},
		{[]string{"--ipv6-prefix", "56"}, with(func(c *config) { c.proxy.ipv6Prefix = 56 })},
		{[]string{"--client-ip-header", "X-Forwarded-For"}, with(func(c *config) { c.proxy.header = "X-Forwarded-For" })},
		{[]string{"--cluster-etcd", "http://127.0.0.1:2379, http://etcd.internal:2379/"}, with(func(c *config) {
			c.cluster.etcd = []string{"http://127.0.0.1:2379", "http://etcd.internal:2379"}
		})},
		{[]string{"--cluster-listen", "0.0.0.0:7000", "--cluster-advertise", "m1.internal:7000"}, with(func(c *config) {
			c.cluster.listen, c.cluster.advertise = "0.0.0.0:7000", "m1.internal:7000"
		})},
		{[]string{"--cluster-name", "edge-eu.1", "--cluster-lease", "10s", "--cluster-vshards", "4096", "--on-cluster-error", "open"}, with(func(c *config) {
			c.cluster.name, c.cluster.lease, c.cluster.vshards, c.cluster.onError = "edge-eu.1", 10*time.Second, 4096, actors.FailOpen
		})},
		{[]string{"--cluster-timeout", "5s", "--cluster-forward-timeout", "2s"}, with(func(c *config) {
			c.cluster.timeout, c.cluster.forward = 5*time.Second, 2*time.Second
		})},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		got, err := parseFlags(tt.args, &stderr)
		if err != nil {
			t.Errorf("parseFlags(%q): got error %v, want none; stderr:\n%s", tt.args, err, &stderr)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseFlags(%q):\ngot  %+v\nwant %+v", tt.args, got, tt.want)
		}
		if stderr.Len() != 0 {
			t.Errorf("parseFlags(%q): got stderr %q, want nothing", tt.args, &stderr)
		}
	}
}

func TestParseFlagsInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		name string // what the message must name
	}{
		{[]string{"--deny-status", "500"}, "-deny-status"},
		{[]string{"--deny-status", "429x"}, "-deny-status"},
		{[]string{"--listen", "garbage"}, "-listen"},
		{[]string{"--listen", "127.0.0.1"}, "-listen"},
		{[]string{"--listen", "127.0.0.1:"}, "-listen"},
		{[]string{"--listen", "127.0.0.1:65536"}, "-listen"},
		{[]string{"--listen", "127.0.0.1:-1"}, "-listen"},
		{[]string{"--listen", "127.0.0.1:no-such-service-xyz"}, "-listen"},
		{[]string{"--listen", "a b:80"}, "-listen"},
		{[]string{"--sweep-interval", "0"}, "-sweep-interval"},
		{[]string{"--sweep-interval", "-1s"}, "-sweep-interval"},
		{[]string{"--sweep-interval", "10"}, "-sweep-interval"},
		{[]string{"--bucket-ttl", "-1ms"}, "-bucket-ttl"},
		{[]string{"--shards", "-1"}, "-shards"},
		{[]string{"--shards", "many"}, "-shards"},
		{[]string{"--shards", "1000000"}, "-shards"},
		{[]string{"--log-format", "xml"}, "-log-format"},
		{[]string{"--log-level", "trace"}, "-log-level"},
		{[]string{"--shutdown-timeout", "0s"}, "-shutdown-timeout"},
		{[]string{"--shutdown-timeout"}, "-shutdown-timeout"},
		{[]string{"--nope"}, "-nope"},
		{[]string{"--version=maybe"}, "-version"},
		{[]string{"serve"}, `"serve"`},
		{[]string{"--journal-sync", "sometimes"}, "-journal-sync"},
		{[]string{"--journal-sync-interval", "0s"}, "-journal-sync-interval"},
		{[]string{"--on-journal-error", "ignore"}, "-on-journal-error"},
		{[]string{"--journal-segment-size", "8MB"}, "-journal-segment-size"},
		{[]string{"--journal-segment-size", "0"}, "-journal-segment-size"},
		{[]string{"--snapshot-threshold", "-5"}, "-snapshot-threshold"},
		{[]string{"--snapshot-threshold", "1.5MiB"}, "-snapshot-threshold"},
		{[]string{"--max-buckets", "0"}, "-max-buckets"},
		{[]string{"--max-buckets", "lots"}, "-max-buckets"},
		{[]string{"--on-full", "panic"}, "-on-full"},
		{[]string{"--max-conns", "0"}, "-max-conns"},
		{[]string{"--max-conns", "-3"}, "-max-conns"},
		{[]string{"--max-conns", "many"}, "-max-conns"},
		{[]string{"--top-keys-sample", "0"}, "-top-keys-sample"},
		{[]string{"--top-keys-sample", "24"}, "-top-keys-sample"},
		{[]string{"--top-keys-sample", "2048"}, "-top-keys-sample"},
		{[]string{"--top-keys-sample", "some"}, "-top-keys-sample"},
		{[]string{"--admin-listen", "8081"}, "-admin-listen"},
		{[]string{"--admin-auth-failures", "-1"}, "-admin-auth-failures"},
		{[]string{"--admin-auth-failures", "many"}, "-admin-auth-failures"},
		{[]string{"proxy"}, "--upstream"},
		{[]string{"--upstream", "ftp://x"}, "-upstream"},
		{[]string{"--client-limit", "100"}, "-client-limit"},
		{[]string{"--client-limit", "0/1s"}, "-client-limit"},
		{[]string{"--host-limit", "5/1s/nope"}, "-host-limit"},
		{[]string{"--trusted-proxies", "10.0.0.0/33"}, "-trusted-proxies"},
		{[]string{"--ipv6-prefix", "129"}, "-ipv6-prefix"},
		{[]string{"--client-ip-header", "Cookie"}, "-client-ip-header"},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		_, err := parseFlags(tt.args, &stderr)
		if err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("parseFlags(%q): got error %v, want a usage error", tt.args, err)
			continue
		}
		if msg := stderr.String(); !strings.Contains(msg, tt.name) || !strings.Contains(msg, "Usage:") {
			t.Errorf("parseFlags(%q): got stderr\n%s\nwant it to name %s and show the usage", tt.args, msg, tt.name)
		}
	}
}

func TestRunUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args       []string
		wantCode   int
		wantStdout string // prefix
		wantStderr string // substring
	}{
		{[]string{"--deny-status", "500"}, exitUsage, "", "invalid value \"500\" for flag -deny-status: must be 413 or 429"},
		{[]string{"--unknown"}, exitUsage, "", "flag provided but not defined: -unknown"},
		{[]string{"-h"}, exitOK, "", "Usage: ratelimitd"},
		{[]string{"--help"}, exitOK, "", "-shutdown-timeout duration"},
		{[]string{"--version"}, exitOK, "ratelimitd ", ""},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tt.args, &stdout, &stderr)
		if code != tt.wantCode {
			t.Errorf("run(%q): got exit code %d, want %d; stderr:\n%s", tt.args, code, tt.wantCode, &stderr)
		}
		if !strings.HasPrefix(stdout.String(), tt.wantStdout) || tt.wantStdout == "" && stdout.Len() != 0 {
			t.Errorf("run(%q): got stdout %q, want %q…", tt.args, &stdout, tt.wantStdout)
		}
		if !strings.Contains(stderr.String(), tt.wantStderr) || tt.wantStderr == "" && stderr.Len() != 0 {
			t.Errorf("run(%q): got stderr\n%s\nwant it to hold %q", tt.args, &stderr, tt.wantStderr)
		}
		if strings.Contains(stderr.String(), "listening") {
			t.Errorf("run(%q): started listening", tt.args)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRunServesUntilCanceled runs the daemon in process: it serves on a free
// port, and canceling its context shuts it down with exit code 0.
func TestRunServesUntilCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--log-format", "json", "--shutdown-timeout", "5s", "--data-dir", t.TempDir()}, &stdout, &stderr)
	}()

	// Wait (bounded) for the listening line.
	var addr string
	deadline := time.Now().Add(startTimeoutInProcess)
	for addr == "" {
		for _, line := range strings.Split(stderr.String(), "\n") {
			if rec, err := parseLogLine(line); err == nil && rec["msg"] == "listening" {
				addr = rec["addr"]
			}
		}
		select {
		case code := <-done:
			t.Fatalf("run exited early with code %d; stderr:\n%s", code, stderr.String())
		default:
		}
		if addr == "" {
			if time.Now().After(deadline) {
				t.Fatalf("no listening line within %v; stderr:\n%s", startTimeoutInProcess, stderr.String())
			}
			<-time.After(5 * time.Millisecond) // poll interval
		}
	}

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz: got %d, want 200", resp.StatusCode)
	}

	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("run after cancel: got exit code %d, want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("run did not return within 10s of cancel; stderr:\n%s", stderr.String())
	}
	if stdout.String() != "" {
		t.Errorf("stdout: got %q, want nothing", stdout.String())
	}
}

const startTimeoutInProcess = 10 * time.Second

// TestRunCanceledBeforeStart: a signal that arrives while the daemon starts
// stops it cleanly (exit 0), whichever step it interrupts.
func TestRunCanceledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	dir := t.TempDir()
	go func() { done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--data-dir", dir}, &stdout, &stderr) }()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("run with a canceled context: got exit code %d, want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(startTimeoutInProcess):
		t.Fatalf("run with a canceled context did not return within %v; stderr:\n%s", startTimeoutInProcess, stderr.String())
	}
}

func TestStableScale(t *testing.T) {
	t.Parallel()
	hour := int64(time.Hour / time.Millisecond)
	windowEnd := func(ms int64) int64 { return ms - ms%hour + hour } // of ms's one-hour window
	var times []int64
	for _, base := range []int64{time.Now().UnixMilli(), 1_780_000_000_000, 4_102_444_800_000 /* 2100 */} {
		end := windowEnd(base)
		times = append(times, base, end-hour, end-60_001, end-60_000, end-30_000, end-1)
	}
	for _, nowMs := range times {
		s := stableScaleMs(time.UnixMilli(nowMs))
		if s < hour || nowMs%s >= s-60_000 {
			t.Errorf("stableScaleMs(%d) = %d: want ≥ %d with now more than a minute before the window's end (now %% s = %d)", nowMs, s, hour, nowMs%s)
		}
	}
}
