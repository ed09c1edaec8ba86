package serve

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/gubernator-io/gubernator/v2"
	"github.com/sirupsen/logrus"
)

// runGubernator runs gubernator v2's daemon (gRPC, and its HTTP/JSON
// gateway on listen) as a single node that owns every key, as
// cmd/gubernator would with no peers: the gateway forwards each HTTP
// request to the gRPC server over loopback, as in production.
func runGubernator(ctx context.Context, listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return err
	}
	// The gateway dials GRPCListenAddress as written, so it needs a real port.
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return err
	}
	grpcAddr := net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	_ = ln.Close()

	logger := logrus.New()
	logger.SetOutput(os.Stderr)
	logger.SetLevel(logrus.WarnLevel)
	conf := gubernator.DaemonConfig{
		GRPCListenAddress: grpcAddr,
		HTTPListenAddress: listen,
		AdvertiseAddress:  grpcAddr,
		InstanceID:        "bench",
		Logger:            logger.WithField("category", "gubernator"),
		// No PeerDiscoveryType: this node is set as its only peer below.
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	d, err := gubernator.SpawnDaemon(sctx, conf)
	cancel()
	if err != nil {
		return fmt.Errorf("gubernator: %w", err)
	}
	defer d.Close()
	d.SetPeers([]gubernator.PeerInfo{{
		GRPCAddress: grpcAddr,
		HTTPAddress: d.HTTPListener.Addr().String(),
		IsOwner:     true,
	}})
	logListening(d.HTTPListener.Addr())
	<-ctx.Done()
	return nil
}

// GubernatorBody is the body of POST /v1/GetRateLimits asking one limit
// for id: gubernator's TOKEN_BUCKET (algorithm 0, its default), which hands
// out limit hits per duration and refills them all when the duration
// ends: the equivalent of ratelimitd's fixed_window.
func GubernatorBody(id string, durationMs, limit int64) []byte {
	return fmt.Appendf(nil, `{"requests":[{"name":"bench","unique_key":%q,"hits":1,"limit":%d,"duration":%d,"algorithm":0}]}`, id, limit, durationMs)
}
