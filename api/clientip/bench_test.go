package clientip_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/api/clientip"
)

// benchCases are the requests of the benchmarks, all resolved with
// testTrusted.
var benchCases = []struct {
	name string
	req  func() *http.Request
}{
	{"untrusted peer", func() *http.Request {
		return request("203.0.113.7:51234", "X-Forwarded-For", "192.0.2.1, 198.51.100.2")
	}},
	{"untrusted IPv6 peer", func() *http.Request {
		return request("[2001:db8:1:2::7]:51234")
	}},
	{"trusted peer XFF 3 hops", func() *http.Request {
		return request("10.0.0.1:51234", "X-Forwarded-For", "192.0.2.1, 203.0.113.9, 10.0.0.2")
	}},
	{"trusted peer Forwarded 3 hops", func() *http.Request {
		return request("10.0.0.1:51234", "Forwarded", `for=192.0.2.1, for="[2001:db8::9]:4711";proto=https, for=10.0.0.2;by=10.0.0.1`)
	}},
	{"trusted peer XFF 64 trusted hops", func() *http.Request {
		return request("10.0.0.1:51234", "X-Forwarded-For", strings.Join(hops(100, true), ", "))
	}},
	{"trusted peer Forwarded 64 trusted hops", func() *http.Request {
		return request("10.0.0.1:51234", "Forwarded", "for="+strings.Join(hops(100, true), ", for="))
	}},
}

func BenchmarkKey(b *testing.B) {
	r := trusting(b, testTrusted, clientip.Config{})
	for _, bc := range benchCases {
		req := bc.req()
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Key(req)
			}
		})
	}
	b.Run("parallel trusted peer XFF 3 hops", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			req := benchCases[2].req()
			for pb.Next() {
				r.Key(req)
			}
		})
	})
}

func BenchmarkClientIP(b *testing.B) {
	r := trusting(b, testTrusted, clientip.Config{})
	for _, bc := range benchCases {
		req := bc.req()
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.ClientIP(req)
			}
		})
	}
}
