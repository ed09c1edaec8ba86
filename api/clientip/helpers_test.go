package clientip_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/ratelimitd/ratelimitd/api/clientip"
)

// The addresses of the tests: proxies live in 10.0.0.0/8 and fd00::/8,
// clients in the documentation ranges.
const testTrusted = "10.0.0.0/8, fd00::/8"

// request builds a request from remote with the given header lines, as
// name, value pairs (names are canonicalized, as net/http does).
func request(remote string, kv ...string) *http.Request {
	r := &http.Request{Method: http.MethodGet, RemoteAddr: remote, Header: http.Header{}}
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Add(kv[i], kv[i+1])
	}
	return r
}

// newResolver returns New(cfg) or fails the test.
func newResolver(tb testing.TB, cfg clientip.Config) *clientip.Resolver {
	tb.Helper()
	r, err := clientip.New(cfg)
	if err != nil {
		tb.Fatalf("New(%+v): %v", cfg, err)
	}
	return r
}

// trusting returns a Resolver trusting the prefixes of list, with cfg's
// other fields.
func trusting(tb testing.TB, list string, cfg clientip.Config) *clientip.Resolver {
	tb.Helper()
	p, err := clientip.ParsePrefixes(list)
	if err != nil {
		tb.Fatalf("ParsePrefixes(%q): %v", list, err)
	}
	cfg.Trusted = p
	return newResolver(tb, cfg)
}

// addrString is a.String(), or "" for the zero Addr.
func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
