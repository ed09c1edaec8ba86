package actors

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/internal/certtest"
	"github.com/ratelimitd/ratelimitd/actors/internal/etcdtest"
	"github.com/ratelimitd/ratelimitd/table"
)

// TestClusterTLS: two members speaking mutual TLS to each other and to an
// etcd that requires client certificates stay exact across forwarding.
func TestClusterTLS(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "cluster")
	tc := &testCluster{t: t, etcd: etcdtest.StartTLS(t, ca), name: strings.ReplaceAll(t.Name(), "/", "-"), ev: newEvents()}
	config := func(id string) Config {
		cfg := tc.config(id)
		cfg.Cluster.TLS = certtest.Mutual(ca, ca.Issue(t, id, "127.0.0.1"))
		cfg.Cluster.EtcdTLS = certtest.Mutual(ca, ca.Issue(t, id+"-etcd-client"))
		return cfg
	}
	a := tc.start(config("a"))
	b := tc.start(config("b"))
	tc.settle(a, b)
	// A client with no certificate is refused at a's member port.
	conn, err := tls.Dial("tcp", a.cl.addr, &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2"}})
	if err == nil {
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("a TLS client with no certificate at %s: got %v, want the certificate required alert", a.cl.addr, err)
	}
	// An id b owns: every check made at a crosses to b over TLS.
	id := ownedBy(t, b, "tls-")
	req := table.Request{ID: id, Policy: table.Policy{Scale: time.Hour, Limit: 100}, Hits: 1}
	if allowed, denied := checkConcurrently(t, 200, req, a.System, b.System); allowed != 100 || denied != 100 {
		t.Fatalf("200 checks of limit 100 over two TLS members: %d allowed, %d denied; want 100 and 100", allowed, denied)
	}
	if got := countOf(t, a, req); got != 100 {
		t.Fatalf("count via a: got %d, want 100", got)
	}
	sa, _ := a.ClusterStatus()
	sb, _ := b.ClusterStatus()
	if sa.Stats.ForwardedChecks < 100 || sb.Stats.ReceivedChecks < 100 {
		t.Fatalf("a forwarded %d checks and b received %d; want at least the 100 made at a",
			sa.Stats.ForwardedChecks, sb.Stats.ReceivedChecks)
	}
}

func TestClusterTLSConfigErrors(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "cluster")
	whole := certtest.Mutual(ca, ca.Issue(t, "member", "127.0.0.1"))
	for _, tc := range []struct {
		name    string
		etcd    []string
		tls     *tls.Config
		etcdTLS *tls.Config
		want    string // "" for accepted
	}{
		{"https without EtcdTLS", []string{"http://127.0.0.1:2379", "https://127.0.0.1:2380"}, nil, nil, "Cluster.Etcd endpoint https://127.0.0.1:2380 is https: set Cluster.EtcdTLS"},
		{"EtcdTLS with http", []string{"https://127.0.0.1:2379", "http://127.0.0.1:2380"}, nil, whole, "Cluster.EtcdTLS is set, so every Cluster.Etcd endpoint must be https://, not http://127.0.0.1:2380"},
		{"EtcdTLS without a scheme", []string{"127.0.0.1:2379"}, nil, whole, "must be https://, not 127.0.0.1:2379"},
		{"TLS without ClientCAs", []string{"http://127.0.0.1:2379"}, &tls.Config{Certificates: whole.Certificates}, nil, "Cluster.TLS: peer: TLS config: no ClientCAs"},
		{"TLS without a certificate", []string{"http://127.0.0.1:2379"}, &tls.Config{ClientCAs: ca.Pool()}, nil, "Cluster.TLS: peer: TLS config: no certificate"},
		{"TLS and EtcdTLS", []string{"https://127.0.0.1:2379"}, whole, whole, ""},
		{"plain", []string{"http://127.0.0.1:2379"}, nil, nil, ""},
	} {
		cc := ClusterConfig{Etcd: tc.etcd, Listen: "127.0.0.1:0", TLS: tc.tls, EtcdTLS: tc.etcdTLS}
		_, err := cc.withDefaults()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: got %v, want accepted", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want ErrConfig saying %q", tc.name, err, tc.want)
		}
	}
}
