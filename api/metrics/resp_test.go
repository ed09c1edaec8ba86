package metrics_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/api/resp"
)

// TestRESPObserver: the Redis protocol server's commands (by command and
// result), pipelines and connections show in the scrape with their exact
// counts.
func TestRESPObserver(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	obs := m.ObserveRESP(7)
	sys, _ := actorstest.StartClocked(t) // a clock that does not move: exact replies
	srv, err := resp.New(resp.Options{Checker: sys, Observer: obs, Password: "sesame"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	scrape := httptest.NewServer(m.Handler())
	t.Cleanup(scrape.Close)

	ctx := context.Background()
	c := dial(t, ln.Addr().String())
	c.roundTrip(t, frame("AUTH", "sesame"), "+OK\r\n")
	c.roundTrip(t, frame("CL.THROTTLE", "k", "1", "1", "60")+ // allowed, allowed, denied
		frame("CL.THROTTLE", "k", "1", "1", "60")+
		frame("CL.THROTTLE", "k", "1", "1", "60")+
		frame("CL.THROTTLE", "k", "x", "1", "60")+ // invalid, outside the batch
		frame("RL.CHECK", "id", "1m", "5"), // allowed
		"*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n",
		"*5\r\n:0\r\n:2\r\n:0\r\n:-1\r\n:120\r\n",
		"*5\r\n:1\r\n:2\r\n:0\r\n:60\r\n:120\r\n",
		"-Cell error: Store error: Couldn't parse as integer: x\r\n",
		"*6\r\n:1\r\n:1\r\n:5\r\n:4\r\n:60000\r\n:0\r\n")
	c.roundTrip(t, frame("PING"), "+PONG\r\n")
	if got := apitest.Scrape(t, scrape.URL)["ratelimitd_redis_connections"]; got != "1" {
		t.Errorf("open connections: got %q, want 1", got)
	}
	c.roundTrip(t, frame("QUIT"), "+OK\r\n")
	wrong := dial(t, ln.Addr().String())
	wrong.roundTrip(t, frame("AUTH", "nope"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n")
	wrong.roundTrip(t, frame("PING"), "-NOAUTH Authentication required.\r\n")
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, resp.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}

	got := apitest.Scrape(t, scrape.URL)
	want := map[string]string{
		`ratelimitd_redis_commands_total{command="auth",result="ok"}`:             "1",
		`ratelimitd_redis_commands_total{command="auth",result="wrongpass"}`:      "1",
		`ratelimitd_redis_commands_total{command="cl.throttle",result="allowed"}`: "2",
		`ratelimitd_redis_commands_total{command="cl.throttle",result="denied"}`:  "1",
		`ratelimitd_redis_commands_total{command="cl.throttle",result="invalid"}`: "1",
		`ratelimitd_redis_commands_total{command="rl.check",result="allowed"}`:    "1",
		`ratelimitd_redis_commands_total{command="ping",result="ok"}`:             "1",
		`ratelimitd_redis_commands_total{command="ping",result="noauth"}`:         "1",
		`ratelimitd_redis_commands_total{command="quit",result="ok"}`:             "1",
		`ratelimitd_redis_pipeline_checks_count`:                                  "1",
		`ratelimitd_redis_pipeline_checks_sum`:                                    "4",
		`ratelimitd_redis_pipeline_checks_bucket{le="2"}`:                         "0",
		`ratelimitd_redis_pipeline_checks_bucket{le="4"}`:                         "1",
		`ratelimitd_redis_connection_events_total{event="opened"}`:                "2",
		`ratelimitd_redis_connection_events_total{event="closed"}`:                "2",
		`ratelimitd_redis_connection_events_total{event="rejected"}`:              "0",
		`ratelimitd_redis_connection_events_total{event="protocol_error"}`:        "0",
		`ratelimitd_redis_connection_events_total{event="timed_out"}`:             "0",
		`ratelimitd_redis_connections`:                                            "0",
		`ratelimitd_redis_connections_max`:                                        "7",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("got %s %q, want %q", k, got[k], v)
		}
	}
	var series int
	for k := range got {
		if strings.HasPrefix(k, "ratelimitd_redis_commands_total{") {
			series++
		}
	}
	if series != 9 {
		t.Errorf("got %d ratelimitd_redis_commands_total series, want the 9 seen", series)
	}
}

// respConn is a plain connection to a RESP server.
type respConn struct {
	nc net.Conn
	rd *bufio.Reader
}

func dial(t *testing.T, addr string) *respConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(time.Minute))
	return &respConn{nc: nc, rd: bufio.NewReader(nc)}
}

// roundTrip sends req and reads the replies want, whose lines it compares.
func (c *respConn) roundTrip(t *testing.T, req string, want ...string) {
	t.Helper()
	if _, err := c.nc.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		got := make([]byte, len(w))
		if _, err := io.ReadFull(c.rd, got); err != nil || string(got) != w {
			t.Fatalf("reply %d to %q: got %q, %v; want %q", i, req, got, err, w)
		}
	}
}

// frame is the RESP encoding of a command.
func frame(args ...string) string {
	s := "*" + strconv.Itoa(len(args)) + "\r\n"
	for _, a := range args {
		s += "$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n"
	}
	return s
}
