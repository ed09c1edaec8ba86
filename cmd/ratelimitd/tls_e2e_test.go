//go:build unix

package main

// End-to-end tests of TLS on the client-facing listeners: the built daemon
// with --tls-cert and --tls-key (and --tls-client-ca), certificates made in
// memory and written to t.TempDir(), and the real clients of each protocol.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/rls"
)

// tlsDaemon is a daemon with TLS on its public, admin, gRPC and Redis
// protocol listeners.
type tlsDaemon struct {
	*daemon
	ca                  *actorstest.CA // issued the server's certificate
	dir                 string         // of the certificate files
	certPath, keyPath   string
	caPath              string // the server CA's certificate, for redis-cli and grpcurl
	admin               string // https://host:port of the admin listener
	grpcAddr, redisAddr string
}

// startTLSDaemon writes a server certificate of serial, issued by a new CA,
// an admin token and an RLS config (domain d, key k: 5 a year), and starts
// the daemon with TLS on every listener and flags. Its HTTP client trusts
// the CA, presents client (if any) and speaks HTTP/2.
func startTLSDaemon(t *testing.T, serial int64, client *tls.Certificate, flags ...string) *tlsDaemon {
	t.Helper()
	ca := actorstest.NewCA(t, "server ca")
	dir := t.TempDir()
	certPath, keyPath := writePair(t, dir, issueLocal(t, ca, serial), time.Now().Add(-time.Hour))
	caPath := filepath.Join(dir, "ca.pem")
	writeFile(t, caPath, string(ca.PEM))
	tokenFile := filepath.Join(dir, "token")
	writeFile(t, tokenFile, adminToken+"\n")
	conf := filepath.Join(dir, "rls.yaml")
	writeFile(t, conf, yearLimit("d", "5"))
	d := startDaemon(t, append([]string{
		"--tls-cert", certPath, "--tls-key", keyPath,
		"--admin-token-file", tokenFile, "--admin-listen", "127.0.0.1:0",
		"--grpc-listen", "127.0.0.1:0", "--rls-config", conf,
		"--redis-listen", "127.0.0.1:0",
	}, flags...)...)
	td := &tlsDaemon{daemon: d, ca: ca, dir: dir, certPath: certPath, keyPath: keyPath, caPath: caPath}
	for msg, p := range map[string]*string{"admin listening": &td.admin, "grpc listening": &td.grpcAddr, "redis listening": &td.redisAddr} {
		line, err := d.logs.waitLine(startTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == msg })
		if err != nil {
			t.Fatalf("no %s line: %v\n%s", msg, err, d.logs)
		}
		if line["tls"] != "true" {
			t.Errorf("%s line: got tls=%q, want true", msg, line["tls"])
		}
		*p = line["addr"]
	}
	td.admin = "https://" + td.admin
	d.base = strings.Replace(d.base, "http://", "https://", 1)
	d.client.Transport = &http.Transport{TLSClientConfig: td.clientConfig(client), ForceAttemptHTTP2: true}
	return td
}

// clientConfig is a client's TLS config that trusts the server's CA and
// presents cert, if any.
func (d *tlsDaemon) clientConfig(cert *tls.Certificate) *tls.Config {
	c := &tls.Config{RootCAs: d.ca.Pool()}
	if cert != nil {
		c.Certificates = []tls.Certificate{*cert}
	}
	return c
}

// httpsGet sends GET u with c and returns the answer, or the error.
func httpsGet(c *http.Client, u string) (*http.Response, []byte, error) {
	resp, err := c.Get(u)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// grpcHealth asks the gRPC health service of addr over TLS with cfg.
func grpcHealth(addr string, cfg *tls.Config) (healthpb.HealthCheckResponse_ServingStatus, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return 0, err
	}
	return h.Status, nil
}

// redisPing sends PING to addr over TLS with cfg.
func redisPing(addr string, cfg *tls.Config) error {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, TLSConfig: cfg, DisableIdentity: true, Protocol: 2})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

// TestE2ETLS: with --tls-cert and --tls-key every listener serves TLS:
// check_rate over HTTPS (HTTP/2) with the exact counts, and a plain HTTP
// request answered 400; a client that sends nothing closed; admin
// /healthz; the dashboard's login cookie Secure; gRPC ShouldRateLimit and
// health with grpc-go's TLS credentials, and grpcurl; CL.THROTTLE with
// go-redis and redis-cli over TLS.
func TestE2ETLS(t *testing.T) {
	t.Parallel()
	d := startTLSDaemon(t, 1, nil)
	host := strings.TrimPrefix(d.base, "https://")

	// A client that connects and sends nothing is closed by the handshake's
	// timeout (the header read timeout); it is watched while the rest runs.
	silent, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silentDone := make(chan error, 1)
	go func() {
		_ = silent.SetReadDeadline(time.Now().Add(3 * readHeaderTimeout))
		_, err := silent.Read(make([]byte, 1))
		silentDone <- err
	}()
	// And on the gRPC listener, by gRPC's connection timeout.
	silentGRPC, err := net.Dial("tcp", d.grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer silentGRPC.Close()
	silentGRPCDone := make(chan error, 1)
	go func() {
		_ = silentGRPC.SetReadDeadline(time.Now().Add(3 * rls.ConnectionTimeout))
		_, err := silentGRPC.Read(make([]byte, 1))
		silentGRPCDone <- err
	}()

	scale := stableScaleMs(time.Now())
	req, err := http.NewRequest(http.MethodGet, d.base+checkQuery("alice", scale, 5, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatalf("HTTPS check: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := response{status: resp.StatusCode, header: resp.Header, body: body}
	if dec, ok := decodeDecision(t, r); !ok || r.status != http.StatusOK || dec.Count != 1 || dec.Remaining != 4 || dec.Limit != 5 {
		t.Errorf("HTTPS check: got %v, want 200 with count 1, remaining 4 of 5", r)
	}
	wantPolicy := `"default";q=5;w=` + strconv.FormatInt((scale+999)/1000, 10)
	if got := r.header.Get("RateLimit-Policy"); got != wantPolicy {
		t.Errorf("RateLimit-Policy: got %q, want %q", got, wantPolicy)
	}
	if got := r.header.Get("RateLimit"); !strings.HasPrefix(got, `"default";r=4;t=`) {
		t.Errorf("RateLimit: got %q, want \"default\";r=4;t=…", got)
	}
	if resp.ProtoMajor != 2 || resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" {
		t.Errorf("HTTPS check: got %s, ALPN %v, want HTTP/2 by ALPN h2", resp.Proto, resp.TLS)
	}

	// Plain HTTP to the TLS port: net/http's 400, never an answer.
	plain, err := http.Get("http://" + host + checkQuery("alice", scale, 5, 1))
	if err != nil {
		t.Fatalf("plain HTTP to the TLS port: %v", err)
	}
	pb, _ := io.ReadAll(plain.Body)
	plain.Body.Close()
	if plain.StatusCode != http.StatusBadRequest || string(pb) != "Client sent an HTTP request to an HTTPS server.\n" {
		t.Errorf("plain HTTP to the TLS port: got %d %q, want 400 Client sent an HTTP request to an HTTPS server.", plain.StatusCode, pb)
	}
	if r := d.check(t, "alice", scale, 5, 0); r.status != http.StatusOK || !strings.Contains(string(r.body), `"count":1,`) {
		t.Errorf("peek after the plain request: got %v, want count 1 (the plain request counted nothing)", r)
	}

	// Admin and the dashboard's login.
	if resp, b, err := httpsGet(d.client, d.admin+"/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("admin /healthz over HTTPS: %v %v %q", resp, err, b)
	}
	noRedirect := &http.Client{Transport: d.client.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login, err := noRedirect.PostForm(d.admin+"/login", url.Values{"token": {adminToken}})
	if err != nil {
		t.Fatal(err)
	}
	login.Body.Close()
	if cs := login.Cookies(); login.StatusCode != http.StatusSeeOther || len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly {
		t.Errorf("login over HTTPS: %d with cookies %+v, want 303 and one Secure HttpOnly cookie", login.StatusCode, cs)
	}

	// gRPC with TLS credentials.
	conn, err := grpc.NewClient(d.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(d.clientConfig(nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, want := range []uint32{4, 3} {
		rr, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, rlsRequest("d", 0, "k=x"))
		if err != nil || rr.OverallCode != rlsv3.RateLimitResponse_OK || rr.Statuses[0].LimitRemaining != want {
			t.Errorf("ShouldRateLimit %d over TLS: got %v, %v, want OK with %d remaining", i+1, rr, err, want)
		}
	}
	if st, err := grpcHealth(d.grpcAddr, d.clientConfig(nil)); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health over TLS: got %v, %v, want SERVING", st, err)
	}
	grpcurlList(t, "-cacert", d.caPath, d.grpcAddr)

	// The Redis protocol: go-redis, then redis-cli.
	rc := redis.NewClient(&redis.Options{Addr: d.redisAddr, PoolSize: 1, MaxRetries: -1, TLSConfig: d.clientConfig(nil)})
	defer rc.Close()
	got, err := rc.Do(ctx, "CL.THROTTLE", "tls-key", 4, 10, 60, 1).Int64Slice()
	if want := []int64{0, 5, 4, -1, 6}; err != nil || !slices.Equal(got, want) {
		t.Errorf("CL.THROTTLE with go-redis over TLS: got %v, %v, want %v", got, err, want)
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Log("redis-cli is not installed: skipping redis-cli --tls")
	} else if help, _ := exec.Command("redis-cli", "--help").CombinedOutput(); !strings.Contains(string(help), "--tls") {
		t.Log("this redis-cli has no --tls: skipping redis-cli --tls")
	} else {
		// Two tokens spent of 10 a minute: the bucket is empty again in 11 or 12 s, as the clock rounds.
		out := redisCLI(t, d.redisAddr, "", "--tls", "--cacert", d.caPath, "CL.THROTTLE", "tls-key", "4", "10", "60", "1")
		if got := cliInts(t, out); len(got) != 5 || !slices.Equal(got[:4], []int64{0, 5, 3, -1}) || got[4] < 11 || got[4] > 12 {
			t.Errorf("CL.THROTTLE with redis-cli --tls: got %q, want 0 5 3 -1 and 11 or 12", out)
		}
	}

	if err := <-silentDone; err == nil || isTimeout(err) {
		t.Errorf("a client that sends nothing: got %v, want its connection closed by the server within %v", err, 3*readHeaderTimeout)
	}
	if err := <-silentGRPCDone; err == nil || isTimeout(err) {
		t.Errorf("a gRPC client that sends nothing: got %v, want its connection closed by the server within %v", err, 3*rls.ConnectionTimeout)
	}
}

// isTimeout reports whether err is a timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestE2ETLSProxy: in proxy mode the public listener proxies over HTTPS,
// limiting as over plain HTTP.
func TestE2ETLSProxy(t *testing.T) {
	t.Parallel()
	up, hits := countingUpstream(t)
	d := startTLSDaemon(t, 1, nil, "--proxy-upstream", up.URL, "--client-limit", "2/1h")
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusRequestEntityTooLarge} {
		r := d.proxyDo(t, http.MethodGet, "/items?n="+strconv.Itoa(i), nil, nil)
		if r.status != want || (want == http.StatusOK && !strings.HasPrefix(string(r.body), "GET /items?n="+strconv.Itoa(i)+" ")) {
			t.Errorf("request %d through the HTTPS proxy: got %v, want %d", i, r, want)
		}
	}
	if got := hits.Load(); got != 2 {
		t.Errorf("the upstream saw %d requests, want 2", got)
	}
}

// TestE2ETLSClientCA: with --tls-client-ca each listener serves a client
// with a certificate of that CA, and fails the handshake of a client
// without one or with one of another CA.
func TestE2ETLSClientCA(t *testing.T) {
	t.Parallel()
	clients, other := actorstest.NewCA(t, "client ca"), actorstest.NewCA(t, "other ca")
	caFile := filepath.Join(t.TempDir(), "clients.pem")
	writeFile(t, caFile, string(clients.PEM))
	good, bad := clients.IssueSerial(t, 11, "client").TLS, other.IssueSerial(t, 12, "client").TLS
	d := startTLSDaemon(t, 1, nil, "--tls-client-ca", caFile)

	listeners := []struct {
		name string
		call func(cfg *tls.Config) error
	}{
		{"public", func(cfg *tls.Config) error { return httpsOK(cfg, d.base+"/healthz") }},
		{"admin", func(cfg *tls.Config) error { return httpsOK(cfg, d.admin+"/healthz") }},
		{"grpc", func(cfg *tls.Config) error {
			st, err := grpcHealth(d.grpcAddr, cfg)
			if err == nil && st != healthpb.HealthCheckResponse_SERVING {
				err = errors.New("health " + st.String())
			}
			return err
		}},
		{"redis", func(cfg *tls.Config) error { return redisPing(d.redisAddr, cfg) }},
	}
	for _, l := range listeners {
		if err := l.call(d.clientConfig(&good)); err != nil {
			t.Errorf("%s with a certificate of the client CA: %v, want served", l.name, err)
		}
		if err := l.call(d.clientConfig(nil)); err == nil {
			t.Errorf("%s without a client certificate: served, want the handshake failed", l.name)
		}
		if err := l.call(d.clientConfig(&bad)); err == nil {
			t.Errorf("%s with a certificate of another CA: served, want the handshake failed", l.name)
		}
	}
}

// httpsOK sends GET u over a new connection with cfg and wants a 200.
func httpsOK(cfg *tls.Config, u string) error {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
	defer c.CloseIdleConnections()
	resp, b, err := httpsGet(c, u)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status + ": " + string(b))
	}
	return nil
}

// servedSerialAt dials addr over TLS and returns the serial of the
// certificate the server presents.
func servedSerialAt(t *testing.T, addr string, cfg *tls.Config, protos ...string) int64 {
	t.Helper()
	cfg = cfg.Clone()
	cfg.NextProtos = protos
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestE2ETLSRotation: new certificate files are served to new connections
// of every listener within a bounded wait, without a restart, while the
// connections opened before keep working.
func TestE2ETLSRotation(t *testing.T) {
	t.Parallel()
	d := startTLSDaemon(t, 1, nil)
	cfg := d.clientConfig(nil)
	scale := stableScaleMs(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Connections opened before the rotation, one per listener.
	get := func(what string, wantCount int64) *tls.ConnectionState {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, d.base+checkQuery("rot", scale, 10, 1), nil)
		resp, err := d.client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"count":`+strconv.FormatInt(wantCount, 10)+",") {
			t.Fatalf("%s: got %d %s, want 200 with count %d", what, resp.StatusCode, b, wantCount)
		}
		return resp.TLS
	}
	before := get("HTTPS before", 1).PeerCertificates[0]
	if before.SerialNumber.Int64() != 1 {
		t.Fatalf("HTTPS before: serial %v, want 1", before.SerialNumber)
	}
	conn, err := grpc.NewClient(d.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rlsClient := rlsv3.NewRateLimitServiceClient(conn)
	grpcCall := func(what string, wantRemaining uint32) int64 {
		t.Helper()
		var p peer.Peer
		rr, err := rlsClient.ShouldRateLimit(ctx, rlsRequest("d", 0, "k=rot"), grpc.Peer(&p))
		if err != nil || rr.Statuses[0].LimitRemaining != wantRemaining {
			t.Fatalf("%s: got %v, %v, want %d remaining", what, rr, err, wantRemaining)
		}
		return p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0].SerialNumber.Int64()
	}
	if s := grpcCall("gRPC before", 4); s != 1 {
		t.Fatalf("gRPC before: serial %d, want 1", s)
	}
	redisConn, err := tls.Dial("tcp", d.redisAddr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer redisConn.Close()
	redisPing := func(what string) {
		t.Helper()
		_ = redisConn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := redisConn.Write([]byte("PING\r\n")); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if line, err := bufio.NewReader(redisConn).ReadString('\n'); line != "+PONG\r\n" {
			t.Fatalf("%s: got %q, %v, want +PONG", what, line, err)
		}
	}
	redisPing("Redis before")
	if s := redisConn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); s != 1 {
		t.Fatalf("Redis before: serial %d, want 1", s)
	}

	// /metrics says when the certificate presented expires, and counts the
	// reloads of the files.
	metricLines := func() string {
		t.Helper()
		resp, err := d.client.Get(d.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	expiry := func(c *x509.Certificate) string {
		return `ratelimitd_tls_certificate_expiry_timestamp_seconds{file="--tls-cert"} ` + strconv.FormatFloat(float64(c.NotAfter.Unix()), 'g', -1, 64) + "\n"
	}
	if m := metricLines(); !strings.Contains(m, expiry(before)) || !strings.Contains(m, `ratelimitd_file_reloads_total{file="--tls-cert",result="ok"} 0`+"\n") {
		t.Errorf("/metrics before the rotation: no %q or no reload count at 0", expiry(before))
	}

	// The new pair, stamped apart from the old one.
	next := issueLocal(t, d.ca, 2)
	writePair(t, d.dir, next, time.Now())
	for _, l := range []struct {
		name, addr string
		protos     []string
	}{
		{"public", strings.TrimPrefix(d.base, "https://"), alpnHTTP},
		{"admin", strings.TrimPrefix(d.admin, "https://"), alpnHTTP},
		{"grpc", d.grpcAddr, alpnGRPC},
		{"redis", d.redisAddr, nil},
	} {
		deadline := time.Now().Add(pollTimeout)
		for servedSerialAt(t, l.addr, cfg, l.protos...) != 2 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: still the old certificate %v after the rotation", l.name, pollTimeout)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if n := strings.Count(d.logs.String(), `msg="TLS certificate reloaded"`); n != 1 {
		t.Errorf("reload log lines: got %d, want 1\n%s", n, d.logs)
	}
	if m := metricLines(); !strings.Contains(m, expiry(next.Leaf)) || !strings.Contains(m, `ratelimitd_file_reloads_total{file="--tls-cert",result="ok"} 1`+"\n") ||
		!strings.Contains(m, `ratelimitd_file_reloads_total{file="--admin-token-file",result="error"} 0`+"\n") {
		t.Errorf("/metrics after the rotation: want %q, one reload of --tls-cert, and the admin token file's series", expiry(next.Leaf))
	}

	// The old connections go on, with the old certificate.
	if st := get("HTTPS after, on the old connection", 2); st.PeerCertificates[0].SerialNumber.Int64() != 1 {
		t.Errorf("HTTPS after: serial %v, want 1 (the connection opened before)", st.PeerCertificates[0].SerialNumber)
	}
	if s := grpcCall("gRPC after, on the old connection", 3); s != 1 {
		t.Errorf("gRPC after: serial %d, want 1 (the connection opened before)", s)
	}
	redisPing("Redis after, on the old connection")
}

// TestE2ETLSBadFlags: a bad combination of the TLS flags exits 2 (a flag
// error), a bad file 1 (a start error); either names the flag.
func TestE2ETLSBadFlags(t *testing.T) {
	t.Parallel()
	ca := actorstest.NewCA(t, "ca")
	pair, other := issueLocal(t, ca, 1), issueLocal(t, ca, 2)
	dir := t.TempDir()
	file := func(name string, data []byte) string { return fileIn(t, dir, name, data) }
	cert, key, otherKey := file("cert.pem", pair.CertPEM), file("key.pem", pair.KeyPEM), file("other.pem", other.KeyPEM)
	text, caPEM := file("text", []byte("not PEM\n")), file("ca.pem", ca.PEM)
	tests := []struct {
		args []string
		code int
		want []string // what stderr must name
	}{
		{[]string{"--tls-key", key}, 2, []string{"--tls-key needs --tls-cert"}},
		{[]string{"--tls-cert", cert}, 2, []string{"--tls-cert needs --tls-key"}},
		{[]string{"--tls-client-ca", caPEM}, 2, []string{"--tls-client-ca needs --tls-cert"}},
		{[]string{"--tls-key", key, "--tls-client-ca", caPEM}, 2, []string{"--tls-key needs --tls-cert"}},
		{[]string{"--tls-cert", filepath.Join(dir, "missing.pem"), "--tls-key", key}, 1, []string{"--tls-cert", "no such file"}},
		{[]string{"--tls-cert", text, "--tls-key", key}, 1, []string{"--tls-cert " + text, "holds no PEM data"}},
		{[]string{"--tls-cert", key, "--tls-key", key}, 1, []string{"--tls-cert " + key, "holds no CERTIFICATE block"}},
		{[]string{"--tls-cert", cert, "--tls-key", text}, 1, []string{"--tls-key " + text, "holds no PEM data"}},
		{[]string{"--tls-cert", cert, "--tls-key", otherKey}, 1, []string{"--tls-key " + otherKey, "does not match the certificate"}},
		{[]string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", key}, 1, []string{"--tls-client-ca " + key, "holds no CERTIFICATE block"}},
		{[]string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", text}, 1, []string{"--tls-client-ca " + text, "holds no PEM data"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runDaemonOnce(t, append([]string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit code: got %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not name %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, "msg=listening") || stdout != "" {
				t.Errorf("the daemon started (or wrote to stdout %q):\n%s", stdout, stderr)
			}
		})
	}
}
