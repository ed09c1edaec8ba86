package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"log/slog"
	"time"
)

// tlsConfig is what the TLS flags say. Its zero value is plain TCP.
type tlsConfig struct {
	certFile, keyFile string // both or neither
	clientCAFile      string // only with certFile
}

// listenerTLSFlags defines the flags of TLS on the client-facing listeners.
func listenerTLSFlags(fs *flag.FlagSet, cfg *config) {
	fs.StringVar(&cfg.tls.certFile, "tls-cert", "", "PEM `file` of the certificate chain (the leaf first): with --tls-key, every client-facing listener that is on (public or proxy, admin, gRPC, Redis protocol) serves TLS only, at least TLS 1.2; re-read when it changes")
	fs.StringVar(&cfg.tls.keyFile, "tls-key", "", "PEM `file` of the private key of --tls-cert; re-read when it changes")
	fs.StringVar(&cfg.tls.clientCAFile, "tls-client-ca", "", "PEM `file` of CA certificates: every TLS listener then requires a client certificate issued by one of them; only with --tls-cert; re-read when it changes")
}

// check reports a bad combination of the TLS flags.
func (c tlsConfig) check() error {
	switch {
	case c.certFile != "" && c.keyFile == "":
		return errors.New("--tls-cert needs --tls-key, the file of its private key")
	case c.keyFile != "" && c.certFile == "":
		return errors.New("--tls-key needs --tls-cert, the file of its certificate")
	case c.clientCAFile != "" && c.certFile == "":
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key: client certificates are asked for over TLS only")
	}
	return nil
}

// listenerTLS is the TLS of the client-facing listeners: the certificate
// they present and, with --tls-client-ca, the CAs that must have issued
// the clients' certificates. A nil *listenerTLS is plain TCP.
type listenerTLS struct {
	cert *certFiles
	ca   *caFiles // nil: no client certificate asked for
}

// loadListenerTLS loads the files of the TLS flags, or returns nil without
// --tls-cert. An error names the flag, the file and its problem.
func loadListenerTLS(c tlsConfig, clock func() time.Time, log *slog.Logger) (*listenerTLS, error) {
	if c.certFile == "" {
		return nil, nil
	}
	log = log.With("component", "tls")
	cert, err := newCertFiles(tlsFile{"--tls-cert", c.certFile}, tlsFile{"--tls-key", c.keyFile}, clock, log)
	if err != nil {
		return nil, err
	}
	l := &listenerTLS{cert: cert}
	if c.clientCAFile != "" {
		if l.ca, err = newCAFiles(tlsFile{"--tls-client-ca", c.clientCAFile}, clock, log); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// ALPN protocols of the listeners.
var (
	alpnHTTP = []string{"h2", "http/1.1"}
	alpnGRPC = []string{"h2"}
)

// config returns the server config of a listener speaking the ALPN
// protocols protos (none for the Redis protocol), or nil for a nil l.
// Each handshake gets the current certificate and CA pool.
func (l *listenerTLS) config(protos []string) *tls.Config {
	if l == nil {
		return nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: protos, GetCertificate: l.cert.GetCertificate}
	if l.ca == nil {
		return c
	}
	c.ClientAuth = tls.RequireAndVerifyClientCert
	c.ClientCAs = l.ca.Pool()
	// The pool of this handshake, which a rotated CA file changes.
	c.GetConfigForClient = clientAuthConfig(tls.VersionTLS12, protos, l.cert, l.ca)
	return c
}
