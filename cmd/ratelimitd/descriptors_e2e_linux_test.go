package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// openFilesLimit reads the soft and hard "Max open files" of process pid
// from /proc/<pid>/limits.
func openFilesLimit(t *testing.T, pid int) (soft, hard string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "limits"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				return f[0], f[1]
			}
		}
	}
	t.Fatalf("/proc/%d/limits has no Max open files line:\n%s", pid, b)
	return "", ""
}

// TestE2EDescriptorLimit: started with a soft descriptor limit of 1024 under
// a hard one of 4096, the daemon raises the soft limit to 4096 (read back
// from /proc/<pid>/limits), logs both, and sizes --max-conns from it: 4096
// less the reserve of 2 shards × (32MiB/8MiB + 7) + 64 = 86, shared by the
// public and the admin listener: 2005 each.
func TestE2EDescriptorLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	writeFile(t, token, adminToken+"\n")
	shell := []string{"/bin/sh", "-c", `ulimit -Sn 1024 && ulimit -Hn 4096 && exec "$0" "$@"`}
	d := startDaemonVia(t, shell, "--shards", "2", "--admin-token-file", token, "--admin-listen", "127.0.0.1:0")

	if soft, hard := openFilesLimit(t, d.cmd.Process.Pid); soft != "4096" || hard != "4096" {
		t.Errorf("/proc/%d/limits: got soft %s, hard %s; want 4096 and 4096", d.cmd.Process.Pid, soft, hard)
	}
	line, err := d.logs.waitLine(startTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == "descriptor limit" })
	if err != nil || line["soft"] != "4096" || line["hard"] != "4096" {
		t.Errorf("descriptor limit line: got %v (%v), want soft 4096 and hard 4096", line, err)
	}
	line, err = d.logs.waitLine(startTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == "connection caps" })
	want := map[string]string{"max_conns": "2005", "listeners": "2", "descriptor_limit": "4096", "reserve": "86", "shards": "2", "per_shard": "11", "from_flag": "false"}
	for k, v := range want {
		if err != nil || line[k] != v {
			t.Errorf("connection caps line: got %s=%q (%v), want %q; line %v", k, line[k], err, v, line)
		}
	}
	for _, l := range []string{"public", "admin"} {
		series := `ratelimitd_connections_max{listener="` + l + `"}`
		if v, _ := d.metric(t, series); v != 2005 {
			t.Errorf("%s: got %v, want 2005", series, v)
		}
	}
}

// TestE2EDescriptorLimitTooLow: a limit that leaves fewer than 16
// connections per listener after the reserve refuses the start, saying why.
func TestE2EDescriptorLimitTooLow(t *testing.T) {
	t.Parallel()
	code, _, stderr := runDaemonOnceVia(t, []string{"/bin/sh", "-c", `ulimit -n 96 && exec "$0" "$@"`}, "--listen", "127.0.0.1:0", "--shards", "2", "--data-dir", t.TempDir())
	if code != exitFailure {
		t.Errorf("exit code: got %d, want %d", code, exitFailure)
	}
	if !strings.Contains(stderr, "cannot size the connection caps") || !strings.Contains(stderr, "descriptor limit too low: 96 descriptors leave 10 connections per HTTP listener") {
		t.Errorf("stderr does not say why:\n%s", stderr)
	}
}
