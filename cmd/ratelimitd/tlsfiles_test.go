package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_800_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

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
	ca := newTestCA(t, "ca")
	dir := t.TempDir()
	mod := time.Now().Add(-time.Hour)
	certPath, keyPath := writePair(t, dir, ca.issue(t, 101, false), mod)
	clock := newFakeClock()
	logs := &lockedBuffer{}
	cf, err := newCertFiles(tlsFile{"--tls-cert", certPath}, tlsFile{"--tls-key", keyPath}, clock.Now, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, cf); got != 101 {
		t.Fatalf("serial at load: got %d, want 101", got)
	}

	writePair(t, dir, ca.issue(t, 102, false), mod.Add(time.Second))
	clock.advance(tlsCheckInterval - time.Millisecond)
	if got := servedSerial(t, cf); got != 101 {
		t.Errorf("serial before the check interval: got %d, want 101", got)
	}
	clock.advance(time.Millisecond)
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
	ca := newTestCA(t, "ca")
	dir := t.TempDir()
	mod := time.Now().Add(-time.Hour)
	good := ca.issue(t, 201, false)
	certPath, keyPath := writePair(t, dir, good, mod)
	clock := newFakeClock()
	logs := &lockedBuffer{}
	cf, err := newCertFiles(tlsFile{"--tls-cert", certPath}, tlsFile{"--tls-key", keyPath}, clock.Now, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}

	next := ca.issue(t, 202, false)
	writeStamped(t, certPath, next.cert[:len(next.cert)/2], mod.Add(time.Second)) // half written
	clock.advance(tlsCheckInterval)
	if got := servedSerial(t, cf); got != 201 {
		t.Errorf("serial after a half-written certificate: got %d, want 201", got)
	}
	writeStamped(t, certPath, next.cert, mod.Add(2*time.Second)) // the key is still the old one
	clock.advance(tlsCheckInterval)
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
	clock.advance(tlsLogInterval)
	if got := servedSerial(t, cf); got != 201 {
		t.Errorf("serial with a broken key: got %d, want 201", got)
	}
	if n := strings.Count(logs.String(), "TLS reload failed"); n != 2 || !strings.Contains(logs.String(), "times=2") {
		t.Errorf("failure log lines after a minute: got %d, want 2, the second with times=2:\n%s", n, logs)
	}

	writeStamped(t, keyPath, next.key, mod.Add(4*time.Second))
	clock.advance(tlsCheckInterval)
	if got := servedSerial(t, cf); got != 202 {
		t.Errorf("serial after the good key: got %d, want 202", got)
	}
}

// TestCAFilesRotate: the pool verifies the CA's certificates; a rotated CA
// file replaces it after the check interval; a file with no certificate
// keeps the last good pool.
func TestCAFilesRotate(t *testing.T) {
	t.Parallel()
	ca1, ca2 := newTestCA(t, "one"), newTestCA(t, "two")
	path := filepath.Join(t.TempDir(), "ca.pem")
	mod := time.Now().Add(-time.Hour)
	writeStamped(t, path, ca1.pem, mod)
	clock := newFakeClock()
	cf, err := newCAFiles(tlsFile{"--tls-client-ca", path}, clock.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	verifies := func(ca *testCA) bool {
		leaf, err := x509.ParseCertificate(pemBytes(t, ca.issue(t, 7, true).cert))
		if err != nil {
			t.Fatal(err)
		}
		_, err = leaf.Verify(x509.VerifyOptions{Roots: cf.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err == nil
	}
	if !verifies(ca1) || verifies(ca2) {
		t.Fatalf("at load: want ca1's certificates verified, not ca2's")
	}
	writeStamped(t, path, ca2.pem, mod.Add(time.Second))
	clock.advance(tlsCheckInterval)
	if verifies(ca1) || !verifies(ca2) {
		t.Errorf("after the rotation: want ca2's certificates verified, not ca1's")
	}
	writeStamped(t, path, ca2.issue(t, 8, true).key, mod.Add(2*time.Second))
	clock.advance(tlsCheckInterval)
	if !verifies(ca2) {
		t.Errorf("after a CA file with no certificate: want ca2's certificates still verified")
	}
}

// pemBytes returns the bytes of the first PEM block of b.
func pemBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("no PEM block in %q", b)
	}
	return block.Bytes
}

// TestTLSFilesBadFiles: each bad file is an error naming its flag, its
// path and its problem.
func TestTLSFilesBadFiles(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "ca")
	pair, other := ca.issue(t, 1, false), ca.issue(t, 2, false)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goodCert, goodKey := write("cert.pem", pair.cert), write("key.pem", pair.key)
	otherKey := write("other-key.pem", other.key)
	text := write("text", []byte("hello\n"))
	missing := filepath.Join(dir, "missing.pem")
	keyOnly := write("key-only.pem", pair.key)
	certOnly := write("cert-only.pem", pair.cert)
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
