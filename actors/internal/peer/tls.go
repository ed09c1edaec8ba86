package peer

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"
)

// ErrTLSConfig: a TLS config that cannot authenticate both ends of a
// member's connections.
var ErrTLSConfig = errors.New("peer: TLS config")

// CheckTLS reports whether tc can serve the other members and dial them
// with mutual TLS: a certificate to present on both sides, the CAs that
// verify the members' client certificates, and a TLS 1.3 ceiling.
func CheckTLS(tc *tls.Config) error {
	switch {
	case tc.GetConfigForClient == nil && len(tc.Certificates) == 0 && tc.GetCertificate == nil:
		return fmt.Errorf("%w: no certificate to serve with (Certificates, GetCertificate or GetConfigForClient)", ErrTLSConfig)
	case len(tc.Certificates) == 0 && tc.GetClientCertificate == nil:
		return fmt.Errorf("%w: no client certificate to dial with (Certificates or GetClientCertificate)", ErrTLSConfig)
	case tc.GetConfigForClient == nil && tc.ClientCAs == nil:
		return fmt.Errorf("%w: no ClientCAs to verify the members' client certificates with", ErrTLSConfig)
	case tc.InsecureSkipVerify && tc.VerifyConnection == nil && tc.VerifyPeerCertificate == nil:
		return fmt.Errorf("%w: InsecureSkipVerify without VerifyConnection or VerifyPeerCertificate would trust any member", ErrTLSConfig)
	case tc.MaxVersion != 0 && tc.MaxVersion < tls.VersionTLS13:
		return fmt.Errorf("%w: MaxVersion is below TLS 1.3, the members' minimum", ErrTLSConfig)
	}
	return nil
}

// mutual makes c require and verify a client certificate, at TLS 1.3 or
// later.
func mutual(c *tls.Config) {
	c.ClientAuth = tls.RequireAndVerifyClientCert
	c.MinVersion = max(c.MinVersion, tls.VersionTLS13)
}

// serverCreds are the credentials of a Server of tc: the config that
// GetConfigForClient returns (for certificates or CAs that rotate) is held
// to the same rules as tc.
func serverCreds(tc *tls.Config) credentials.TransportCredentials {
	c := tc.Clone()
	mutual(c)
	if get := c.GetConfigForClient; get != nil {
		c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			nc, err := get(hello)
			if err != nil || nc == nil {
				return nc, err
			}
			nc = nc.Clone()
			mutual(nc)
			return nc, nil
		}
	}
	return credentials.NewTLS(c)
}

// clientCreds are the credentials of a Client of the member at addr: its
// certificate must name addr's host (an IP SAN for an IP address), also
// when tc verifies the chain itself (InsecureSkipVerify with its own
// VerifyConnection or VerifyPeerCertificate).
func clientCreds(tc *tls.Config, addr string) (credentials.TransportCredentials, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("peer: dial %s: %w", addr, err)
	}
	c := tc.Clone()
	c.MinVersion = max(c.MinVersion, tls.VersionTLS13)
	c.ServerName = host
	verify := c.VerifyConnection
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("peer: member %s presented no certificate", addr)
		}
		if err := cs.PeerCertificates[0].VerifyHostname(host); err != nil {
			return fmt.Errorf("peer: member %s: %w", addr, err)
		}
		if verify != nil {
			return verify(cs)
		}
		return nil
	}
	return credentials.NewTLS(c), nil
}
