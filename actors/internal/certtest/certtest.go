// Package certtest makes certificate authorities and the certificates
// they sign, in memory, for the TLS tests: ECDSA P-256 keys, valid from
// an hour ago for a day, usable for both server and client
// authentication. Nothing it makes is fit for production.
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// CA is a certificate authority of one test.
type CA struct {
	// Cert is the CA's certificate; PEM is it PEM-encoded.
	Cert *x509.Certificate
	PEM  []byte

	key *ecdsa.PrivateKey
}

// Pair is a certificate and its key, as crypto/tls takes them and as PEM.
type Pair struct {
	TLS     tls.Certificate
	Leaf    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA makes a self-signed CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Pool returns a pool of the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue makes a certificate signed by ca for name, with hosts as its
// subject alternative names: IP SANs for IP addresses, DNS SANs for the
// others.
func (ca *CA) Issue(t testing.TB, name string, hosts ...string) Pair {
	t.Helper()
	return ca.issue(t, serial(t), name, hosts)
}

// IssueSerial is Issue of a certificate whose serial number is n, for a
// test that tells certificates apart by their serials.
func (ca *CA) IssueSerial(t testing.TB, n int64, name string, hosts ...string) Pair {
	t.Helper()
	return ca.issue(t, big.NewInt(n), name, hosts)
}

// issue makes the certificate of Issue and IssueSerial.
func (ca *CA) issue(t testing.TB, n *big.Int, name string, hosts []string) Pair {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: n,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		Leaf:    leaf,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// Mutual returns a config that serves and dials with p, and trusts ca
// for both server and client certificates.
func Mutual(ca *CA, p Pair) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.TLS}, RootCAs: ca.Pool(), ClientCAs: ca.Pool()}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
