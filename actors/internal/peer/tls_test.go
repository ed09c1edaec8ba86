package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/internal/certtest"
)

// serveTLS serves an "Echo" call and an "Echoes" stream with tc, counting
// what reaches them.
func serveTLS(t *testing.T, tc *tls.Config) (addr string, served *atomic.Int64) {
	t.Helper()
	served = new(atomic.Int64)
	s := NewServer(map[string]Handler{
		"Echo": func(_ context.Context, req []byte) ([]byte, error) {
			served.Add(1)
			return append([]byte("re:"), req...), nil
		},
	}, tc)
	s.HandleStream("Echoes", func(st *ServerStream) error {
		served.Add(1)
		return echo(st)
	})
	return start(t, s), served
}

func TestTLSCallAndStream(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "members")
	addr, served := serveTLS(t, certtest.Mutual(ca, ca.Issue(t, "server", "127.0.0.1")))
	if err := CheckTLS(certtest.Mutual(ca, ca.Issue(t, "client", "127.0.0.1"))); err != nil {
		t.Fatalf("CheckTLS of a whole config: %v", err)
	}
	c := dial(t, addr, certtest.Mutual(ca, ca.Issue(t, "client", "127.0.0.1")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := c.Call(ctx, "Echo", []byte("call"))
	if err != nil || string(rep) != "re:call" {
		t.Fatalf("Call over mTLS: got %q, %v; want %q", rep, err, "re:call")
	}
	s, err := c.Open(ctx, "Echoes")
	if err != nil {
		t.Fatalf("Open over mTLS: %v", err)
	}
	defer s.Close()
	for _, m := range []string{"one", "two"} {
		if err := s.Send([]byte(m)); err != nil {
			t.Fatalf("Send: %v", err)
		}
		got, err := s.Recv()
		if err != nil || string(got) != "re:"+m {
			t.Fatalf("Recv: got %q, %v; want %q", got, err, "re:"+m)
		}
	}
	s.CloseSend()
	if _, err := s.Recv(); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "ended") {
		t.Fatalf("Recv after CloseSend: got %v, want the stream's end", err)
	}
	if got := served.Load(); got != 2 {
		t.Fatalf("served %d calls and streams, want 2", got)
	}
}

// TestTLSRefuses: every handshake that one side must refuse fails the call
// and the stream's opening as ErrUnreachable, with the TLS reason, and
// nothing reaches the server's handlers.
func TestTLSRefuses(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "members")
	other := certtest.NewCA(t, "intruders")
	good := certtest.Mutual(ca, ca.Issue(t, "server", "127.0.0.1"))
	client := ca.Issue(t, "client", "127.0.0.1")
	intruder := other.Issue(t, "client", "127.0.0.1")
	rotating := &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		// A config of its own, with no ClientAuth: the server still requires one.
		return &tls.Config{Certificates: good.Certificates, ClientCAs: ca.Pool()}, nil
	}}
	for _, tc := range []struct {
		name   string
		server *tls.Config
		client *tls.Config // nil: plain HTTP/2
		// reasons: one of them is in the error's text (a refusal by the
		// server may reach the client as its alert or as a reset, whichever
		// the client reads first).
		reasons []string
	}{
		{"plain client", good, nil, []string{"Unavailable"}},
		{"no client certificate", good, &tls.Config{RootCAs: ca.Pool()}, []string{"certificate required", "connection reset", "broken pipe"}},
		{"no client certificate, GetConfigForClient", rotating, &tls.Config{RootCAs: ca.Pool()}, []string{"certificate required", "connection reset", "broken pipe"}},
		{"client certificate of another CA", good, &tls.Config{RootCAs: ca.Pool(),
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &intruder.TLS, nil }}, []string{"unknown certificate authority", "connection reset", "broken pipe"}},
		{"server's CA not trusted", good, certtest.Mutual(other, intruder), []string{"certificate signed by unknown authority"}},
		{"server's CA not trusted, though the client's is", good, &tls.Config{Certificates: []tls.Certificate{client.TLS}, RootCAs: other.Pool()}, []string{"certificate signed by unknown authority"}},
		{"server name mismatch", certtest.Mutual(ca, ca.Issue(t, "server", "127.0.0.2", "member.example")), certtest.Mutual(ca, client), []string{"not 127.0.0.1"}},
		{"server name mismatch, chain verified by the caller", certtest.Mutual(ca, ca.Issue(t, "server", "127.0.0.2")), &tls.Config{
			Certificates: []tls.Certificate{client.TLS}, InsecureSkipVerify: true,
			VerifyConnection: func(tls.ConnectionState) error { return nil },
		}, []string{"not 127.0.0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr, served := serveTLS(t, tc.server)
			c := dial(t, addr, tc.client)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			says := func(err error) bool {
				return errors.Is(err, ErrUnreachable) && slices.ContainsFunc(tc.reasons, func(r string) bool { return strings.Contains(err.Error(), r) })
			}
			rep, err := c.Call(ctx, "Echo", []byte("call"))
			if !says(err) {
				t.Errorf("Call: got %q, %v; want ErrUnreachable saying one of %q", rep, err, tc.reasons)
			}
			if s, err := c.Open(ctx, "Echoes"); !says(err) {
				if err == nil {
					s.Close()
				}
				t.Errorf("Open: got %v; want ErrUnreachable saying one of %q", err, tc.reasons)
			}
			if ctx.Err() != nil {
				t.Errorf("the refusals took the whole deadline: %v", ctx.Err())
			}
			if got := served.Load(); got != 0 {
				t.Errorf("%d calls or streams reached the server, want 0", got)
			}
		})
	}
}

func TestCheckTLS(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "members")
	p := ca.Issue(t, "member", "127.0.0.1")
	get := func(*tls.ClientHelloInfo) (*tls.Config, error) { return nil, nil }
	getClient := func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &p.TLS, nil }
	for _, tc := range []struct {
		name string
		tc   *tls.Config
		want string // "" for accepted
	}{
		{"whole", certtest.Mutual(ca, p), ""},
		{"rotating", &tls.Config{GetConfigForClient: get, GetClientCertificate: getClient}, ""},
		{"no certificate", &tls.Config{ClientCAs: ca.Pool(), GetClientCertificate: getClient}, "no certificate to serve with"},
		{"no client certificate", &tls.Config{GetConfigForClient: get}, "no client certificate to dial with"},
		{"no ClientCAs", &tls.Config{Certificates: []tls.Certificate{p.TLS}}, "no ClientCAs"},
		{"insecure", &tls.Config{Certificates: []tls.Certificate{p.TLS}, ClientCAs: ca.Pool(), InsecureSkipVerify: true}, "InsecureSkipVerify"},
		{"TLS 1.2 at most", &tls.Config{Certificates: []tls.Certificate{p.TLS}, ClientCAs: ca.Pool(), MaxVersion: tls.VersionTLS12}, "TLS 1.3"},
	} {
		err := CheckTLS(tc.tc)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: got %v, want accepted", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrTLSConfig) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want ErrTLSConfig saying %q", tc.name, err, tc.want)
		}
	}
}

// TestTLSVersion: a member offering TLS 1.2 at most is refused.
func TestTLSVersion(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "members")
	addr, _ := serveTLS(t, certtest.Mutual(ca, ca.Issue(t, "server", "127.0.0.1")))
	cfg := certtest.Mutual(ca, ca.Issue(t, "client", "127.0.0.1"))
	cfg.MaxVersion = tls.VersionTLS12
	conn, err := tls.Dial("tcp", addr, cfg)
	if err == nil {
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil || err == io.EOF || !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("a TLS 1.2 client: got %v, want a protocol version alert", err)
	}
}
