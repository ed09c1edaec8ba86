package main

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// fileCheckInterval is the least time between two looks at the stamps
// (modification time and size) of a set of TLS files, or of a secret's
// file: the look is made on a use (a handshake, an AUTH), so a busy
// listener stats its files about once a second, an idle one not at all.
const fileCheckInterval = time.Second

// fileLogInterval is the least time between two log lines about the failed
// reloads of one set of TLS files or of one secret's file; the line counts
// the failures in between.
const fileLogInterval = time.Minute

// maxTLSFileBytes bounds what is read of a certificate, key or CA file.
const maxTLSFileBytes = 1 << 20

// Errors of the TLS files, wrapped with the flag and the path of the file
// they are about. Match them with errors.Is.
var (
	errNotPEM        = errors.New("holds no PEM data")
	errNoCertificate = errors.New("holds no CERTIFICATE block")
	errNoPrivateKey  = errors.New("holds no PRIVATE KEY block")
	errKeyMismatch   = errors.New("holds a private key that does not match the certificate")
	errTooBig        = errors.New("is larger than 1 MiB")
)

// tlsFile is a file of TLS material and the name under which errors and
// logs refer to it (the daemon's flag, such as --tls-cert).
type tlsFile struct {
	name, path string
}

func (f tlsFile) errorf(format string, args ...any) error {
	return fmt.Errorf("%s %s: "+format, append([]any{f.name, f.path}, args...)...)
}

// fileStamp tells whether a file changed since it was read.
type fileStamp struct {
	mod  time.Time
	size int64
}

// reloading holds a value loaded from a set of files and loads it again,
// when a look (at most once per fileCheckInterval of its clock) finds that
// a file's stamp changed. A load that fails keeps the last good value and
// is logged, at most once per fileLogInterval. It is safe for concurrent
// use; a look that is due while another is under way is skipped.
type reloading[T any] struct {
	files    []tlsFile
	load     func(data [][]byte) (*T, error)
	clock    func() time.Time
	describe func(*T) []any // attributes of a reloaded value in its log line; nil for none
	// readFile reads one of the files, whose stamp was just taken; nil
	// reads it whole, refusing one larger than maxTLSFileBytes.
	readFile func(f tlsFile) ([]byte, error)
	// failMsg and okMsg are the messages of a failed and of a successful
	// reload.
	failMsg, okMsg string

	cur atomic.Pointer[T]

	mu       sync.Mutex
	log      *slog.Logger  // of the reloads; replaced by setLog
	counted  func(ok bool) // counts each reload (ok false: refused); nil: none, set by count
	stamps   []fileStamp   // of the files at the last look
	checked  time.Time     // when the files were last looked at
	logged   time.Time     // when a failed reload was last logged
	unlogged int           // failed reloads since
}

// newReloading loads the value from files, returning an error naming the
// file and its problem when it cannot; describe, if not nil, gives the
// attributes of a reloaded value for its log line.
func newReloading[T any](what string, files []tlsFile, load func([][]byte) (*T, error), describe func(*T) []any, clock func() time.Time, log *slog.Logger) (*reloading[T], error) {
	r := &reloading[T]{files: files, load: load, clock: clock, log: log, describe: describe,
		failMsg: "TLS reload failed; keeping the last good " + what, okMsg: "TLS " + what + " reloaded"}
	if err := r.start(); err != nil {
		return nil, err
	}
	return r, nil
}

// start makes the first load, returning an error naming the file and its
// problem when it cannot.
func (r *reloading[T]) start() error {
	stamps, v, err := r.read()
	if err != nil {
		return err
	}
	r.cur.Store(v)
	r.stamps, r.checked = stamps, r.clock()
	return nil
}

// read stats and reads the files, and loads the value from them.
func (r *reloading[T]) read() ([]fileStamp, *T, error) {
	stamps := make([]fileStamp, len(r.files))
	data := make([][]byte, len(r.files))
	for i, f := range r.files {
		st, err := os.Stat(f.path)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f.name, err)
		}
		stamps[i] = fileStamp{st.ModTime(), st.Size()}
		if r.readFile != nil {
			if data[i], err = r.readFile(f); err != nil {
				return stamps, nil, err
			}
			continue
		}
		if st.Size() > maxTLSFileBytes {
			return stamps, nil, f.errorf("%w", errTooBig)
		}
		if data[i], err = os.ReadFile(f.path); err != nil {
			return stamps, nil, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	v, err := r.load(data)
	return stamps, v, err
}

// current returns the value, first reloading it if a look is due and
// finds a changed file.
func (r *reloading[T]) current() *T {
	if r.mu.TryLock() {
		if now := r.clock(); now.Sub(r.checked) >= fileCheckInterval {
			r.checked = now
			r.refreshLocked(now)
		}
		r.mu.Unlock()
	}
	return r.cur.Load()
}

// refreshLocked reloads the value if a file's stamp changed since the last
// look. A file that fails is not read again until its stamp changes again.
func (r *reloading[T]) refreshLocked(now time.Time) {
	changed := false
	for i, f := range r.files {
		st, err := os.Stat(f.path)
		if err != nil || (fileStamp{st.ModTime(), st.Size()}) != r.stamps[i] {
			changed = true
			break
		}
	}
	if !changed {
		return
	}
	stamps, v, err := r.read()
	if stamps != nil {
		r.stamps = stamps
	}
	if r.counted != nil {
		r.counted(err == nil)
	}
	if err != nil {
		r.unlogged++
		if r.logged.IsZero() || now.Sub(r.logged) >= fileLogInterval {
			r.log.Error(r.failMsg, "err", err, "times", r.unlogged, "next_report_after", fileLogInterval)
			r.logged, r.unlogged = now, 0
		}
		return
	}
	r.cur.Store(v)
	attrs := []any{"file", r.files[0].path}
	if r.describe != nil {
		attrs = append(attrs, r.describe(v)...)
	}
	r.log.Info(r.okMsg, attrs...)
}

// setLog makes r log to log from now on.
func (r *reloading[T]) setLog(log *slog.Logger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = log
}

// count makes r count each reload with counted from now on (ok false: the
// new content was refused).
func (r *reloading[T]) count(counted func(ok bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counted = counted
}

// certFiles is a certificate chain and its private key, from PEM files
// reloaded on change (see reloading). Its methods fit tls.Config's
// GetCertificate and GetClientCertificate, for servers and clients alike.
type certFiles struct {
	r *reloading[tls.Certificate]
}

// newCertFiles loads the chain of cert (PEM CERTIFICATE blocks, the leaf
// first) and the private key of key (PKCS #8, PKCS #1 or EC PEM), which
// must match the leaf; clock times the looks at the files, log gets the
// reloads.
func newCertFiles(cert, key tlsFile, clock func() time.Time, log *slog.Logger) (*certFiles, error) {
	r, err := newReloading("certificate", []tlsFile{cert, key}, func(data [][]byte) (*tls.Certificate, error) {
		return loadKeyPair(cert, data[0], key, data[1])
	}, func(c *tls.Certificate) []any {
		return []any{"serial", c.Leaf.SerialNumber.String(), "not_after", c.Leaf.NotAfter}
	}, clock, log)
	if err != nil {
		return nil, err
	}
	return &certFiles{r}, nil
}

// setLog makes c log its reloads to log from now on.
func (c *certFiles) setLog(log *slog.Logger) { c.r.setLog(log) }

// GetCertificate returns the current certificate, for tls.Config.
func (c *certFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.r.current(), nil
}

// GetClientCertificate returns the current certificate, for a client's
// tls.Config.
func (c *certFiles) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return c.r.current(), nil
}

// loadKeyPair parses a PEM chain and a PEM private key that matches its leaf.
func loadKeyPair(certFile tlsFile, certPEM []byte, keyFile tlsFile, keyPEM []byte) (*tls.Certificate, error) {
	chain, err := parseCertificates(certFile, certPEM)
	if err != nil {
		return nil, err
	}
	key, err := parsePrivateKey(keyFile, keyPEM)
	if err != nil {
		return nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(chain[0].PublicKey) {
		return nil, keyFile.errorf("%w in %s", errKeyMismatch, certFile.path)
	}
	c := &tls.Certificate{PrivateKey: key, Leaf: chain[0]}
	for _, x := range chain {
		c.Certificate = append(c.Certificate, x.Raw)
	}
	return c, nil
}

// pemBlocks returns the PEM blocks of data, in order.
func pemBlocks(data []byte) []*pem.Block {
	var blocks []*pem.Block
	for b, rest := pem.Decode(data); b != nil; b, rest = pem.Decode(rest) {
		blocks = append(blocks, b)
	}
	return blocks
}

// parseCertificates parses the CERTIFICATE blocks of a PEM file, ignoring
// any other block.
func parseCertificates(f tlsFile, data []byte) ([]*x509.Certificate, error) {
	blocks := pemBlocks(data)
	var certs []*x509.Certificate
	for _, b := range blocks {
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, f.errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	switch {
	case len(blocks) == 0:
		return nil, f.errorf("%w", errNotPEM)
	case len(certs) == 0:
		return nil, f.errorf("%w", errNoCertificate)
	}
	return certs, nil
}

// parsePrivateKey parses the first PRIVATE KEY block of a PEM file.
func parsePrivateKey(f tlsFile, data []byte) (crypto.Signer, error) {
	blocks := pemBlocks(data)
	for _, b := range blocks {
		if !strings.HasSuffix(b.Type, "PRIVATE KEY") {
			continue
		}
		var key any
		var err error
		switch b.Type {
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		default:
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		}
		if err != nil {
			return nil, f.errorf("%s block: %w", b.Type, err)
		}
		s, ok := key.(crypto.Signer)
		if !ok {
			return nil, f.errorf("%s block: a %T cannot sign", b.Type, key)
		}
		return s, nil
	}
	if len(blocks) == 0 {
		return nil, f.errorf("%w", errNotPEM)
	}
	return nil, f.errorf("%w", errNoPrivateKey)
}

// caFiles is a pool of CA certificates, from a PEM file reloaded on change
// (see reloading), to verify the peers' certificates with.
type caFiles struct {
	r *reloading[x509.CertPool]
}

// newCAFiles loads the CERTIFICATE blocks of f (at least one); clock times
// the looks at the file, log gets the reloads.
func newCAFiles(f tlsFile, clock func() time.Time, log *slog.Logger) (*caFiles, error) {
	r, err := newReloading("CA certificates", []tlsFile{f}, func(data [][]byte) (*x509.CertPool, error) {
		certs, err := parseCertificates(f, data[0])
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		for _, c := range certs {
			pool.AddCert(c)
		}
		return pool, nil
	}, nil, clock, log)
	if err != nil {
		return nil, err
	}
	return &caFiles{r}, nil
}

// Pool returns the current pool.
func (c *caFiles) Pool() *x509.CertPool { return c.r.current() }

// setLog makes c log its reloads to log from now on.
func (c *caFiles) setLog(log *slog.Logger) { c.r.setLog(log) }

// clientAuthConfig returns a GetConfigForClient of a server of minVersion
// and the ALPN protocols protos that presents cert's certificate and
// requires a client certificate that ca's pool verifies, both as they are
// at each handshake.
func clientAuthConfig(minVersion uint16, protos []string, cert *certFiles, ca *caFiles) func(*tls.ClientHelloInfo) (*tls.Config, error) {
	return func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return &tls.Config{
			MinVersion:     minVersion,
			NextProtos:     protos,
			GetCertificate: cert.GetCertificate,
			ClientAuth:     tls.RequireAndVerifyClientCert,
			ClientCAs:      ca.Pool(),
		}, nil
	}
}
