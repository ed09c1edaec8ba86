package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api/resp"
)

// TestParseRedisFlags: the Redis protocol flags set their config, a
// missing host becomes loopback, and bad values are refused naming the
// flag.
func TestParseRedisFlags(t *testing.T) {
	t.Parallel()
	with := func(f func(*respConfig)) config {
		c := defaults
		f(&c.redis)
		return c
	}
	good := []struct {
		args []string
		want config
	}{
		{[]string{"--redis-listen", "127.0.0.1:6380"}, with(func(r *respConfig) { r.listen = "127.0.0.1:6380" })},
		{[]string{"--redis-listen", ":6380"}, with(func(r *respConfig) { r.listen = "127.0.0.1:6380" })},
		{[]string{"--redis-listen", "6380"}, with(func(r *respConfig) { r.listen = "127.0.0.1:6380" })},
		{[]string{"--redis-listen", "0.0.0.0:6380"}, with(func(r *respConfig) { r.listen = "0.0.0.0:6380" })},
		{[]string{"--redis-listen", "[::1]:0"}, with(func(r *respConfig) { r.listen = "[::1]:0" })},
		{[]string{"--redis-listen", ""}, defaults},
		{[]string{"--redis-max-conns", "50"}, with(func(r *respConfig) { r.maxConns = 50 })},
		{[]string{"--redis-password-file", "/run/secrets/redis"}, with(func(r *respConfig) { r.passwordFile = "/run/secrets/redis" })},
		{[]string{"--redis-idle-timeout", "30s"}, with(func(r *respConfig) { r.idleTimeout = 30 * time.Second })},
		{[]string{"--redis-idle-timeout", "0"}, with(func(r *respConfig) { r.idleTimeout = -1 })},
	}
	for _, tt := range good {
		var stderr bytes.Buffer
		got, err := parseFlags(tt.args, &stderr)
		if err != nil || !reflect.DeepEqual(got, tt.want) || stderr.Len() != 0 {
			t.Errorf("parseFlags(%q): got %+v, %v, stderr %q; want %+v", tt.args, got.redis, err, &stderr, tt.want.redis)
		}
	}
	bad := []struct {
		args []string
		name string
	}{
		{[]string{"--redis-listen", "127.0.0.1:"}, "-redis-listen"},
		{[]string{"--redis-listen", "localhost:65536"}, "-redis-listen"},
		{[]string{"--redis-listen", "a b:6380"}, "-redis-listen"},
		{[]string{"--redis-max-conns", "0"}, "-redis-max-conns"},
		{[]string{"--redis-max-conns", "many"}, "-redis-max-conns"},
		{[]string{"--redis-idle-timeout", "-1s"}, "-redis-idle-timeout"},
		{[]string{"--redis-idle-timeout", "5"}, "-redis-idle-timeout"},
	}
	for _, tt := range bad {
		var stderr bytes.Buffer
		if _, err := parseFlags(tt.args, &stderr); err == nil || !strings.Contains(stderr.String(), tt.name) {
			t.Errorf("parseFlags(%q): got %v, stderr\n%s\nwant a usage error naming %s", tt.args, err, &stderr, tt.name)
		}
	}
}

// TestRedisConnCaps: the Redis protocol listener takes its share of the
// descriptors (a connection costs one), and its default cap is that share
// or resp's default, whichever is smaller; --redis-max-conns overrides it.
func TestRedisConnCaps(t *testing.T) {
	t.Parallel()
	cfg := defaults
	cfg.adminTokenFile = "t"
	cfg.redis.listen = "127.0.0.1:6380"
	if got, want := listenerCosts(&cfg), []int{1, 1, 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("listener costs: got %v, want %v", got, want)
	}
	b, err := connCaps(&cfg, 8, 20000)
	if err != nil || b.maxConns != (20000-152)/3 {
		t.Fatalf("caps with the Redis listener: got %+v, %v; want %d each", b, err, (20000-152)/3)
	}
	if got := redisMaxConns(&cfg, b.maxConns); got != (20000-152)/3 {
		t.Errorf("Redis cap at 20000 descriptors: got %d, want the share %d", got, (20000-152)/3)
	}
	b, _ = connCaps(&cfg, 8, 1<<20)
	if got := redisMaxConns(&cfg, b.maxConns); got != resp.DefaultMaxConns {
		t.Errorf("Redis cap at 2^20 descriptors: got %d, want resp's default %d", got, resp.DefaultMaxConns)
	}
	cfg.redis.maxConns = 50000
	if got := redisMaxConns(&cfg, b.maxConns); got != 50000 {
		t.Errorf("Redis cap with --redis-max-conns 50000: got %d", got)
	}
}

// TestReadRedisPassword: the password file is read like the admin token's,
// without its surrounding white space; a file group or others may access,
// or one that holds no password, is refused naming the file.
func TestReadRedisPassword(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, content string
		mode          os.FileMode
		want          string // the password, or what the error says
		ok            bool
	}{
		{"0600", "s3cret\n", 0o600, "s3cret", true},
		{"0400, spaces inside", "  two words  \n", 0o400, "two words", true},
		{"0640", "s3cret\n", 0o640, "is accessible by group or others (mode 0640)", false},
		{"0604", "s3cret\n", 0o604, "chmod 600", false},
		{"empty", "", 0o600, "holds no password", false},
		{"white space", " \n\t\n", 0o600, "holds no password", false},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "redis-password")
		if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tt.mode); err != nil {
			t.Fatal(err)
		}
		cfg := defaults
		cfg.redis.passwordFile = path
		err := readRedisPassword(&cfg)
		switch {
		case tt.ok && (err != nil || cfg.redis.password != tt.want):
			t.Errorf("%s: got %q, %v; want %q", tt.name, cfg.redis.password, err, tt.want)
		case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) || !strings.HasPrefix(err.Error(), "redis password: ")):
			t.Errorf("%s: got %v; want an error naming %s and saying %q", tt.name, err, path, tt.want)
		}
	}
	cfg := defaults
	cfg.redis.passwordFile = filepath.Join(t.TempDir(), "missing")
	if err := readRedisPassword(&cfg); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing file: got %v, want the open error", err)
	}
}
