package main

// End-to-end tests of the connection caps: the built daemon, real sockets.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rawConn is a client connection that the test drives by hand, one request
// at a time, so it knows which connection each request used.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, br: bufio.NewReader(c)}
}

// get sends GET path and reads the answer; with closeAfter the request asks
// the server to close the connection after it.
func (c *rawConn) get(t *testing.T, path string, closeAfter bool) response {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	hdr := ""
	if closeAfter {
		hdr = "Connection: close\r\n"
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: ratelimitd\r\n%s\r\n", path, hdr); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("GET %s: reading the answer: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// closedByServer reports whether the server has closed c: a read gets EOF
// within the wait (an open, idle connection gets nothing and times out).
func (c *rawConn) closedByServer(wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.br.ReadByte()
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET)
}

// samples parses a Prometheus text body into values by series.
func samples(t *testing.T, body []byte) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m
}

// TestE2EMaxConns: with --max-conns 8 and 8 idle keep-alive connections
// open, further connections are still answered 200: at the cap the daemon
// closes the longest-idle one to make room. The open connections never
// exceed 8 (each scrape, on a connection of its own, sees at most 8, its
// own included), the connections the server closed are exactly those it
// counts, and the log says the cap was reached.
func TestE2EMaxConns(t *testing.T) {
	t.Parallel()
	const maxConns, extra = 8, 12
	d := startDaemon(t, "--max-conns", strconv.Itoa(maxConns))
	addr := strings.TrimPrefix(d.base, "http://")
	if line, err := d.logs.waitLine(startTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == "connection caps" }); err != nil || line["max_conns"] != "8" || line["from_flag"] != "true" {
		t.Fatalf("connection caps line: got %v (%v), want max_conns 8 from the flag", line, err)
	}
	scrape := func(step string) map[string]float64 {
		t.Helper()
		r := dialRaw(t, addr).get(t, "/metrics", true)
		if r.status != http.StatusOK {
			t.Fatalf("%s: GET /metrics: got %v, want 200", step, r)
		}
		m := samples(t, r.body)
		if open := m[`ratelimitd_connections{listener="public"}`]; open < 1 || open > maxConns {
			t.Errorf("%s: ratelimitd_connections %v, want 1 to %d (this scrape's own included)", step, open, maxConns)
		}
		if got := m[`ratelimitd_connections_max{listener="public"}`]; got != maxConns {
			t.Errorf("%s: ratelimitd_connections_max %v, want %d", step, got, maxConns)
		}
		return m
	}

	var conns []*rawConn
	for i := range maxConns + extra {
		c := dialRaw(t, addr)
		r := c.get(t, checkQuery(fmt.Sprint("conn-", i), 3_600_000, 100, 1), false)
		if r.status != http.StatusOK || r.header.Get("Connection") == "close" {
			t.Fatalf("connection %d: got %v (Connection %q), want 200 on a kept-alive connection", i+1, r, r.header.Get("Connection"))
		}
		conns = append(conns, c) // kept open and idle
		if i%4 == 3 {
			scrape(fmt.Sprintf("after %d connections", i+1))
		}
	}

	// Which of the test's connections has the server closed? (All at once:
	// an open one waits out the deadline.)
	closed := make([]bool, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { closed[i] = c.closedByServer(2 * time.Second) })
	}
	wg.Wait()
	nClosed := 0
	for _, c := range closed {
		if c {
			nClosed++
		}
	}
	if open := len(conns) - nClosed; open > maxConns {
		t.Errorf("%d of the test's connections are still open, want at most %d", open, maxConns)
	}
	// (Which ones were closed depends on when each answered connection was
	// marked idle; TestConnLimiterClosesIdle pins the order.)
	t.Logf("the server closed %d of the test's %d connections: %v", nClosed, len(conns), closed)
	m := scrape("at the end")
	idleClosed := m[`ratelimitd_connections_idle_closed_total{listener="public"}`]
	// The final scrape's own connection may have made room once more.
	if idleClosed != float64(nClosed) && idleClosed != float64(nClosed+1) {
		t.Errorf("ratelimitd_connections_idle_closed_total %v, want the %d connections the server closed (or one more)", idleClosed, nClosed)
	}
	if nClosed < extra {
		t.Errorf("the server closed %d connections, want at least %d", nClosed, extra)
	}
	if reached := m[`ratelimitd_connections_cap_reached_total{listener="public"}`]; reached < extra {
		t.Errorf("ratelimitd_connections_cap_reached_total %v, want at least %d", reached, extra)
	}

	line, err := d.logs.waitLine(pollTimeout, d.exited, func(rec logRecord) bool {
		return strings.HasPrefix(rec["msg"], "connection cap reached") && rec["listener"] == "public"
	})
	if err != nil {
		t.Fatalf("no log line about the cap: %v\n%s", err, d.logs)
	}
	if line["max_conns"] != "8" || line["level"] != "WARN" {
		t.Errorf("cap line %v: want level WARN and max_conns 8", line)
	}
	// Rate-limited: one line for all the times the cap was reached.
	lines, _ := d.logs.lines()
	n := 0
	for _, l := range lines {
		if strings.Contains(l, "connection cap reached") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("got %d log lines about the cap, want 1 (rate-limited)", n)
	}
	// Still serving.
	if r := dialRaw(t, addr).get(t, "/healthz", true); r.status != http.StatusOK {
		t.Errorf("GET /healthz at the end: got %v, want 200", r)
	}
}

// TestE2EMaxConnsAdmin: the admin listener has its own cap, counted under
// its own label.
func TestE2EMaxConnsAdmin(t *testing.T) {
	t.Parallel()
	d, _, admin := startRulesDaemon(t, "--max-conns", "2")
	adminAddr := strings.TrimPrefix(admin, "http://")
	for i := range 5 {
		c := dialRaw(t, adminAddr)
		if r := c.get(t, "/healthz", false); r.status != http.StatusOK {
			t.Fatalf("admin connection %d: got %v, want 200", i+1, r)
		}
	}
	r := dialRaw(t, strings.TrimPrefix(d.base, "http://")).get(t, "/metrics", true)
	m := samples(t, r.body)
	if got := m[`ratelimitd_connections_max{listener="admin"}`]; got != 2 {
		t.Errorf(`ratelimitd_connections_max{listener="admin"} %v, want 2`, got)
	}
	if got := m[`ratelimitd_connections{listener="admin"}`]; got > 2 || got < 1 {
		t.Errorf(`ratelimitd_connections{listener="admin"} %v, want 1 or 2`, got)
	}
	if got := m[`ratelimitd_connections_idle_closed_total{listener="admin"}`]; got < 3 {
		t.Errorf(`ratelimitd_connections_idle_closed_total{listener="admin"} %v, want at least 3`, got)
	}
	if got := m[`ratelimitd_connections_cap_reached_total{listener="public"}`]; got != 0 {
		t.Errorf(`ratelimitd_connections_cap_reached_total{listener="public"} %v, want 0: the caps are per listener`, got)
	}
}

// TestE2EMaxConnsProxy: in proxy mode the public listener is named proxy
// and its cap holds as in server mode: 5 keep-alive clients behind a cap of 3
// are all proxied; the series are on the admin listener, with /metrics.
func TestE2EMaxConnsProxy(t *testing.T) {
	t.Parallel()
	up, hits := countingUpstream(t)
	d, _, admin := startRulesDaemon(t, "--proxy-upstream", up.URL, "--client-limit", "100/1h", "--max-conns", "3")
	proxyAddr := strings.TrimPrefix(d.base, "http://")
	for i := range 5 {
		c := dialRaw(t, proxyAddr)
		if r := c.get(t, fmt.Sprintf("/items/%d", i), false); r.status != http.StatusOK || !strings.HasPrefix(string(r.body), fmt.Sprintf("GET /items/%d ", i)) {
			t.Fatalf("proxied request %d: got %v, want 200 from the upstream", i+1, r)
		}
	}
	if got := hits.Load(); got != 5 {
		t.Errorf("the upstream saw %d requests, want 5", got)
	}
	r := adminDo(t, "GET", admin+"/metrics", adminToken, "")
	m := samples(t, r.body)
	if got := m[`ratelimitd_connections_max{listener="proxy"}`]; got != 3 {
		t.Errorf(`ratelimitd_connections_max{listener="proxy"} %v, want 3`, got)
	}
	if got := m[`ratelimitd_connections{listener="proxy"}`]; got < 1 || got > 3 {
		t.Errorf(`ratelimitd_connections{listener="proxy"} %v, want 1 to 3`, got)
	}
	if got := m[`ratelimitd_connections_idle_closed_total{listener="proxy"}`]; got < 2 {
		t.Errorf(`ratelimitd_connections_idle_closed_total{listener="proxy"} %v, want at least 2`, got)
	}
}
