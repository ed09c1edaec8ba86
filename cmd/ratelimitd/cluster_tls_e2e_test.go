package main

// End-to-end tests of cluster mode over TLS: members with the
// --cluster-tls-* and --cluster-etcd-* flags against an etcd that requires
// client certificates, what a process without a member certificate gets
// at their cluster port, certificate rotation, and the flags' refusals.

import (
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
)

// tlsDir writes the files of a member's flags into a directory of t:
// m.crt, m.key (a certificate of ca for 127.0.0.1) and ca.crt.
func tlsDir(t *testing.T, ca *actorstest.CA, name string) (dir string, p actorstest.CertPair) {
	t.Helper()
	dir = t.TempDir()
	p = ca.Issue(t, name, "127.0.0.1")
	writeFile(t, filepath.Join(dir, "m.crt"), string(p.CertPEM))
	writeFile(t, filepath.Join(dir, "m.key"), string(p.KeyPEM))
	writeFile(t, filepath.Join(dir, "ca.crt"), string(ca.PEM))
	return dir, p
}

// tlsFlags are the flags of a member whose files are in dir, for both the
// members and etcd.
func tlsFlags(dir string) []string {
	crt, key, ca := filepath.Join(dir, "m.crt"), filepath.Join(dir, "m.key"), filepath.Join(dir, "ca.crt")
	return []string{"--cluster-tls-cert", crt, "--cluster-tls-key", key, "--cluster-tls-ca", ca,
		"--cluster-etcd-cert", crt, "--cluster-etcd-key", key, "--cluster-etcd-ca", ca}
}

// clusterAddr is the member's address for the other members, from its
// "cluster joined" line.
func clusterAddr(t *testing.T, m *clusterMember) string {
	t.Helper()
	line, err := m.logs.waitLine(startTimeout, m.exited, func(rec logRecord) bool { return rec["msg"] == "cluster joined" })
	if err != nil {
		t.Fatalf("%s: no cluster joined line: %v\n%s", m.label, err, m.logs)
	}
	return line["addr"]
}

// handshake dials addr over TLS with cfg and reads the first bytes: a
// member that accepts the client speaks HTTP/2 at once (its SETTINGS);
// one that refuses sends an alert. It returns the member's certificate
// (nil if the handshake failed) and the error of the handshake or read.
func handshake(t *testing.T, addr string, cfg *tls.Config) (*x509.Certificate, error) {
	t.Helper()
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 9)); err != nil {
		return leaf, err
	}
	return leaf, nil
}

// TestE2EClusterTLS: two members speaking mutual TLS with each other and
// with etcd: a check forwarded from one to the other is exact; a client
// without a member certificate, or with one of another CA, is refused at
// the cluster port; a member's certificate and key replaced (half written
// first) are served to the connections after the next look at the files,
// and a CA file that gains a CA admits its certificates.
func TestE2EClusterTLS(t *testing.T) {
	ca := actorstest.NewCA(t, "cluster")
	etcd := actorstest.StartEtcdTLS(t, ca)
	dirs := make([]string, 2)
	pairs := make([]actorstest.CertPair, 2)
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	ms := make([]*clusterMember, 2)
	for i := range ms {
		dirs[i], pairs[i] = tlsDir(t, ca, "m"+string(rune('0'+i)))
		ms[i] = startMember(t, etcd, name, i, tlsFlags(dirs[i])...)
	}
	waitSettled(t, ms, 30*time.Second)

	checkAcross(t, ms, "tls")

	addr := clusterAddr(t, ms[0])
	client := ca.Issue(t, "tester", "127.0.0.1")
	member := &tls.Config{Certificates: []tls.Certificate{client.TLS}, RootCAs: ca.Pool()}
	if _, err := handshake(t, addr, member); err != nil {
		t.Fatalf("a client with a member certificate at %s: %v, want served", addr, err)
	}
	if _, err := handshake(t, addr, &tls.Config{RootCAs: ca.Pool()}); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("a client with no certificate at %s: got %v, want the certificate required alert", addr, err)
	}
	other := actorstest.NewCA(t, "other")
	intruder := other.Issue(t, "intruder", "127.0.0.1")
	foreign := &tls.Config{RootCAs: ca.Pool(), GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &intruder.TLS, nil }}
	if _, err := handshake(t, addr, foreign); err == nil || !strings.Contains(err.Error(), "unknown certificate authority") {
		t.Fatalf("a client with a certificate of another CA at %s: got %v, want the unknown certificate authority alert", addr, err)
	}

	// Rotation: a half-written certificate keeps the old one, logged. The
	// files are looked at on a handshake at most once a second, so each
	// step handshakes until the member has seen the change.
	serial := func() *big.Int {
		leaf, err := handshake(t, addr, member)
		if err != nil {
			t.Fatalf("a client with a member certificate at %s: %v", addr, err)
		}
		return leaf.SerialNumber
	}
	until := func(what string, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(pollTimeout)
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v\n%s", what, pollTimeout, ms[0].logs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	logged := func(match func(logRecord) bool) bool {
		_, err := ms[0].logs.waitLine(0, ms[0].exited, match)
		return err == nil
	}
	if got := serial(); got.Cmp(pairs[0].Leaf.SerialNumber) != 0 {
		t.Fatalf("served serial %v, want the first certificate's %v", got, pairs[0].Leaf.SerialNumber)
	}
	next := ca.Issue(t, "m0-next", "127.0.0.1")
	crt, key := filepath.Join(dirs[0], "m.crt"), filepath.Join(dirs[0], "m.key")
	if err := os.WriteFile(crt, next.CertPEM[:len(next.CertPEM)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	until("a log of the refused certificate naming --cluster-tls-cert", func() bool {
		if got := serial(); got.Cmp(pairs[0].Leaf.SerialNumber) != 0 {
			t.Fatalf("with a half-written certificate: served serial %v, want the old one's %v", got, pairs[0].Leaf.SerialNumber)
		}
		return logged(func(rec logRecord) bool {
			return rec["msg"] == "TLS reload failed; keeping the last good certificate" &&
				strings.Contains(rec["err"], "--cluster-tls-cert "+crt)
		})
	})
	writeFile(t, crt, string(next.CertPEM))
	writeFile(t, key, string(next.KeyPEM))
	until("the new certificate served after the rotation", func() bool { return serial().Cmp(next.Leaf.SerialNumber) == 0 })
	if _, err := ms[0].logs.waitLine(startTimeout, ms[0].exited, func(rec logRecord) bool {
		return rec["msg"] == "TLS certificate reloaded" && rec["serial"] == next.Leaf.SerialNumber.String()
	}); err != nil {
		t.Fatalf("no log of the reload with the new serial: %v\n%s", err, ms[0].logs)
	}

	// A CA file that gains a CA admits the certificates it signed.
	writeFile(t, filepath.Join(dirs[0], "ca.crt"), string(ca.PEM)+string(other.PEM))
	until("a client with a certificate of the CA added to the CA file served", func() bool {
		_, err := handshake(t, addr, foreign)
		return err == nil
	})
	// The members still serve each other's checks, exactly.
	scale := stableScaleMs(time.Now())
	for i := range 2 {
		r := ms[i].check(t, "tls-after", scale, 5, 1)
		if d, ok := decodeDecision(t, r); r.status != http.StatusOK || !ok || d.Count != int64(i+1) {
			t.Fatalf("check %d via %s after the rotation: %v, want 200 with count %d", i+1, ms[i].label, r, i+1)
		}
	}
}

// TestE2EClusterTLSBadFiles: a TLS flag whose file is missing or wrong, or
// TLS flags that do not go together, exit 2 naming the flag and the
// problem, before anything starts.
func TestE2EClusterTLSBadFiles(t *testing.T) {
	t.Parallel()
	ca := actorstest.NewCA(t, "cluster")
	dir, _ := tlsDir(t, ca, "m0")
	other := ca.Issue(t, "other", "127.0.0.1")
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, content)
		return p
	}
	crt, key, caf := filepath.Join(dir, "m.crt"), filepath.Join(dir, "m.key"), filepath.Join(dir, "ca.crt")
	missing := filepath.Join(dir, "missing.pem")
	notPEM := file("not.pem", "not a PEM file\n")
	keyAsCA := file("key-as-ca.pem", string(other.KeyPEM))
	badCA := file("bad-ca.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	otherKey := file("other.key", string(other.KeyPEM))
	https := []string{"--cluster-etcd", "https://127.0.0.1:2379"}
	member := func(c, k, a string) []string {
		return append(with(https, "--cluster-etcd-ca", caf), "--cluster-tls-cert", c, "--cluster-tls-key", k, "--cluster-tls-ca", a)
	}
	for _, tc := range []struct {
		name string
		args []string
		flag string // named in stderr
		what string // the problem, in stderr
	}{
		{"cert missing", member(missing, key, caf), "--cluster-tls-cert: stat " + missing, "no such file or directory"},
		{"cert not PEM", member(notPEM, key, caf), "--cluster-tls-cert " + notPEM, "holds no PEM data"},
		{"cert is a key", member(key, key, caf), "--cluster-tls-cert " + key, "holds no CERTIFICATE block"},
		{"key missing", member(crt, missing, caf), "--cluster-tls-key: stat " + missing, "no such file or directory"},
		{"key not PEM", member(crt, notPEM, caf), "--cluster-tls-key " + notPEM, "holds no PEM data"},
		{"key of another certificate", member(crt, otherKey, caf), "--cluster-tls-key " + otherKey, "does not match the certificate in " + crt},
		{"CA missing", member(crt, key, missing), "--cluster-tls-ca: stat " + missing, "no such file or directory"},
		{"CA file holds a key", member(crt, key, keyAsCA), "--cluster-tls-ca " + keyAsCA, "holds no CERTIFICATE block"},
		{"CA file holds no valid certificate", member(crt, key, badCA), "--cluster-tls-ca " + badCA, "certificate 1: x509: malformed certificate"},
		{"cert without key and CA", with(https, "--cluster-etcd-ca", caf, "--cluster-tls-cert", crt), "--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca", "set all three or none"},
		{"etcd CA missing", with(https, "--cluster-etcd-ca", missing), "--cluster-etcd-ca: stat " + missing, "no such file or directory"},
		{"etcd key of another certificate", with(https, "--cluster-etcd-cert", crt, "--cluster-etcd-key", otherKey), "--cluster-etcd-key " + otherKey, "does not match the certificate in " + crt},
		{"etcd cert without key", with(https, "--cluster-etcd-cert", crt), "--cluster-etcd-cert and --cluster-etcd-key", "set both or neither"},
		{"https etcd without TLS flags", https, "--cluster-etcd https://127.0.0.1:2379", "set --cluster-etcd-ca"},
		{"etcd TLS flags with http etcd", []string{"--cluster-etcd", "https://127.0.0.1:2379,http://127.0.0.1:2380", "--cluster-etcd-ca", caf}, "--cluster-etcd http://127.0.0.1:2380", "must all be https"},
		{"TLS flags without cluster mode", []string{"--cluster-tls-cert", crt, "--cluster-tls-key", key, "--cluster-tls-ca", caf}, "--cluster-tls-*", "need cluster mode (--cluster-etcd)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, _, stderr := runDaemonOnce(t, append([]string{"--listen", "127.0.0.1:0"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.flag) || !strings.Contains(stderr, tc.what) {
				t.Fatalf("%q: exit %d, want 2 naming %q and saying %q; stderr:\n%s", tc.args, code, tc.flag, tc.what, stderr)
			}
		})
	}
}

// with returns a new slice of a followed by more.
func with(a []string, more ...string) []string { return append(append([]string(nil), a...), more...) }
