package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
)

// checkFixture is a directory of the files ratelimitd check reads, good
// ones unless a test rewrites them.
type checkFixture struct {
	dir, rules, rls, token, password, cert, key, ca string
	pair                                            actorstest.CertPair
}

func newCheckFixture(t *testing.T) *checkFixture {
	t.Helper()
	dir := t.TempDir()
	f := &checkFixture{
		dir:      dir,
		rules:    filepath.Join(dir, "rules.yaml"),
		rls:      filepath.Join(dir, "rls"),
		token:    filepath.Join(dir, "token"),
		password: filepath.Join(dir, "redis-password"),
	}
	if err := os.Mkdir(f.rls, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.rules, "rules:\n  - {name: login, scale: 30s, limit: 5}\n  - {name: api, scale: 1m, limit: 600, algorithm: token_bucket, burst: 50}\n")
	writeFile(t, filepath.Join(f.rls, "edge.yaml"), "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 10}\n")
	writeFile(t, filepath.Join(f.rls, "api.yml"), "domain: api\ndescriptors:\n  - key: path\n    rate_limit: {unit: minute, requests_per_unit: 60}\n")
	writeFile(t, f.token, "0123456789abcdef-old\n0123456789abcdef-new\n")
	writeFile(t, f.password, "open sesame\n")
	ca := actorstest.NewCA(t, "check ca")
	f.pair = ca.Issue(t, "ratelimitd check", "127.0.0.1")
	f.cert, f.key = writePair(t, dir, f.pair, time.Now())
	f.ca = filepath.Join(dir, "ca.pem")
	writeFile(t, f.ca, string(ca.PEM))
	return f
}

// args are the daemon's flags naming every file of f.
func (f *checkFixture) args() []string {
	return []string{"--rules", f.rules, "--rls-config", f.rls, "--admin-token-file", f.token, "--redis-password-file", f.password,
		"--tls-cert", f.cert, "--tls-key", f.key, "--tls-client-ca", f.ca, "--data-dir", filepath.Join(f.dir, "data")}
}

// TestCheckFiles: ratelimitd check reads every file the flags name as the
// start does and reports each: all good is exit 0 and a line per file
// saying what it holds; bad files are exit 1 with a FAIL line each,
// naming the flag, the file and what is wrong, the good ones still
// reported; no file named is a usage error. Nothing is started: the data
// directory is not created and nothing listens.
func TestCheckFiles(t *testing.T) {
	t.Parallel()
	f := newCheckFixture(t)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"check"}, f.args()...), &stdout, &stderr)
	want := strings.Join([]string{
		"ok    --rules " + f.rules + ": 2 rules",
		"ok    --rls-config " + f.rls + ": 2 domains (api, edge) in 2 files",
		"ok    --admin-token-file " + f.token + ": 2 tokens",
		"ok    --redis-password-file " + f.password + ": 1 password",
		"ok    --tls-cert " + f.cert + ": a certificate for " + f.pair.Leaf.Subject.String() + ", valid until " + f.pair.Leaf.NotAfter.UTC().Format(time.RFC3339) + ", client certificates verified by " + f.ca,
		"all 5 ok",
		"",
	}, "\n")
	if code != exitOK || stdout.String() != want || stderr.Len() != 0 {
		t.Errorf("all good: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 0 and:\n%s", code, &stdout, &stderr, want)
	}

	// The same files broken, but for the TLS pair.
	writeFile(t, f.rules, "rules:\n  - {name: login, scale: 30s, limit: 5, colour: red}\n")
	writeFile(t, filepath.Join(f.rls, "edge.yaml"), "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: fortnight, requests_per_unit: 10}\n")
	if err := os.Chmod(f.token, 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.password, "\n")
	stdout.Reset()
	code = run(context.Background(), append([]string{"check"}, f.args()...), &stdout, &stderr)
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	wants := []string{
		"FAIL  --rules " + f.rules + ": ",
		"FAIL  --rls-config " + f.rls + ": " + filepath.Join(f.rls, "edge.yaml") + `:4: descriptors[0].rate_limit.unit: "fortnight" is not a unit`,
		"FAIL  --admin-token-file " + f.token + ": admin token: " + f.token + " is accessible by group or others (mode 0644)",
		"FAIL  --redis-password-file " + f.password + ": redis password: " + f.password + " holds no password (only white space)",
		"ok    --tls-cert " + f.cert + ": ",
		"4 of 5 failed",
	}
	if code != exitFailure || len(lines) != len(wants) {
		t.Fatalf("bad files: exit %d, stdout:\n%s\nwant exit 1 and %d lines", code, &stdout, len(wants))
	}
	for i, w := range wants {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("bad files, line %d: got %q, want it to begin %q", i+1, lines[i], w)
		}
	}
	if !strings.Contains(lines[0], "colour") {
		t.Errorf("the rules' failure does not name the unknown key: %q", lines[0])
	}

	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"check", "--data-dir", filepath.Join(f.dir, "data")}, &stdout, &stderr); code != exitUsage ||
		stdout.Len() != 0 || !strings.Contains(stderr.String(), "the flags name no file to check") {
		t.Errorf("no file: exit %d, stdout %q, stderr %q; want exit 2 saying so", code, &stdout, &stderr)
	}
	// Proxy mode's flags are the daemon's too.
	stdout.Reset()
	if code := run(context.Background(), []string{"check", "proxy", "--upstream", "http://127.0.0.1:9", "--tls-cert", f.cert, "--tls-key", f.key}, &stdout, &stderr); code != exitOK ||
		!strings.HasSuffix(stdout.String(), "all 1 ok\n") {
		t.Errorf("check proxy: exit %d, stdout %q", code, &stdout)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "data")); !os.IsNotExist(err) {
		t.Errorf("check made the data directory: %v", err)
	}
	if strings.Contains(stderr.String(), "listening") {
		t.Errorf("check started listening:\n%s", &stderr)
	}
}

// TestE2ECheck: the built binary's check, good files then one bad, with
// the exit codes and the report a CI pipeline reads.
func TestE2ECheck(t *testing.T) {
	t.Parallel()
	f := newCheckFixture(t)
	code, stdout, stderr := runDaemonOnce(t, append([]string{"check"}, f.args()...)...)
	if code != exitOK || !strings.HasSuffix(stdout, "all 5 ok\n") || strings.Count(stdout, "\nok    ") != 4 {
		t.Errorf("good files: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	writeFile(t, filepath.Join(f.rls, "api.yml"), "domain: edge\n")
	code, stdout, _ = runDaemonOnce(t, append([]string{"check"}, f.args()...)...)
	if code != exitFailure || !strings.Contains(stdout, "FAIL  --rls-config "+f.rls+": ") || !strings.Contains(stdout, "edge") || !strings.HasSuffix(stdout, "1 of 5 failed\n") {
		t.Errorf("a domain in two files: exit %d, stdout:\n%s", code, stdout)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "data")); !os.IsNotExist(err) {
		t.Errorf("check made the data directory: %v", err)
	}
}

// TestCheckCertificateValidity: a certificate outside its validity fails
// the check (the start would serve it, but no client would accept it),
// naming when it ended or begins.
func TestCheckCertificateValidity(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now().Truncate(time.Second)
	for name, c := range map[string]struct {
		from, to time.Time
		says     string
	}{
		"expired": {now.Add(-48 * time.Hour), now.Add(-time.Hour), "expired at " + now.Add(-time.Hour).UTC().Format(time.RFC3339)},
		"future":  {now.Add(time.Hour), now.Add(48 * time.Hour), "is not valid before " + now.Add(time.Hour).UTC().Format(time.RFC3339)},
	} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: name}, NotBefore: c.from, NotAfter: c.to}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		pk, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		certPath, keyPath := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writeFile(t, certPath, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
		writeFile(t, keyPath, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})))
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"check", "--tls-cert", certPath, "--tls-key", keyPath}, &stdout, &stderr)
		want := "FAIL  --tls-cert " + certPath + ": the certificate for CN=" + name + " " + c.says + "\n1 of 1 failed\n"
		if code != exitFailure || stdout.String() != want {
			t.Errorf("%s: exit %d, stdout:\n%s\nwant exit 1 and:\n%s", name, code, &stdout, want)
		}
	}
}
