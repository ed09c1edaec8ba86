package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"
)

// clusterTLSFiles are the PEM files of one TLS side of a member (the
// member transport, or the etcd client): a certificate and its key, a CA,
// any of them unset. They are read at the start and reloaded as the
// listeners' files are (see reloading): looked at on a handshake at most
// once per fileCheckInterval, a change that does not load keeping what was
// loaded before.
type clusterTLSFiles struct {
	prefix string    // of the flags: prefix-cert, -key and -ca
	paths  [3]string // of the cert, the key and the CA; "" for unset

	cert *certFiles // nil until load, and without a certificate
	ca   *caFiles   // nil until load, and without a CA: the system's roots
}

// clusterTLSSuffixes are the suffixes of the flags of the paths, in order.
var clusterTLSSuffixes = [3]string{"-cert", "-key", "-ca"}

// on reports whether any of the files is set; f may be nil.
func (f *clusterTLSFiles) on() bool {
	return f != nil && (f.paths[0] != "" || f.paths[1] != "" || f.paths[2] != "")
}

// file is the i-th file (0 the cert, 1 the key, 2 the CA) under its flag.
func (f *clusterTLSFiles) file(i int) tlsFile {
	return tlsFile{"--" + f.prefix + clusterTLSSuffixes[i], f.paths[i]}
}

// load reads the files that are set; clock times the looks at them. Their
// reloads are not logged until setLogger. An error names the flag, the
// file and what is wrong with it.
func (f *clusterTLSFiles) load(clock func() time.Time) error {
	discard := slog.New(slog.DiscardHandler)
	if f.paths[0] != "" {
		cert, err := newCertFiles(f.file(0), f.file(1), clock, discard)
		if err != nil {
			return err
		}
		f.cert = cert
	}
	if f.paths[2] != "" {
		ca, err := newCAFiles(f.file(2), clock, discard)
		if err != nil {
			return err
		}
		f.ca = ca
	}
	return nil
}

// setLogger makes the loaded files log their reloads to log.
func (f *clusterTLSFiles) setLogger(log *slog.Logger) {
	if f.cert != nil {
		f.cert.setLog(log)
	}
	if f.ca != nil {
		f.ca.setLog(log)
	}
}

// verify verifies a peer's chain (as sent, leaf first) against the CA
// pool as it is now (the system's roots without a CA), for usage.
func (f *clusterTLSFiles) verify(certs []*x509.Certificate, usage x509.ExtKeyUsage) error {
	if len(certs) == 0 {
		return errors.New("no certificate presented")
	}
	opts := x509.VerifyOptions{Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{usage}}
	if f.ca != nil {
		opts.Roots = f.ca.Pool()
	}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := certs[0].Verify(opts)
	return err
}

// memberConfig is the TLS config of the member transport, whose files
// are all set: the certificate and the CA of the moment serve each new
// connection (the CA verifying the members' client certificates) and dial
// it (the CA verifying the member's certificate, whose name actors checks
// against its address).
func (f *clusterTLSFiles) memberConfig() *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		GetConfigForClient:   clientAuthConfig(tls.VersionTLS13, nil, f.cert, f.ca),
		GetClientCertificate: f.cert.GetClientCertificate,
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
func (f *clusterTLSFiles) etcdConfig(endpoints []string) *tls.Config {
	var hosts []string
	for _, e := range endpoints {
		if u, err := url.Parse(e); err == nil {
			hosts = append(hosts, u.Hostname())
		}
	}
	return &tls.Config{
		GetClientCertificate: func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if f.cert != nil {
				return f.cert.GetClientCertificate(cri)
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
// and the endpoints, and loads their files, looked at again on the wall
// clock.
func checkClusterTLS(c *clusterConfig) error {
	m, e := c.memberTLS, c.etcdTLS
	switch {
	case len(c.etcd) == 0 && (m.on() || e.on()):
		return errors.New("--cluster-tls-* and --cluster-etcd-{cert,key,ca} need cluster mode (--cluster-etcd)")
	case m.on() && (m.paths[0] == "" || m.paths[1] == "" || m.paths[2] == ""):
		return errors.New("--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca go together: set all three or none")
	case e.on() && (e.paths[0] == "") != (e.paths[1] == ""):
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
		if err := m.load(time.Now); err != nil {
			return err
		}
	}
	if e.on() {
		if err := e.load(time.Now); err != nil {
			return err
		}
	}
	return nil
}
