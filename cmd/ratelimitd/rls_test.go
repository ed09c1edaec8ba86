package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/api/metrics"
)

// TestConnCapsGRPC: the gRPC listener takes its share of the descriptors,
// one per connection, like every other listener.
func TestConnCapsGRPC(t *testing.T) {
	t.Parallel()
	grpc := defaults
	grpc.rls.grpcListen = "127.0.0.1:8082"
	all := grpc
	all.adminTokenFile, all.proxy.upstream = "t", "http://u"
	for _, tt := range []struct {
		name string
		cfg  config
		want int
	}{
		{"public and gRPC", grpc, (20000 - 152) / 2},
		{"proxy, admin and gRPC", all, (20000 - 152 - 256) / 4},
	} {
		b, err := connCaps(&tt.cfg, 8, 20000)
		if err != nil || b.maxConns != tt.want {
			t.Errorf("%s: got %+v, %v; want max_conns %d", tt.name, b, err, tt.want)
		}
	}
	if n := len(listenerCosts(&grpc)); n != 2 {
		t.Errorf("listeners with --grpc-listen: got %d, want 2", n)
	}
}

// TestRLSFlags: the Rate Limit Service's flags set its config; the
// service is on with a gRPC listener or a config; a bad address is
// refused naming the flag.
func TestRLSFlags(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags([]string{"--grpc-listen", "127.0.0.1:8082", "--rls-config", "/etc/rls", "--rls-shadow", "--rls-response-headers", "--rls-count-over-limit"}, io.Discard)
	want := rlsConfig{grpcListen: "127.0.0.1:8082", configPath: "/etc/rls", shadow: true, responseHeaders: true, countOverLimit: true}
	if err != nil || cfg.rls != want || !cfg.rls.on() {
		t.Errorf("got %+v, %v; want %+v, on", cfg.rls, err, want)
	}
	for _, args := range [][]string{{"--rls-config", "x.yaml"}, {"--grpc-listen", ":0"}} {
		if cfg, err := parseFlags(args, io.Discard); err != nil || !cfg.rls.on() {
			t.Errorf("%v: got %+v, %v; want the service on", args, cfg.rls, err)
		}
	}
	if cfg, err := parseFlags(nil, io.Discard); err != nil || cfg.rls.on() {
		t.Errorf("no flags: got %+v, %v; want the service off", cfg.rls, err)
	}
	var out strings.Builder
	if _, err := parseFlags([]string{"--grpc-listen", "8082"}, &out); err == nil || !strings.Contains(out.String(), "-grpc-listen: must be host:port") {
		t.Errorf("--grpc-listen 8082: got %v, output %q; want an error naming the flag", err, out.String())
	}
}

// TestRLSOffWarnsAboutModes: the modes without the service start nothing
// and say that they do nothing.
func TestRLSOffWarnsAboutModes(t *testing.T) {
	t.Parallel()
	cfg := defaults
	cfg.rls.shadow = true
	var logs strings.Builder
	r, err := startRLS(&cfg, slog.New(slog.NewTextHandler(&logs, nil)), metrics.New())
	if err != nil || r != nil {
		t.Fatalf("startRLS without --grpc-listen or --rls-config: got %v, %v; want nothing started", r, err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "do nothing without --grpc-listen or --rls-config") {
		t.Errorf("logs %q, want a warning that the modes do nothing", logs.String())
	}
	logs.Reset()
	if r, err := startRLS(&defaults, slog.New(slog.NewTextHandler(&logs, nil)), metrics.New()); err != nil || r != nil || logs.Len() != 0 {
		t.Errorf("no RLS flags: got %v, %v, logs %q; want nothing started or said", r, err, logs.String())
	}
}
