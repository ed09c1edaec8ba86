package main

import (
	"time"

	"github.com/ratelimitd/ratelimitd/api/metrics"
)

// observeFiles counts in prom the reloads of every file the daemon re-reads
// when it changes (ratelimitd_file_reloads_total{file}, file its flag),
// and exposes when each certificate it presents expires
// (ratelimitd_tls_certificate_expiry_timestamp_seconds{file}): the
// listeners' (lt), the cluster members' and the one it shows etcd, the
// admin tokens and the Redis passwords. Nil arguments, and files not set,
// are skipped.
func observeFiles(prom *metrics.Metrics, cfg *config, lt *listenerTLS, adminTokens *reloading[[]string]) {
	cert := func(flag string, c *certFiles) {
		if c != nil {
			c.r.count(prom.FileReloads(flag))
			prom.ObserveCertificate(flag, func() time.Time { return c.r.current().Leaf.NotAfter })
		}
	}
	ca := func(flag string, c *caFiles) {
		if c != nil {
			c.r.count(prom.FileReloads(flag))
		}
	}
	secrets := func(flag string, r *reloading[[]string]) {
		if r != nil {
			r.count(prom.FileReloads(flag))
		}
	}
	if lt != nil {
		cert("--tls-cert", lt.cert)
		ca("--tls-client-ca", lt.ca)
	}
	for _, f := range []*clusterTLSFiles{cfg.cluster.memberTLS, cfg.cluster.etcdTLS} {
		if f.on() {
			cert(f.file(0).name, f.cert)
			ca(f.file(2).name, f.ca)
		}
	}
	secrets("--admin-token-file", adminTokens)
	secrets("--redis-password-file", cfg.redis.passwords)
}
