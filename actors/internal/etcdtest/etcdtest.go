// Package etcdtest runs a real etcd server (Debian's etcd-server, which
// .ci/run installs) for one test, on free loopback ports, in the test's
// temporary directory; a test on a machine without the etcd binary is
// skipped, saying so. StartTLS serves its clients over TLS, requiring
// client certificates. Package actorstest hands it to the tests outside
// package actors.
package etcdtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/internal/certtest"
)

// Etcd is one etcd server of a test.
type Etcd struct {
	// URL is its client URL, http://127.0.0.1:PORT (https:// with TLS).
	URL string

	t       testing.TB
	tlsArgs []string // the flags of TLS, if it serves TLS
	dir     string
	peer    string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited (and been waited for)
	running bool
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start starts an etcd for t, killed when t ends; without the etcd binary
// it skips t.
func Start(t testing.TB) *Etcd {
	t.Helper()
	return start(t, nil)
}

// StartTLS is Start of an etcd that serves its clients over TLS with a
// certificate of ca for 127.0.0.1, and requires of them a client
// certificate that ca signed (--client-cert-auth); its peers stay plain.
func StartTLS(t testing.TB, ca *certtest.CA) *Etcd {
	t.Helper()
	return start(t, ca)
}

func start(t testing.TB, ca *certtest.CA) *Etcd {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip("etcd is not installed (apt-get install etcd-server): the cluster tests need a real etcd")
	}
	e := &Etcd{t: t, dir: t.TempDir()}
	scheme := "http"
	if ca != nil {
		scheme = "https"
		p := ca.Issue(t, "etcd", "127.0.0.1")
		files := map[string][]byte{"etcd.crt": p.CertPEM, "etcd.key": p.KeyPEM, "ca.crt": ca.PEM}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(e.dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		e.tlsArgs = []string{"--cert-file", filepath.Join(e.dir, "etcd.crt"), "--key-file", filepath.Join(e.dir, "etcd.key"),
			"--trusted-ca-file", filepath.Join(e.dir, "ca.crt"), "--client-cert-auth"}
	}
	t.Cleanup(e.Kill)
	// A port free a moment ago may be taken by another process before
	// etcd binds it (tests run in parallel): then try other ports.
	for try := 1; ; try++ {
		e.URL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, freePort(t))
		e.peer = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
		log, ok := e.launch()
		if ok {
			return e
		}
		if try == 5 || !strings.Contains(log, "address already in use") {
			t.Fatalf("etcd did not serve on %s:\n%s", e.URL, log)
		}
		if err := os.RemoveAll(filepath.Join(e.dir, "data")); err != nil { // made for the ports it could not bind
			t.Fatal(err)
		}
	}
}

// Restart starts the server again (on its data and ports) after Kill, and
// waits until it accepts connections.
func (e *Etcd) Restart() {
	e.t.Helper()
	if e.running {
		return
	}
	if log, ok := e.launch(); !ok {
		e.t.Fatalf("etcd did not serve again on %s:\n%s", e.URL, log)
	}
}

// launch starts etcd on its data and ports and waits until it accepts
// connections (ok), or until it exits or 20s pass (not ok, with its log).
func (e *Etcd) launch() (log string, ok bool) {
	e.t.Helper()
	e.cmd = exec.Command("etcd", "--data-dir", filepath.Join(e.dir, "data"),
		"--listen-client-urls", e.URL, "--advertise-client-urls", e.URL,
		"--listen-peer-urls", e.peer, "--initial-advertise-peer-urls", e.peer,
		"--initial-cluster", "default="+e.peer, "--log-level", "error")
	e.cmd.Args = append(e.cmd.Args, e.tlsArgs...)
	// The kernel kills etcd if the test process dies first.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logPath := filepath.Join(e.dir, "etcd.log")
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		e.t.Fatal(err)
	}
	defer out.Close()
	e.cmd.Stdout, e.cmd.Stderr = out, out
	if err := e.cmd.Start(); err != nil {
		e.t.Fatalf("start etcd: %v", err)
	}
	e.running = true
	e.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(e.cmd, e.exited)
	_, host, _ := strings.Cut(e.URL, "://")
	for deadline := time.Now().Add(20 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", host, 100*time.Millisecond); err == nil {
			c.Close()
			return "", true
		}
		select {
		case <-e.exited:
			e.running = false
			b, _ := os.ReadFile(logPath)
			return "it exited:\n" + string(b), false
		default:
		}
		if time.Now().After(deadline) {
			e.Kill()
			b, _ := os.ReadFile(logPath)
			return "it did not listen within 20s:\n" + string(b), false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill kills the server (SIGKILL) and waits for it; its data stay.
func (e *Etcd) Kill() {
	if !e.running {
		return
	}
	_ = e.cmd.Process.Kill()
	<-e.exited
	e.running = false
}
