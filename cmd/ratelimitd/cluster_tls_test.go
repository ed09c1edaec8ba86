package main

import (
	"crypto/tls"
	"log/slog"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
)

// serveTLSOnce serves TLS with cert on a loopback port, completing the
// handshake of every connection, for the dial side of the TLS configs.
func serveTLSOnce(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// TestClusterTLSDialVerifies: the configs the daemon dials with (to etcd,
// to the members) trust a certificate of the CA file as it was at the
// last look, and, for etcd, only one naming an endpoint's host.
func TestClusterTLSDialVerifies(t *testing.T) {
	t.Parallel()
	ca, next := actorstest.NewCA(t, "ca"), actorstest.NewCA(t, "next")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	mod := time.Now().Add(-time.Hour)
	writeStamped(t, caFile, ca.PEM, mod)
	clock := clocktest.New(actorstest.ClockStart())
	f := &clusterTLSFiles{prefix: "cluster-etcd", paths: [3]string{2: caFile}}
	if err := f.load(clock.Now); err != nil {
		t.Fatal(err)
	}
	etcd := f.etcdConfig([]string{"https://127.0.0.1:2379", "https://etcd-1.example:2379"})
	members := f.memberConfig()
	dial := func(cfg *tls.Config, addr string) error {
		conn, err := tls.Dial("tcp", addr, cfg)
		if err == nil {
			conn.Close()
		}
		return err
	}
	good := serveTLSOnce(t, ca.Issue(t, "etcd", "127.0.0.1").TLS)
	byName := serveTLSOnce(t, ca.Issue(t, "etcd", "etcd-1.example").TLS)
	elsewhere := serveTLSOnce(t, ca.Issue(t, "etcd", "127.0.0.2", "etcd-9.example").TLS)
	ofNext := serveTLSOnce(t, next.Issue(t, "etcd", "127.0.0.1").TLS)
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		addr string
		want string // "" for trusted
	}{
		{"etcd, its IP", etcd, good, ""},
		{"etcd, an endpoint's name", etcd, byName, ""},
		{"etcd, no endpoint's host", etcd, elsewhere, "valid for none of the endpoints' hosts [127.0.0.1 etcd-1.example]"},
		{"etcd, another CA", etcd, ofNext, "certificate signed by unknown authority"},
		{"member, the CA's", members, good, ""},
		{"member, another CA", members, ofNext, "certificate signed by unknown authority"},
	} {
		if err := dial(tc.cfg, tc.addr); tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	// The CA file replaced: the dials after the check interval trust the
	// new CA alone.
	writeStamped(t, caFile, next.PEM, mod.Add(time.Second))
	clock.Advance(fileCheckInterval)
	if err := dial(etcd, ofNext); err != nil {
		t.Errorf("etcd, the new CA: got %v, want trusted", err)
	}
	if err := dial(members, ofNext); err != nil {
		t.Errorf("member, the new CA: got %v, want trusted", err)
	}
	if err := dial(etcd, good); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("etcd, the old CA after the rotation: got %v, want refused", err)
	}
	// A CA file half written keeps the CA loaded before.
	writeStamped(t, caFile, ca.PEM[:len(ca.PEM)/2], mod.Add(2*time.Second))
	clock.Advance(fileCheckInterval)
	if err := dial(etcd, ofNext); err != nil {
		t.Errorf("etcd, with a half-written CA file: got %v, want the new CA still trusted", err)
	}
}

// TestClusterTLSClientCertificate: the etcd config presents no
// certificate without --cluster-etcd-cert, and the one loaded with it.
func TestClusterTLSClientCertificate(t *testing.T) {
	t.Parallel()
	ca := actorstest.NewCA(t, "ca")
	dir := t.TempDir()
	p := ca.Issue(t, "member", "127.0.0.1")
	writeFile(t, filepath.Join(dir, "m.crt"), string(p.CertPEM))
	writeFile(t, filepath.Join(dir, "m.key"), string(p.KeyPEM))
	none := &clusterTLSFiles{prefix: "cluster-etcd"}
	with := &clusterTLSFiles{prefix: "cluster-etcd", paths: [3]string{filepath.Join(dir, "m.crt"), filepath.Join(dir, "m.key")}}
	for _, f := range []*clusterTLSFiles{none, with} {
		if err := f.load(time.Now); err != nil {
			t.Fatal(err)
		}
	}
	got, err := none.etcdConfig(nil).GetClientCertificate(&tls.CertificateRequestInfo{})
	if err != nil || len(got.Certificate) != 0 {
		t.Fatalf("without --cluster-etcd-cert: got %d certificates, %v; want none", len(got.Certificate), err)
	}
	got, err = with.etcdConfig(nil).GetClientCertificate(&tls.CertificateRequestInfo{})
	if err != nil || got.Leaf == nil || got.Leaf.SerialNumber.Cmp(p.Leaf.SerialNumber) != 0 {
		t.Fatalf("with --cluster-etcd-cert: got %+v, %v; want serial %v", got, err, p.Leaf.SerialNumber)
	}
}

// TestClusterTLSMemberRotation: the member config serves and dials with
// the certificate loaded at the start until the clock passes the check
// interval after a rotation, then with the new one, and the reload is
// logged to the logger set after the load, with the new serial.
func TestClusterTLSMemberRotation(t *testing.T) {
	t.Parallel()
	ca := actorstest.NewCA(t, "ca")
	dir, first := tlsDir(t, ca, "m0")
	clock := clocktest.New(actorstest.ClockStart())
	f := &clusterTLSFiles{prefix: "cluster-tls", paths: [3]string{filepath.Join(dir, "m.crt"), filepath.Join(dir, "m.key"), filepath.Join(dir, "ca.crt")}}
	if err := f.load(clock.Now); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	f.setLogger(slog.New(slog.NewTextHandler(logs, nil)))
	cfg := f.memberConfig()
	serials := func() (served, dialed *big.Int) {
		t.Helper()
		sc, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil || sc.ClientAuth != tls.RequireAndVerifyClientCert || sc.MinVersion != tls.VersionTLS13 {
			t.Fatalf("GetConfigForClient: got %+v, %v; want TLS 1.3 requiring a verified client certificate", sc, err)
		}
		s, err := sc.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := cfg.GetClientCertificate(&tls.CertificateRequestInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Leaf.SerialNumber, c.Leaf.SerialNumber
	}
	is := func(got, want *big.Int) bool { return got.Cmp(want) == 0 }
	// The new pair, stamped apart from the first, then the look it waits for.
	next := ca.Issue(t, "m0-next", "127.0.0.1")
	later := time.Now().Add(time.Hour)
	writeStamped(t, f.paths[1], next.KeyPEM, later)
	writeStamped(t, f.paths[0], next.CertPEM, later)
	if s, c := serials(); !is(s, first.Leaf.SerialNumber) || !is(c, first.Leaf.SerialNumber) {
		t.Errorf("before the check interval: served %v, dialed with %v; want the first serial %v", s, c, first.Leaf.SerialNumber)
	}
	clock.Advance(fileCheckInterval)
	if s, c := serials(); !is(s, next.Leaf.SerialNumber) || !is(c, next.Leaf.SerialNumber) {
		t.Errorf("after the check interval: served %v, dialed with %v; want the new serial %v", s, c, next.Leaf.SerialNumber)
	}
	if l := logs.String(); strings.Count(l, `msg="TLS certificate reloaded"`) != 1 || !strings.Contains(l, "serial="+next.Leaf.SerialNumber.String()) {
		t.Errorf("reload log: got\n%s\nwant one msg=\"TLS certificate reloaded\" line with serial=%v", l, next.Leaf.SerialNumber)
	}
}
