package main

// End-to-end tests of the Redis protocol listener: the built daemon,
// redis-cli (Debian's redis-tools, which .ci/run installs) and go-redis.

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// needRedisCLI returns the path of redis-cli. Without it the test is
// skipped, but in CI, which installs it, it fails.
func needRedisCLI(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("redis-cli")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-cli is not installed; .ci/run installs redis-tools")
		}
		t.Skip("redis-cli is not installed (apt-get install redis-tools): skipping the redis-cli end-to-end test")
	}
	return path
}

// redisAddr returns the address of the daemon's Redis protocol listener,
// from its "redis listening" line.
func (d *daemon) redisAddr(t *testing.T) string {
	t.Helper()
	line, err := d.logs.waitLine(startTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == "redis listening" })
	if err != nil {
		t.Fatalf("no redis listening line: %v; stderr:\n%s", err, d.logs)
	}
	return line["addr"]
}

// redisCLI runs redis-cli against addr with args, feeding it stdin (one
// command a line, when no command is in args), and returns its output.
func redisCLI(t *testing.T, addr, stdin string, args ...string) string {
	t.Helper()
	cli := needRedisCLI(t)
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, append([]string{"-h", host, "-p", port}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("redis-cli %q: %v; stderr %q, stdout %q", args, err, &stderr, &out)
	}
	return out.String()
}

// lines makes redis-cli's output of integer replies, one a line.
func lines(ns ...int64) string {
	var b strings.Builder
	for _, n := range ns {
		b.WriteString(strconv.FormatInt(n, 10) + "\n")
	}
	return b.String()
}

// cliInts parses redis-cli's output of integer replies, one a line.
func cliInts(t *testing.T, out string) []int64 {
	t.Helper()
	var ns []int64
	for f := range strings.FieldsSeq(out) {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("redis-cli output %q: %q is not an integer", out, f)
		}
		ns = append(ns, n)
	}
	return ns
}

// TestE2ERedisCLI: through redis-cli, the daemon answers PING,
// CL.THROTTLE with redis-cell's replies (5 allowed from a bucket of
// max_burst 4, then limited), its errors, MULTI/EXEC and DISCARD, RL.CHECK and RL.RULE with
// check_rate's semantics, and INFO; /metrics counts the commands.
func TestE2ERedisCLI(t *testing.T) {
	t.Parallel()
	needRedisCLI(t)
	rulesFile := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, rulesFile, "rules:\n  - name: login\n    algorithm: token_bucket\n    scale: 1h\n    limit: 2\n")
	d := startDaemon(t, "--redis-listen", "127.0.0.1:0", "--rules", rulesFile)
	addr := d.redisAddr(t)
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
		t.Errorf("redis listening on %s, want 127.0.0.1", addr)
	}

	if got := redisCLI(t, addr, "", "PING"); got != "PONG\n" {
		t.Errorf("PING: got %q, want PONG", got)
	}
	// One redis-cli for the six, so that they run within a second.
	got := redisCLI(t, addr, strings.Repeat("CL.THROTTLE user123 4 1 60\n", 6))
	want := lines(0, 5, 4, -1, 60) + lines(0, 5, 3, -1, 120) + lines(0, 5, 2, -1, 180) +
		lines(0, 5, 1, -1, 240) + lines(0, 5, 0, -1, 300) + lines(1, 5, 0, 60, 300)
	if got != want {
		t.Errorf("CL.THROTTLE user123 4 1 60, six times: got\n%s\nwant\n%s", got, want)
	}
	got = redisCLI(t, addr, "CL.THROTTLE user123 4 x 60\nCL.THROTTLE user123 -1 1 60\nFOO bar\n")
	want = "Cell error: Store error: Couldn't parse as integer: x\n\n" +
		"ERR max_burst: must be between 0 and 9223372036854775806\n\n" +
		"ERR unknown command 'FOO', with args beginning with: 'bar' \n\n"
	if got != want {
		t.Errorf("bad commands: got %q, want %q", got, want)
	}

	// A transaction, as redis-py's default pipeline sends one: queued, then
	// run in order by EXEC; a discarded one counts nothing.
	got = redisCLI(t, addr, "MULTI\n"+strings.Repeat("CL.THROTTLE txkey 1 1 60\n", 3)+"EXEC\n"+
		"MULTI\nCL.THROTTLE txkey2 1 1 60\nDISCARD\nCL.THROTTLE txkey2 1 1 60\n")
	want = "OK\nQUEUED\nQUEUED\nQUEUED\n" + lines(0, 2, 1, -1, 60) + lines(0, 2, 0, -1, 120) + lines(1, 2, 0, 60, 120) +
		"OK\nQUEUED\nOK\n" + lines(0, 2, 1, -1, 60)
	if got != want {
		t.Errorf("MULTI, CL.THROTTLE txkey 1 1 60 three times, EXEC; MULTI, DISCARD: got\n%s\nwant\n%s", got, want)
	}

	// A token bucket's first hit replies exactly; the rest depend on the
	// milliseconds between the commands.
	got = redisCLI(t, addr, strings.Repeat("RL.CHECK alice 1h 2 ALGORITHM token_bucket\n", 3))
	ns := cliInts(t, got)
	if len(ns) != 18 || !slices.Equal(ns[:6], []int64{1, 1, 2, 1, 1_800_000, 0}) ||
		!slices.Equal(ns[6:10], []int64{1, 2, 2, 0}) || !slices.Equal(ns[12:16], []int64{0, 2, 2, 0}) ||
		ns[16] < 3_500_000 || ns[16] > 3_600_000 || ns[17] < 1_700_000 || ns[17] > 1_800_000 {
		t.Errorf("RL.CHECK alice 1h 2 ALGORITHM token_bucket, three times: got %v; want allowed 1 then 2 of 2, then denied with reset_ms about 3600000 and retry_after_ms about 1800000", ns)
	}
	got = redisCLI(t, addr, "RL.RULE login bob\nRL.RULE nosuch bob\n")
	if want := lines(1, 1, 2, 1, 1_800_000, 0) + "ERR rule: is not a configured rule\n\n"; got != want {
		t.Errorf("RL.RULE: got %q, want %q", got, want)
	}
	if got := redisCLI(t, addr, "", "INFO", "server"); !strings.Contains(got, "redis_version:5.0.0\r\n") || !strings.Contains(got, "ratelimitd_version:") {
		t.Errorf("INFO server: got %q, want redis_version:5.0.0 and ratelimitd_version", got)
	}

	for name, want := range map[string]float64{
		`ratelimitd_redis_commands_total{command="cl.throttle",result="allowed"}`: 5 + 2 + 1, // the transactions': 2 and 1
		`ratelimitd_redis_commands_total{command="cl.throttle",result="denied"}`:  1 + 1,
		`ratelimitd_redis_commands_total{command="cl.throttle",result="invalid"}`: 2,
		`ratelimitd_redis_commands_total{command="cl.throttle",result="queued"}`:  3 + 1,
		`ratelimitd_redis_commands_total{command="multi",result="ok"}`:            2,
		`ratelimitd_redis_commands_total{command="exec",result="ok"}`:             1,
		`ratelimitd_redis_commands_total{command="discard",result="ok"}`:          1,
		`ratelimitd_redis_commands_total{command="rl.check",result="denied"}`:     1,
		`ratelimitd_redis_commands_total{command="rl.rule",result="allowed"}`:     1,
		`ratelimitd_redis_commands_total{command="unknown",result="invalid"}`:     1,
	} {
		if v, found := d.metric(t, name); !found || v != want {
			t.Errorf("%s: got %v (found %v), want %v", name, v, found, want)
		}
	}
}

// TestE2ERedisAuth: with --redis-password-file, every command but AUTH
// is answered NOAUTH until AUTH password (or AUTH default password); a
// wrong password is WRONGPASS. A rewritten password file is taken without
// a restart: a second line is a second password, and a dropped one is
// refused. A password file group or others may access, or an empty one,
// refuses the start before any journal is read.
func TestE2ERedisAuth(t *testing.T) {
	t.Parallel()
	needRedisCLI(t)
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "redis-password")
	if err := os.WriteFile(pwFile, []byte("open sesame\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "--redis-listen", "127.0.0.1:0", "--redis-password-file", pwFile)
	addr := d.redisAddr(t)
	if got, want := redisCLI(t, addr, "", "CL.THROTTLE", "k", "0", "1", "60"), "NOAUTH Authentication required.\n\n"; got != want {
		t.Errorf("without AUTH: got %q, want %q", got, want)
	}
	got := redisCLI(t, addr, "AUTH nope\nCL.THROTTLE k 0 1 60\nAUTH default \"open sesame\"\nCL.THROTTLE k 0 1 60\n")
	want := "WRONGPASS invalid username-password pair or user is disabled.\n\n" +
		"NOAUTH Authentication required.\n\n" +
		"OK\n" + lines(0, 1, 0, -1, 60)
	if got != want {
		t.Errorf("AUTH default: got %q, want %q", got, want)
	}
	if got, want := redisCLI(t, addr, "", "--no-auth-warning", "-a", "open sesame", "CL.THROTTLE", "k", "0", "1", "60"), lines(1, 1, 0, 60, 60); got != want {
		t.Errorf("redis-cli -a: got %q, want %q", got, want)
	}

	// A rotation through the file, without a restart: the old and the new
	// password, then the new one alone. The file is looked at again on an
	// AUTH, at most once a second: the polls AUTH with a password good
	// before and after (a failed AUTH would count toward the limit below).
	auth := func(pw string) string { return redisCLI(t, addr, "AUTH \""+pw+"\"\n") }
	reloaded := func(n string) bool {
		lines, _ := d.logs.lines()
		return slices.ContainsFunc(lines, func(l string) bool {
			rec, err := parseLogLine(l)
			return err == nil && rec["msg"] == "redis password file reloaded" && rec["count"] == n && rec["file"] == pwFile
		})
	}
	wrongPass := "WRONGPASS invalid username-password pair or user is disabled.\n\n"
	writeFile(t, pwFile, "open sesame\nnext one\n")
	waitFor(t, pollTimeout, "the reload to two passwords", func() bool { return auth("open sesame") == "OK\n" && reloaded("2") })
	if got := auth("next one"); got != "OK\n" {
		t.Errorf("the new password during the rotation: got %q, want OK", got)
	}
	writeFile(t, pwFile, "next one\n")
	waitFor(t, pollTimeout, "the reload to one password", func() bool { return auth("next one") == "OK\n" && reloaded("1") })
	if got := auth("open sesame"); got != wrongPass {
		t.Errorf("the dropped password: got %q, want WRONGPASS", got)
	}
	if got, want := redisCLI(t, addr, "", "--no-auth-warning", "-a", "next one", "CL.THROTTLE", "k2", "0", "1", "60"), lines(0, 1, 0, -1, 60); got != want {
		t.Errorf("redis-cli -a with the new password: got %q, want %q", got, want)
	}

	// Failed AUTHs from one address are limited: 2 so far, 8 more, then
	// even the right password is refused, unread.
	var fails strings.Builder
	for range 8 {
		fails.WriteString("AUTH wrong\n")
	}
	if got := redisCLI(t, addr, fails.String()); got != strings.Repeat(wrongPass, 8) {
		t.Errorf("8 more wrong passwords: got %q", got)
	}
	if got := auth("next one"); !strings.HasPrefix(got, "ERR too many failed AUTH attempts from this address; retry in ") {
		t.Errorf("the right password after 10 failures: got %q, want the limit's refusal", got)
	}
	if v, found := d.metric(t, `ratelimitd_redis_commands_total{command="auth",result="auth_limited"}`); !found || v != 1 {
		t.Errorf("auth_limited in /metrics: got %v (found %v), want 1", v, found)
	}
	if !strings.Contains(d.logs.String(), "AUTH refused for a while after too many failures from one address") {
		t.Errorf("the limit is not logged:\n%s", d.logs)
	}

	for name, tc := range map[string]struct {
		content string
		mode    os.FileMode
		says    string
	}{
		"0644":  {"open sesame\n", 0o644, "is accessible by group or others (mode 0644)"},
		"empty": {"\n", 0o600, "holds no password"},
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runDaemonOnce(t, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--redis-listen", "127.0.0.1:0", "--redis-password-file", path)
		if code != exitFailure || !strings.Contains(stderr, path) || !strings.Contains(stderr, tc.says) {
			t.Errorf("password file %s: exit %d, stderr:\n%s\nwant exit %d naming the file and saying %q", name, code, stderr, exitFailure, tc.says)
		}
		if strings.Contains(stderr, "listening") || strings.Contains(stderr, "rate limiter started") {
			t.Errorf("password file %s: the daemon went on starting before refusing it:\n%s", name, stderr)
		}
	}
}

// TestE2ERedisKillKeepsCounts: CL.THROTTLE and RL.CHECK counts survive
// SIGKILL and a restart on the same data directory, and so does a key's
// DEL.
func TestE2ERedisKillKeepsCounts(t *testing.T) {
	t.Parallel()
	needRedisCLI(t)
	dir := t.TempDir()
	flags := []string{"--data-dir", dir, "--redis-listen", "127.0.0.1:0"}
	d := startDaemon(t, flags...)
	addr := d.redisAddr(t)
	got := cliInts(t, redisCLI(t, addr, strings.Repeat("CL.THROTTLE k 4 1 3600\n", 3)+strings.Repeat("RL.CHECK bob 1h 10\n", 2)+
		"CL.THROTTLE gone 0 1 3600\nDEL gone nothere\n"))
	if len(got) != 33 || got[2] != 4 || got[7] != 3 || got[12] != 2 || got[16] != 1 || got[22] != 2 ||
		!slices.Equal(got[27:], []int64{0, 1, 0, -1, 3600, 1}) {
		t.Fatalf("before SIGKILL: got %v, want remaining 4, 3, 2, bob's counts 1, 2, gone's one hit and DEL's 1", got)
	}
	if v, found := d.metric(t, `ratelimitd_redis_commands_total{command="del",result="ok"}`); !found || v != 1 {
		t.Errorf("DEL counted %v (found %v), want 1", v, found)
	}
	d.kill()
	d = startDaemon(t, flags...)
	addr = d.redisAddr(t)
	got = cliInts(t, redisCLI(t, addr, "CL.THROTTLE k 4 1 3600\nRL.CHECK bob 1h 10 HITS 0\nCL.THROTTLE gone 0 1 3600\n"))
	if len(got) != 16 || !slices.Equal(got[:3], []int64{0, 5, 1}) || got[5] != 1 || got[6] != 2 || !slices.Equal(got[11:], []int64{0, 1, 0, -1, 3600}) {
		t.Fatalf("after SIGKILL and a restart: got %v, want k's fourth hit (remaining 1), bob's count 2 and a first hit of the deleted key gone", got)
	}
}

// TestE2ERedisGoRedis: go-redis v9 with its defaults (HELLO 3 and CLIENT
// SETINFO on connect) talks to the daemon without an error: a pipeline of
// 16 CL.THROTTLE is answered in order; on SIGTERM the daemon closes the
// idle connection and exits 0, logging the Redis server's stop before the
// actors'.
func TestE2ERedisGoRedis(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--redis-listen", "127.0.0.1:0", "--shutdown-timeout", "30s")
	c := redis.NewClient(&redis.Options{Addr: d.redisAddr(t), PoolSize: 2, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range 16 {
			p.Do(ctx, "CL.THROTTLE", "p", 9, 10, 1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		got, err := cmd.(*redis.Cmd).Int64Slice()
		if err != nil || len(got) != 5 {
			t.Fatalf("reply %d: got %v, %v", i, got, err)
		}
		// Ten tokens a second: the ten first are allowed, in order.
		if wantLimited := int64(0); i >= 10 {
			wantLimited = 1
			if got[0] != wantLimited || got[1] != 10 || got[2] != 0 {
				t.Errorf("reply %d: got %v, want limited with remaining 0", i, got)
			}
		} else if got[0] != wantLimited || got[1] != 10 || got[2] != int64(9-i) || got[3] != -1 {
			t.Errorf("reply %d: got %v, want allowed with remaining %d", i, got, 9-i)
		}
	}
	if v, err := c.Do(ctx, "RL.CHECK", "x", "1m", "3", "HITS", "2").Int64Slice(); err != nil || !slices.Equal(v[:4], []int64{1, 2, 3, 1}) {
		t.Errorf("RL.CHECK x 1m 3 HITS 2: got %v, %v, want allowed, count 2 of 3", v, err)
	}
	took := d.stop()
	if t.Failed() {
		return
	}
	if took > 5*time.Second {
		t.Errorf("exit after SIGTERM took %v; want well under --shutdown-timeout (an idle Redis connection must not hold it)", took)
	}
	lines, _ := d.logs.lines()
	i, want := 0, []string{"shutting down", "Redis protocol server stopped", "actor system stopped", "stopped"}
	for _, l := range lines {
		if rec, err := parseLogLine(l); err == nil && i < len(want) && rec["msg"] == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("shutdown log: missing %q (in order %q); stderr:\n%s", want[i], want, d.logs)
	}
	if err := c.Ping(ctx).Err(); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("PING after the exit: got %v, want a closed connection", err)
	}
}
