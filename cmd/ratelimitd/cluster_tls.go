package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
)

// tlsFiles are the PEM files of one TLS side of a member (the member
// transport, or the etcd client): a certificate and its key, a CA, any of
// them unset. What they hold is read at the start, and again at a
// handshake after any of them changed (its identity, modification time or
// size): a change that does not load (a file half written, a key that
// does not match) keeps what was loaded before, logged once per change.
type tlsFiles struct {
	flags                     [3]string // of the cert, the key and the CA, for messages
	certPath, keyPath, caPath string

	mu    sync.Mutex
	log   *slog.Logger   // nil until the daemon's logger exists
	seen  [3]os.FileInfo // of the files as last read, or tried
	cert  *tls.Certificate
	pool  *x509.CertPool // nil: the system's roots
	paths [3]*string
}

// newTLSFiles returns the files of the flags prefix-cert, -key and -ca.
func newTLSFiles(prefix string) *tlsFiles {
	f := &tlsFiles{flags: [3]string{"--" + prefix + "-cert", "--" + prefix + "-key", "--" + prefix + "-ca"}}
	f.paths = [3]*string{&f.certPath, &f.keyPath, &f.caPath}
	return f
}

// on reports whether any of the files is set; f may be nil.
func (f *tlsFiles) on() bool {
	return f != nil && (f.certPath != "" || f.keyPath != "" || f.caPath != "")
}

// load reads the files at the start; its error names the flag of the file
// at fault and what is wrong with it.
func (f *tlsFiles) load() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, p := range f.paths {
		if *p == "" {
			continue
		}
		fi, err := os.Stat(*p)
		if err != nil {
			return fmt.Errorf("%s %s: %w", f.flags[i], *p, errors.Unwrap(err))
		}
		f.seen[i] = fi
	}
	cert, pool, err := f.read()
	if err != nil {
		return err
	}
	f.cert, f.pool = cert, pool
	return nil
}

// read reads and checks the files that are set.
func (f *tlsFiles) read() (*tls.Certificate, *x509.CertPool, error) {
	var cert *tls.Certificate
	if f.certPath != "" {
		certPEM, err := readPEM(f.flags[0], f.certPath, "CERTIFICATE")
		if err != nil {
			return nil, nil, err
		}
		keyPEM, err := readPEM(f.flags[1], f.keyPath, "")
		if err != nil {
			return nil, nil, err
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: not the key of %s %s: %w", f.flags[1], f.keyPath, f.flags[0], f.certPath, err)
		}
		cert = &c
	}
	var pool *x509.CertPool
	if f.caPath != "" {
		caPEM, err := readPEM(f.flags[2], f.caPath, "CERTIFICATE")
		if err != nil {
			return nil, nil, err
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, nil, fmt.Errorf("%s %s: holds no valid CA certificate", f.flags[2], f.caPath)
		}
	}
	return cert, pool, nil
}

// readPEM reads the file of flag, which must hold a PEM block (of type
// typ, unless typ is empty).
func readPEM(flag, path, typ string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, errors.Unwrap(err))
	}
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			what := "PEM block"
			if typ != "" {
				what = "PEM " + typ + " block"
			}
			return nil, fmt.Errorf("%s %s: holds no %s", flag, path, what)
		}
		if typ == "" || blk.Type == typ {
			return b, nil
		}
	}
}

// current returns the certificate and the CA pool, read again first if a
// file changed since.
func (f *tlsFiles) current() (*tls.Certificate, *x509.CertPool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	changed := false
	var now [3]os.FileInfo
	for i, p := range f.paths {
		if *p == "" {
			continue
		}
		fi, err := os.Stat(*p)
		if err != nil {
			// Gone for a moment (a rename, a mount update): keep what was read.
			return f.cert, f.pool
		}
		now[i] = fi
		if old := f.seen[i]; old == nil || !os.SameFile(old, fi) || !old.ModTime().Equal(fi.ModTime()) || old.Size() != fi.Size() {
			changed = true
		}
	}
	if !changed {
		return f.cert, f.pool
	}
	f.seen = now
	cert, pool, err := f.read()
	if err != nil {
		if f.log != nil {
			f.log.Warn("cluster TLS files changed but do not load; keeping the certificates loaded before", "err", err)
		}
		return f.cert, f.pool
	}
	f.cert, f.pool = cert, pool
	if f.log != nil {
		attrs := []any{"flags", f.flags[0] + "," + f.flags[1] + "," + f.flags[2]}
		if cert != nil && cert.Leaf != nil {
			attrs = append(attrs, "serial", cert.Leaf.SerialNumber.String(), "not_after", cert.Leaf.NotAfter)
		}
		f.log.Info("cluster TLS files reloaded", attrs...)
	}
	return f.cert, f.pool
}

// setLogger makes f log its reloads to log.
func (f *tlsFiles) setLogger(log *slog.Logger) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = log
}

// verify verifies a peer's chain (as sent, leaf first) against the CA
// pool as it is now, for usage.
func (f *tlsFiles) verify(certs []*x509.Certificate, usage x509.ExtKeyUsage) error {
	if len(certs) == 0 {
		return errors.New("no certificate presented")
	}
	_, pool := f.current()
	opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{usage}}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := certs[0].Verify(opts)
	return err
}

// memberConfig is the TLS config of the member transport: the certificate
// and the CA of the moment serve each new connection (the CA verifying
// the members' client certificates) and dial it (the CA verifying the
// member's certificate, whose name actors checks against its address).
func (f *tlsFiles) memberConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := f.current()
			return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{*cert}, ClientCAs: pool,
				ClientAuth: tls.RequireAndVerifyClientCert}, nil
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := f.current()
			return cert, nil
		},
		// The chain is verified in VerifyConnection against the CA file as
		// it is now (a fixed RootCAs could not rotate); the host by actors.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if err := f.verify(cs.PeerCertificates, x509.ExtKeyUsageServerAuth); err != nil {
				return fmt.Errorf("member certificate: %w", err)
			}
			return nil
		},
	}
}

// etcdConfig is the TLS config of the etcd client of endpoints: the
// certificate of the moment, if any, when etcd asks for one; etcd's
// certificate verified against the CA file as it is now (the system's
// roots without one) and for the host of one of the endpoints.
func (f *tlsFiles) etcdConfig(endpoints []string) *tls.Config {
	var hosts []string
	for _, e := range endpoints {
		if u, err := url.Parse(e); err == nil {
			hosts = append(hosts, u.Hostname())
		}
	}
	return &tls.Config{
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cert, _ := f.current(); cert != nil {
				return cert, nil
			}
			return &tls.Certificate{}, nil // none: etcd decides whether it needs one
		},
		// The chain and the host are verified in VerifyConnection: the
		// connection does not say which endpoint it is of, and a fixed
		// RootCAs could not rotate.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if err := f.verify(cs.PeerCertificates, x509.ExtKeyUsageServerAuth); err != nil {
				return fmt.Errorf("etcd certificate: %w", err)
			}
			for _, h := range hosts {
				if cs.PeerCertificates[0].VerifyHostname(h) == nil {
					return nil
				}
			}
			return fmt.Errorf("etcd certificate: valid for none of the endpoints' hosts %v", hosts)
		},
	}
}

// checkClusterTLS checks the TLS flags of cluster mode against each other
// and the endpoints, and loads their files.
func checkClusterTLS(c *clusterConfig) error {
	m, e := c.memberTLS, c.etcdTLS
	switch {
	case len(c.etcd) == 0 && (m.on() || e.on()):
		return errors.New("--cluster-tls-* and --cluster-etcd-{cert,key,ca} need cluster mode (--cluster-etcd)")
	case m.on() && (m.certPath == "" || m.keyPath == "" || m.caPath == ""):
		return errors.New("--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca go together: set all three or none")
	case e.on() && (e.certPath == "") != (e.keyPath == ""):
		return errors.New("--cluster-etcd-cert and --cluster-etcd-key go together: set both or neither")
	}
	for _, ep := range c.etcd {
		if u, _ := url.Parse(ep); u != nil {
			switch {
			case u.Scheme == "https" && !e.on():
				return fmt.Errorf("--cluster-etcd %s is https: set --cluster-etcd-ca (and --cluster-etcd-cert and --cluster-etcd-key if etcd requires client certificates)", ep)
			case u.Scheme != "https" && e.on():
				return fmt.Errorf("--cluster-etcd %s is not https, but --cluster-etcd-{cert,key,ca} are set: etcd endpoints must all be https with them", ep)
			}
		}
	}
	if m.on() {
		if err := m.load(); err != nil {
			return err
		}
	}
	if e.on() {
		if err := e.load(); err != nil {
			return err
		}
	}
	return nil
}
