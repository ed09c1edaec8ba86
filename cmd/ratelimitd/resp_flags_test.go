package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
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
		{[]string{"--redis-auth-failures", "3"}, with(func(r *respConfig) { r.authFailures = 3 })},
		{[]string{"--redis-auth-failures", "0"}, with(func(r *respConfig) { r.authFailures = -1 })},
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
		{[]string{"--redis-auth-failures", "-1"}, "-redis-auth-failures"},
		{[]string{"--redis-auth-failures", "many"}, "-redis-auth-failures"},
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
// one password per line without the white space around it; a file group
// or others may access, or one that holds no password, is refused naming
// the file.
func TestReadRedisPassword(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, content string
		mode          os.FileMode
		want          []string // the passwords
		says          string   // what the error says
	}{
		{"0600", "s3cret\n", 0o600, []string{"s3cret"}, ""},
		{"0400, spaces inside", "  two words  \n", 0o400, []string{"two words"}, ""},
		{"two lines, an empty one", "old\n\n  new \r\n", 0o600, []string{"old", "new"}, ""},
		{"0640", "s3cret\n", 0o640, nil, "is accessible by group or others (mode 0640)"},
		{"0604", "s3cret\n", 0o604, nil, "chmod 600"},
		{"empty", "", 0o600, nil, "holds no password"},
		{"white space", " \n\t\n", 0o600, nil, "holds no password"},
	}
	log := slog.New(slog.DiscardHandler)
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
		err := readRedisPassword(&cfg, time.Now, log)
		switch {
		case tt.says == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.says == "" && !slices.Equal(secretsOf(cfg.redis.passwords)(), tt.want):
			t.Errorf("%s: got %q, want %q", tt.name, secretsOf(cfg.redis.passwords)(), tt.want)
		case tt.says != "" && (err == nil || !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), path) || !strings.HasPrefix(err.Error(), "redis password: ")):
			t.Errorf("%s: got %v; want an error naming %s and saying %q", tt.name, err, path, tt.says)
		}
	}
	cfg := defaults
	cfg.redis.passwordFile = filepath.Join(t.TempDir(), "missing")
	if err := readRedisPassword(&cfg, time.Now, log); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing file: got %v, want the open error", err)
	}
	if cfg := defaults; readRedisPassword(&cfg, time.Now, log) != nil || cfg.redis.passwords != nil {
		t.Errorf("without --redis-password-file: want no passwords")
	}
}

// TestRedisPasswordRotates: a changed password file is read again once
// the clock has passed the check interval; a content the start would
// refuse (no password, a mode group may read) keeps the last good
// passwords and is logged, and a good one after it is taken.
func TestRedisPasswordRotates(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "redis-password")
	mod := time.Now().Add(-time.Hour)
	write := func(content string, mode os.FileMode) {
		t.Helper()
		mod = mod.Add(time.Second) // a new stamp, whatever the file system's time resolution
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	write("old\n", 0o600)
	clock := clocktest.New(actorstest.ClockStart())
	logs := &lockedBuffer{}
	cfg := defaults
	cfg.redis.passwordFile = path
	if err := readRedisPassword(&cfg, clock.Now, slog.New(slog.NewTextHandler(logs, nil))); err != nil {
		t.Fatal(err)
	}
	pws := secretsOf(cfg.redis.passwords)
	reloads := map[bool]int{}
	cfg.redis.passwords.count(func(ok bool) { reloads[ok]++ })
	steps := []struct {
		content string
		mode    os.FileMode
		advance time.Duration
		want    []string
	}{
		{"old\nnew\n", 0o600, fileCheckInterval - time.Millisecond, []string{"old"}}, // not looked at yet
		{"old\nnew\n", 0o600, time.Millisecond, []string{"old", "new"}},
		{"\n", 0o600, fileCheckInterval, []string{"old", "new"}},  // no password: kept
		{"new\n", 0o644, fileLogInterval, []string{"old", "new"}}, // readable by others: kept (and logged: a minute on)
		{"new\n", 0o600, fileCheckInterval, []string{"new"}},
	}
	for i, st := range steps {
		write(st.content, st.mode)
		clock.Advance(st.advance)
		if got := pws(); !slices.Equal(got, st.want) {
			t.Errorf("step %d (%q, mode %04o): got %q, want %q", i, st.content, st.mode, got, st.want)
		}
	}
	if reloads[true] != 2 || reloads[false] != 2 {
		t.Errorf("reloads counted: got %d ok and %d refused, want 2 and 2", reloads[true], reloads[false])
	}
	out := logs.String()
	if n := strings.Count(out, `msg="redis password file reloaded" file=`+path+" count="); n != 2 {
		t.Errorf("reload log lines: got %d, want 2:\n%s", n, out)
	}
	for _, says := range []string{"holds no password", "is accessible by group or others (mode 0644)"} {
		if !strings.Contains(out, `msg="redis password file reload failed; keeping the last good ones"`) || !strings.Contains(out, says) {
			t.Errorf("the failed reload saying %q is not logged:\n%s", says, out)
		}
	}
	if strings.Contains(out, "new\n") || strings.Contains(out, "=old") || strings.Contains(out, "=new") {
		t.Errorf("a password is in the log:\n%s", out)
	}
}
