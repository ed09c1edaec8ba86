package main

import (
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/metrics"
)

// clusterConfig is what the cluster flags say; etcd empty is no cluster.
type clusterConfig struct {
	etcd      []string
	listen    string
	advertise string
	name      string
	lease     time.Duration
	vshards   int
	onError   actors.FailurePolicy
	timeout   time.Duration    // how long a check waits for its owner
	forward   time.Duration    // how long one forwarded batch may take
	memberTLS *clusterTLSFiles // --cluster-tls-*: mutual TLS between the members; nil without them
	etcdTLS   *clusterTLSFiles // --cluster-etcd-{cert,key,ca}: TLS to etcd; nil without them
}

func defaultClusterConfig() clusterConfig {
	return clusterConfig{
		listen:  "127.0.0.1:7946",
		name:    actors.DefaultClusterName,
		lease:   actors.DefaultLease,
		vshards: actors.DefaultVShards,
		timeout: actors.DefaultClusterTimeout,
		forward: actors.DefaultForwardTimeout,
	}
}

// clusterFlags defines the flags of cluster mode.
func clusterFlags(fs *flag.FlagSet, cfg *config) {
	c := &cfg.cluster
	fs.Func("cluster-etcd", "comma-separated etcd `URLs` (http://host:port, or https://host:port with --cluster-etcd-ca); turns cluster mode on: this process is one member of a limiter whose membership and vshard owners live in that etcd (default: off, one process)", func(s string) error {
		var eps []string
		for e := range strings.SplitSeq(s, ",") {
			u, err := url.Parse(strings.TrimSpace(e))
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
				return errors.New("must be comma-separated http or https URLs with a host and a port, such as http://127.0.0.1:2379")
			}
			eps = append(eps, u.Scheme+"://"+u.Host)
		}
		c.etcd = eps
		return nil
	})
	addrFlag(fs, &c.listen, "cluster-listen", "`address` (host:port) the other members send forwarded checks and handoffs to; without --cluster-tls-cert it has no TLS and no authentication: keep it on a private network then (default 127.0.0.1:7946)")
	fs.Func("cluster-advertise", "`address` (host:port) the other members reach this one at (default: the --cluster-listen address)", func(s string) error {
		if err := checkListenAddr(s); err != nil {
			return err
		}
		if h, p, _ := net.SplitHostPort(s); h == "" || p == "0" {
			return errors.New("must be host:port with a host and a port other than 0")
		}
		c.advertise = s
		return nil
	})
	fs.Func("cluster-name", "the cluster's `name`, the prefix of its keys in etcd: letters, digits, '-', '_' and '.' (default ratelimitd)", func(s string) error {
		if s == "" || len(s) > 64 || strings.TrimLeft(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "" {
			return errors.New("must be 1 to 64 letters, digits, '-', '_' or '.'")
		}
		c.name = s
		return nil
	})
	fs.Func("cluster-lease", "TTL of the member's etcd lease, whole seconds: a member that cannot renew it stops serving before it could expire, and a crashed member's vshards are served again by the others about this long after (default 3s)", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Second || d%time.Second != 0 || d > time.Hour {
			return errors.New("must be a whole number of seconds from 1s to 1h, such as 3s")
		}
		c.lease = d
		return nil
	})
	durationFlag(fs, &c.timeout, "cluster-timeout", "how long a check waits for its vshard's owner, re-routes included, before --on-cluster-error applies", false)
	durationFlag(fs, &c.forward, "cluster-forward-timeout", "how long one forwarded batch may take, from leaving its queue to its answer, before its checks are answered as --on-cluster-error says (a sent batch is never sent again); at most --cluster-timeout", false)
	intFlag(fs, &c.vshards, "cluster-vshards", "`number` of virtual shards ids hash to, fixed for the cluster's life (kept in etcd): a member started with another number is refused (default 1024)", 1, actors.MaxVShards)
	tlsFileFlag(fs, &c.memberTLS, "cluster-tls", 0, "PEM `file` of this member's certificate, presented to the members it serves and to those it dials: with --cluster-tls-key and --cluster-tls-ca, the members speak mutual TLS 1.3; the certificate must name the --cluster-advertise host (an IP SAN for an IP); re-read when it changes")
	tlsFileFlag(fs, &c.memberTLS, "cluster-tls", 1, "PEM `file` of the private key of --cluster-tls-cert; re-read when it changes")
	tlsFileFlag(fs, &c.memberTLS, "cluster-tls", 2, "PEM `file` of the CA certificates that verify the other members' certificates, both as servers and as clients; re-read when it changes")
	tlsFileFlag(fs, &c.etcdTLS, "cluster-etcd", 0, "PEM `file` of the client certificate presented to etcd (with --cluster-etcd-key), for an etcd with --client-cert-auth; re-read when it changes")
	tlsFileFlag(fs, &c.etcdTLS, "cluster-etcd", 1, "PEM `file` of the private key of --cluster-etcd-cert; re-read when it changes")
	tlsFileFlag(fs, &c.etcdTLS, "cluster-etcd", 2, "PEM `file` of the CA certificates that verify etcd's certificate (without it, the system's roots); with any of --cluster-etcd-{cert,key,ca}, every --cluster-etcd URL must be https; re-read when it changes")
	choiceFlag(fs, "on-cluster-error", "what a check does when no member can decide it in time (its owner unreachable, no lease: etcd down): closed answers 503 with Retry-After, open admits it uncounted (default closed)", false, []string{"closed", "open"}, func(i int, _ string) {
		c.onError = []actors.FailurePolicy{actors.FailClosed, actors.FailOpen}[i]
	})
}

// tlsFileFlag defines the flag prefix-cert, -key or -ca (file 0, 1 or 2)
// of the TLS files *p, made at the first of its flags.
func tlsFileFlag(fs *flag.FlagSet, p **clusterTLSFiles, prefix string, file int, usage string) {
	fs.Func(prefix+clusterTLSSuffixes[file], usage, func(s string) error {
		if *p == nil {
			*p = &clusterTLSFiles{prefix: prefix}
		}
		(*p).paths[file] = s
		return nil
	})
}

// clusterActorsConfig is the actors' cluster config of the flags, or nil
// without --cluster-etcd; the TLS files log their reloads to log.
func clusterActorsConfig(c *clusterConfig, log *slog.Logger) *actors.ClusterConfig {
	if len(c.etcd) == 0 {
		return nil
	}
	cc := &actors.ClusterConfig{
		Etcd:           c.etcd,
		Listen:         c.listen,
		Advertise:      c.advertise,
		Name:           c.name,
		Lease:          c.lease,
		VShards:        c.vshards,
		OnError:        c.onError,
		Timeout:        c.timeout,
		ForwardTimeout: c.forward,
	}
	if c.memberTLS.on() {
		c.memberTLS.setLogger(log)
		cc.TLS = c.memberTLS.memberConfig()
	}
	if c.etcdTLS.on() {
		c.etcdTLS.setLogger(log)
		cc.EtcdTLS = c.etcdTLS.etcdConfig(c.etcd)
	}
	return cc
}

// clusterStatus is GET /cluster of the admin API.
func clusterStatus(sys *actors.System) func() any {
	if _, ok := sys.ClusterStatus(); !ok {
		return nil
	}
	return func() any {
		st, _ := sys.ClusterStatus()
		return st
	}
}

// clusterMetrics returns what the cluster metrics read of sys at every
// scrape.
func clusterMetrics(sys *actors.System) func() metrics.ClusterStats {
	return func() metrics.ClusterStats {
		st, _ := sys.ClusterStatus()
		s := st.Stats
		return metrics.ClusterStats{
			ForwardedChecks: s.ForwardedChecks, ForwardedBatches: s.ForwardedBatches, ForwardStreams: s.ForwardStreams,
			BatchSizeBounds: actors.BatchSizeBounds[:], BatchSizes: s.BatchSizes,
			ReceivedChecks: s.ReceivedChecks, ReceivedBatches: s.ReceivedBatches, Duplicates: s.Duplicates,
			Fenced: s.Fenced, Unavailable: s.Unavailable, AdmittedOpen: s.AdmittedOpen,
			HandoffsOut: s.HandoffsOut, HandoffFailures: s.HandoffFailures,
			VShardsOut: s.VShardsOut, VShardsIn: s.VShardsIn, BucketsOut: s.BucketsOut, HandoffNanos: int64(s.HandoffTime),
			Takeovers: s.Takeovers, Claims: s.Claims, OwnershipChanges: s.OwnershipChanges,
			EtcdErrors: s.EtcdErrors, LeaseLapses: s.LeaseLapses,
			Serving: int64(st.Serving), Members: int64(len(st.Members)), LeaseValid: st.LeaseValid, Epoch: st.Epoch,
		}
	}
}
