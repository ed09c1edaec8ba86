package resp_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/resp"
)

// selfSigned returns a server config with a certificate for 127.0.0.1 and
// a client config that trusts it.
func selfSigned(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	ca := actorstest.NewCA(t, "resp test ca")
	p := ca.Issue(t, "resp test", "127.0.0.1")
	server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{p.TLS}}
	return server, &tls.Config{RootCAs: ca.Pool()}
}

// TestTLS: with TLSConfig, go-redis over TLS gets CL.THROTTLE's exact
// reply; a plaintext client gets no reply; one over MaxConns is refused
// with Redis's error, over TLS.
func TestTLS(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	srvConf, cliConf := selfSigned(t)
	_, addr := startServer(t, resp.Options{Checker: sys, MaxConns: 1, TLSConfig: srvConf})

	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, TLSConfig: cliConf})
	t.Cleanup(func() { _ = c.Close() })
	if got, want := throttle(t, c, "k", 4, 10, 60, 1), []int64{0, 5, 4, -1, 6}; !slices.Equal(got, want) {
		t.Fatalf("CL.THROTTLE over TLS: got %v, want %v", got, want)
	}

	// The one connection is taken: the next is refused, over TLS.
	over, err := tls.Dial("tcp", addr, cliConf)
	if err != nil {
		t.Fatalf("dial over the cap: %v", err)
	}
	defer over.Close()
	_ = over.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(over).ReadString('\n')
	if line != "-ERR max number of clients reached\r\n" {
		t.Errorf("over the cap: got %q, %v, want Redis's max clients error", line, err)
	}
	_ = c.Close()

	plain, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_ = plain.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := plain.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(plain)
	if len(b) > 0 && b[0] == '+' {
		t.Errorf("plaintext PING to a TLS server: got %q, want no Redis reply", b)
	}
}

// TestTLSHandshakeTimeout: a client that connects and sends nothing is
// closed after ReadTimeout, even with no idle timeout.
func TestTLSHandshakeTimeout(t *testing.T) {
	t.Parallel()
	sys, _ := manualSystem(t)
	srvConf, _ := selfSigned(t)
	_, addr := startServer(t, resp.Options{Checker: sys, TLSConfig: srvConf, ReadTimeout: 100 * time.Millisecond, IdleTimeout: -1})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := nc.Read(make([]byte, 1))
	if n != 0 || errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		t.Errorf("silent client: got %d bytes, %v; want the connection closed by the server", n, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
