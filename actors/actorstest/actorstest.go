// Package actorstest starts real actor systems for the tests of the
// packages that use one (the transports, the Go client): each in memory
// unless its Config says otherwise, and stopped when its test ends.
// actors' own tests keep their helpers: an internal test cannot import a
// package that imports actors.
package actorstest

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/actors/internal/certtest"
	"github.com/ratelimitd/ratelimitd/actors/internal/etcdtest"
)

// StartSystem starts a System of the default config, stopped (and its Stop
// checked) when the test ends.
func StartSystem(t testing.TB) *actors.System {
	t.Helper()
	return StartSystemWith(t, actors.Config{})
}

// StartSystemWith is StartSystem of cfg.
func StartSystemWith(t testing.TB, cfg actors.Config) *actors.System {
	t.Helper()
	sys, err := actors.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("actors.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := sys.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return sys
}

// ClockStart is where the manual clocks of StartClocked start: a time on a
// whole hour, so that every window of a whole number of seconds up to an
// hour starts there and reset times are exact.
func ClockStart() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }

// StartClocked is StartSystem of one shard on a manual clock reading
// ClockStart, without sweeps. Time moves only when the test advances the
// clock it returns.
func StartClocked(t testing.TB) (*actors.System, *clocktest.Manual) {
	t.Helper()
	return StartClockedWith(t, actors.Config{})
}

// StartClockedWith is StartClocked with cfg's other fields.
func StartClockedWith(t testing.TB, cfg actors.Config) (*actors.System, *clocktest.Manual) {
	t.Helper()
	clk := clocktest.New(ClockStart())
	cfg.Clock, cfg.Shards, cfg.SweepInterval = clk, 1, -1
	return StartSystemWith(t, cfg), clk
}

// Etcd is an etcd server of one test (see StartEtcd).
type Etcd = etcdtest.Etcd

// StartEtcd starts a real etcd for t on free loopback ports, killed when
// t ends (Etcd.Kill and Etcd.Restart stop and start it meanwhile); a
// machine without the etcd binary skips t.
func StartEtcd(t testing.TB) *Etcd { return etcdtest.Start(t) }

// StartEtcdTLS is StartEtcd of an etcd that serves https with a
// certificate of ca for 127.0.0.1 and requires client certificates ca
// signed.
func StartEtcdTLS(t testing.TB, ca *CA) *Etcd { return etcdtest.StartTLS(t, ca) }

// CA is a certificate authority of one test, in memory (see NewCA).
type CA = certtest.CA

// CertPair is a certificate CA.Issue made, with its key, as crypto/tls
// takes them and as PEM.
type CertPair = certtest.Pair

// NewCA makes a self-signed CA named name, whose Issue signs certificates
// usable for both server and client authentication.
func NewCA(t testing.TB, name string) *CA { return certtest.NewCA(t, name) }
