package etcdtest

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestLaunchReportsATakenPort: etcd told to listen on a port another
// process holds exits at once, and launch says so with its log (which
// start reads to try other ports), not after waiting 20s for it.
func TestLaunchReportsATakenPort(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip("etcd is not installed (apt-get install etcd-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	e := &Etcd{t: t, dir: t.TempDir()}
	e.URL = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	e.peer = "http://" + ln.Addr().String()
	t.Cleanup(e.Kill)
	start := time.Now()
	log, ok := e.launch()
	if ok || !strings.Contains(log, "address already in use") || e.running {
		t.Fatalf("launch on a taken peer port: ok %v, running %v, log:\n%s\nwant not ok, not running, the bind error in the log", ok, e.running, log)
	}
	if took := time.Since(start); took >= 20*time.Second {
		t.Fatalf("launch took %v to report it, want it at etcd's exit", took)
	}
}

// TestStartServes: Start gives a running etcd that accepts connections.
func TestStartServes(t *testing.T) {
	t.Parallel()
	e := Start(t)
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(e.URL, "http://"), time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", e.URL, err)
	}
	c.Close()
	e.Kill()
	e.Restart()
	c, err = net.DialTimeout("tcp", strings.TrimPrefix(e.URL, "http://"), time.Second)
	if err != nil {
		t.Fatalf("dial %s after Restart: %v", e.URL, err)
	}
	c.Close()
}
