package main

import (
	"crypto/x509"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
)

// servedSerial returns the serial of the leaf cf serves now.
func servedSerial(t *testing.T, cf *certFiles) int64 {
	t.Helper()
	c, err := cf.GetCertificate(nil)
	if err != nil || c == nil || c.Leaf == nil {
		t.Fatalf("GetCertificate: %v, %v", c, err)
	}
	return c.Leaf.SerialNumber.Int64()
}

// TestCertFilesRotate: a pair loads; a rotated pair is served only once
// the clock has passed the check interval, to servers and clients alike.
func TestCertFilesRotate(t *testing.T) {
	t.Parallel()
	ca := actorstest.NewCA(t, "ca")
	dir := t.TempDir()
	mod := time.Now().Add(-time.Hour)
	certPath, keyPath := writePair(t, dir, issueLocal(t, ca, 101), mod)
	clock := clocktest.New(actorstest.ClockStart())
	logs := &lockedBuffer{}
	cf, err := newCertFiles(tlsFile{"--tls-cert", certPath}, tlsFile{"--tls-key", keyPath}, clock.Now, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, cf); got != 101 {
		t.Fatalf("serial at load: got %d, want 101", got)
	}

	writePair(t, dir, issueLocal(t, ca, 102), mod.Add(time.Second))
	clock.Advance(fileCheckInterval - time.Millisecond)
	if got := servedSerial(t, cf); got != 101 {
		t.Errorf("serial before the check interval: got %d, want 101", got)
	}
	clock.Advance(time.Millisecond)
	if got := servedSerial(t, cf); got != 102 {
		t.Errorf("serial after the check interval: got %d, want 102", got)
	}
	c, err := cf.GetClientCertificate(nil)
	if err != nil || c.Leaf.SerialNumber.Int64() != 102 {
		t.Errorf("GetClientCertificate: got %v, %v, want serial 102", c, err)
	}
	if n := strings.Count(logs.String(), `msg="TLS certificate reloaded"`); n != 1 {
		t.Errorf("reload log lines: got %d, want 1:\n%s", n, logs)
	}
}

// TestCertFilesBadRotationKeepsOld: a half-written certificate, then a key
// that does not match it, keep the last good pair; the failures are
// logged once a minute at most, with their count; a good pair then loads.
func TestCertFilesBadRotationKeepsOld(t *testing.T) {
	t.Parallel()
	ca := actorstest.NewCA(t, "ca")
	dir := t.TempDir()
	mod := time.Now().Add(-time.Hour)
	good := issueLocal(t, ca, 201)
	certPath, keyPath := writePair(t, dir, good, mod)
	clock := clocktest.New(actorstest.ClockStart())
	logs := &lockedBuffer{}
	cf, err := newCertFiles(tlsFile{"--tls-cert", certPath}, tlsFile{"--tls-key", keyPath}, clock.Now, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}

	next := issueLocal(t, ca, 202)
	writeStamped(t, certPath, next.CertPEM[:len(next.CertPEM)/2], mod.Add(time.Second)) // half written
	clock.Advance(fileCheckInterval)
	if got := servedSerial(t, cf); got != 201 {
		t.Errorf("serial after a half-written certificate: got %d, want 201", got)
	}
	writeStamped(t, certPath, next.CertPEM, mod.Add(2*time.Second)) // the key is still the old one
	clock.Advance(fileCheckInterval)
	if got := servedSerial(t, cf); got != 201 {
		t.Errorf("serial with a key of another certificate: got %d, want 201", got)
	}
	if n := strings.Count(logs.String(), "TLS reload failed"); n != 1 {
		t.Fatalf("failure log lines within a minute: got %d, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "--tls-cert "+certPath+": holds no PEM data") {
		t.Errorf("the failure line does not name the file and its problem:\n%s", logs)
	}

	// A minute on, the next failure is logged, counting the one unlogged.
	writeStamped(t, keyPath, []byte("not a key"), mod.Add(3*time.Second))
	clock.Advance(fileLogInterval)
	if got := servedSerial(t, cf); got != 201 {
		t.Errorf("serial with a broken key: got %d, want 201", got)
	}
	if n := strings.Count(logs.String(), "TLS reload failed"); n != 2 || !strings.Contains(logs.String(), "times=2") {
		t.Errorf("failure log lines after a minute: got %d, want 2, the second with times=2:\n%s", n, logs)
	}

	writeStamped(t, keyPath, next.KeyPEM, mod.Add(4*time.Second))
	clock.Advance(fileCheckInterval)
	if got := servedSerial(t, cf); got != 202 {
		t.Errorf("serial after the good key: got %d, want 202", got)
	}
}

// TestCAFilesRotate: the pool verifies the CA's certificates; a rotated CA
// file replaces it after the check interval; a file with no certificate
// keeps the last good pool.
func TestCAFilesRotate(t *testing.T) {
	t.Parallel()
	ca1, ca2 := actorstest.NewCA(t, "one"), actorstest.NewCA(t, "two")
	path := filepath.Join(t.TempDir(), "ca.pem")
	mod := time.Now().Add(-time.Hour)
	writeStamped(t, path, ca1.PEM, mod)
	clock := clocktest.New(actorstest.ClockStart())
	cf, err := newCAFiles(tlsFile{"--tls-client-ca", path}, clock.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	verifies := func(ca *actorstest.CA) bool {
		_, err := ca.IssueSerial(t, 7, "client").Leaf.Verify(x509.VerifyOptions{Roots: cf.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err == nil
	}
	if !verifies(ca1) || verifies(ca2) {
		t.Fatalf("at load: want ca1's certificates verified, not ca2's")
	}
	writeStamped(t, path, ca2.PEM, mod.Add(time.Second))
	clock.Advance(fileCheckInterval)
	if verifies(ca1) || !verifies(ca2) {
		t.Errorf("after the rotation: want ca2's certificates verified, not ca1's")
	}
	writeStamped(t, path, ca2.IssueSerial(t, 8, "client").KeyPEM, mod.Add(2*time.Second))
	clock.Advance(fileCheckInterval)
	if !verifies(ca2) {
		t.Errorf("after a CA file with no certificate: want ca2's certificates still verified")
	}
}

// TestTLSFilesBadFiles: each bad file is an error naming its flag, its
// path and its problem.
func TestTLSFilesBadFiles(t *testing.T) {
	t.Parallel()
	ca := actorstest.NewCA(t, "ca")
	pair, other := issueLocal(t, ca, 1), issueLocal(t, ca, 2)
	dir := t.TempDir()
	write := func(name string, data []byte) string { return fileIn(t, dir, name, data) }
	goodCert, goodKey := write("cert.pem", pair.CertPEM), write("key.pem", pair.KeyPEM)
	otherKey := write("other-key.pem", other.KeyPEM)
	text := write("text", []byte("hello\n"))
	missing := filepath.Join(dir, "missing.pem")
	keyOnly := write("key-only.pem", pair.KeyPEM)
	certOnly := write("cert-only.pem", pair.CertPEM)
	empty := write("empty.pem", nil)

	tests := []struct {
		name      string
		cert, key string // a key pair, when cert is set
		ca        string // else a CA file
		want      error
		wantIn    string // the flag and file the message names
	}{
		{"missing certificate", missing, goodKey, "", fs.ErrNotExist, "--tls-cert: "},
		{"missing key", goodCert, missing, "", fs.ErrNotExist, "--tls-key: "},
		{"certificate not PEM", text, goodKey, "", errNotPEM, "--tls-cert " + text + ": holds no PEM data"},
		{"empty certificate", empty, goodKey, "", errNotPEM, "--tls-cert " + empty + ": holds no PEM data"},
		{"certificate file of a key", keyOnly, goodKey, "", errNoCertificate, "--tls-cert " + keyOnly + ": holds no CERTIFICATE block"},
		{"key not PEM", goodCert, text, "", errNotPEM, "--tls-key " + text + ": holds no PEM data"},
		{"key file of a certificate", goodCert, certOnly, "", errNoPrivateKey, "--tls-key " + certOnly + ": holds no PRIVATE KEY block"},
		{"key of another certificate", goodCert, otherKey, "", errKeyMismatch, "--tls-key " + otherKey + ": holds a private key that does not match the certificate in " + goodCert},
		{"missing CA", "", "", missing, fs.ErrNotExist, "--tls-client-ca: "},
		{"CA not PEM", "", "", text, errNotPEM, "--tls-client-ca " + text + ": holds no PEM data"},
		{"CA file with no certificate", "", "", keyOnly, errNoCertificate, "--tls-client-ca " + keyOnly + ": holds no CERTIFICATE block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var err error
			if tt.cert != "" {
				_, err = newCertFiles(tlsFile{"--tls-cert", tt.cert}, tlsFile{"--tls-key", tt.key}, time.Now, slog.New(slog.DiscardHandler))
			} else {
				_, err = newCAFiles(tlsFile{"--tls-client-ca", tt.ca}, time.Now, slog.New(slog.DiscardHandler))
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want an error matching %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("got %q, want it to contain %q", err, tt.wantIn)
			}
		})
	}
}

// issueLocal makes a certificate of ca with serial n for a server on
// 127.0.0.1 and localhost.
func issueLocal(t *testing.T, ca *actorstest.CA, n int64) actorstest.CertPair {
	t.Helper()
	return ca.IssueSerial(t, n, "ratelimitd test", "127.0.0.1", "localhost")
}

// writeStamped writes data to path through a rename, as a deployment tool
// does, and sets its modification time to mod: two writes within the
// file system's timestamp granularity would otherwise look alike when
// their sizes are equal.
func writeStamped(t *testing.T, path string, data []byte, mod time.Time) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, mod, mod); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// fileIn writes data to the file name in dir (see writeFile) and returns
// its path.
func fileIn(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	writeFile(t, p, string(data))
	return p
}

// writePair writes p to cert.pem and key.pem in dir, stamped mod, and
// returns their paths.
func writePair(t *testing.T, dir string, p actorstest.CertPair, mod time.Time) (certPath, keyPath string) {
	t.Helper()
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeStamped(t, keyPath, p.KeyPEM, mod)
	writeStamped(t, certPath, p.CertPEM, mod)
	return certPath, keyPath
}
