package clientip_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/ratelimitd/ratelimitd/api/clientip"
)

func TestSpoofedHeadersFromUntrustedPeerAreOneClient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r    *clientip.Resolver
	}{
		{"zero config", newResolver(t, clientip.Config{})},
		{"other proxies trusted", trusting(t, testTrusted, clientip.Config{})},
		{"nil resolver", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			keys := map[string]int{}
			for i := range 1000 {
				spoof := fmt.Sprintf("%d.%d.%d.%d", 1+i%200, i/200, i%7, i%251)
				req := request(fmt.Sprintf("198.51.100.7:%d", 1024+i),
					"X-Forwarded-For", spoof,
					"X-Forwarded-For", "10.0.0.1, "+spoof,
					"Forwarded", "for="+spoof,
					"X-Real-IP", spoof)
				keys[tc.r.Key(req)]++
			}
			if len(keys) != 1 || keys["198.51.100.7"] != 1000 {
				t.Errorf("got keys %v, want only 198.51.100.7 (1000 times)", keys)
			}
		})
	}
}

// clientIPCase is one row of TestClientIP: the request from remote with
// headers (name, value pairs) must have client want ("" for the zero Addr).
type clientIPCase struct {
	name    string
	header  string // Config.Header
	remote  string
	headers []string
	want    string
}

var untrustedPeerCases = []clientIPCase{
	{name: "no headers", remote: "203.0.113.7:5000", want: "203.0.113.7"},
	{name: "XFF ignored", remote: "203.0.113.7:5000", headers: []string{"X-Forwarded-For", "192.0.2.1"}, want: "203.0.113.7"},
	{name: "XFF naming a trusted proxy ignored", remote: "203.0.113.7:5000", headers: []string{"X-Forwarded-For", "192.0.2.1, 10.0.0.1"}, want: "203.0.113.7"},
	{name: "Forwarded ignored", remote: "203.0.113.7:5000", headers: []string{"Forwarded", "for=192.0.2.1"}, want: "203.0.113.7"},
	{name: "X-Real-IP ignored", remote: "203.0.113.7:5000", headers: []string{"X-Real-IP", "192.0.2.1"}, want: "203.0.113.7"},
	{name: "IPv6 peer", remote: "[2001:db8::1]:443", headers: []string{"X-Forwarded-For", "192.0.2.1"}, want: "2001:db8::1"},
	{name: "pinned header ignored too", header: "X-Forwarded-For", remote: "203.0.113.7:5000", headers: []string{"X-Forwarded-For", "192.0.2.1"}, want: "203.0.113.7"},
}

var xffCases = []clientIPCase{
	{name: "no headers", remote: "10.0.0.1:5000", want: "10.0.0.1"},
	{
		name: "spoofed hops left of the real client ignored", remote: "10.0.0.1:5000",
		headers: []string{"X-Forwarded-For", "6.6.6.6, 7.7.7.7, 203.0.113.9, 10.0.0.2"}, want: "203.0.113.9",
	},
	{name: "one entry", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "203.0.113.9"}, want: "203.0.113.9"},
	{name: "all trusted: left-most", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "10.1.1.1, 10.2.2.2"}, want: "10.1.1.1"},
	{
		name: "several lines are one list", remote: "10.0.0.1:5000",
		headers: []string{"X-Forwarded-For", "6.6.6.6, 203.0.113.9", "X-Forwarded-For", "10.0.0.3, 10.0.0.2"}, want: "203.0.113.9",
	},
	{
		name: "last line untrusted", remote: "10.0.0.1:5000",
		headers: []string{"X-Forwarded-For", "203.0.113.9", "X-Forwarded-For", "198.51.100.1"}, want: "198.51.100.1",
	},
	{name: "spaces and tabs", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", " 6.6.6.6 ,\t203.0.113.9 ,\t10.0.0.2\t"}, want: "203.0.113.9"},
	{name: "no spaces", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "6.6.6.6,203.0.113.9,10.0.0.2"}, want: "203.0.113.9"},
	{name: "IPv4 with port", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "203.0.113.9:1234"}, want: "203.0.113.9"},
	{name: "bare IPv6", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "2001:db8::9"}, want: "2001:db8::9"},
	{name: "bracketed IPv6 with port", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "[2001:db8::9]:80"}, want: "2001:db8::9"},
	{name: "bracketed IPv6", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "[2001:db8::9]"}, want: "2001:db8::9"},
	{name: "IPv4-mapped unmapped", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "::ffff:203.0.113.9"}, want: "203.0.113.9"},
	{name: "IPv4-mapped trusted hop skipped", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "203.0.113.9, ::ffff:10.0.0.2"}, want: "203.0.113.9"},
	{name: "zone dropped", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "fe80::1%eth0"}, want: "fe80::1"},
	{name: "odd zone is not an address", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "203.0.113.9, fe80::1%e 0"}, want: "10.0.0.1"},
	{name: "uppercase IPv6 normalized", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "2001:DB8:0::9"}, want: "2001:db8::9"},
	{name: "garbage between: its right neighbour", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "203.0.113.9, garbage, 10.0.0.2"}, want: "10.0.0.2"},
	{name: "garbage right-most: the peer", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "203.0.113.9, garbage"}, want: "10.0.0.1"},
	{name: "garbage left of the client ignored", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "garbage, 203.0.113.9"}, want: "203.0.113.9"},
	{name: "unknown is not an address", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "unknown"}, want: "10.0.0.1"},
	{name: "obfuscated id is not an address", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "203.0.113.9, _hidden, 10.0.0.2"}, want: "10.0.0.2"},
	{name: "empty entry stops", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "203.0.113.9,,10.0.0.2"}, want: "10.0.0.2"},
	{name: "trailing comma stops", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "203.0.113.9,"}, want: "10.0.0.1"},
	{name: "empty line stops", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "203.0.113.9", "X-Forwarded-For", ""}, want: "10.0.0.1"},
	{name: "invalid IPv4", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "203.0.113.256"}, want: "10.0.0.1"},
	{name: "port out of range", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "203.0.113.9:65536"}, want: "10.0.0.1"},
	{name: "bracketed IPv4", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "[203.0.113.9]"}, want: "10.0.0.1"},
	{name: "quoted entry", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", `"203.0.113.9"`}, want: "10.0.0.1"},
	{name: "preferred to X-Real-IP", remote: "10.0.0.1:5000", headers: []string{"X-Real-IP", "192.0.2.1", "X-Forwarded-For", "203.0.113.9"}, want: "203.0.113.9"},
	{name: "IPv6 trusted peer", remote: "[fd00::1]:443", headers: []string{"X-Forwarded-For", "2001:db8::9, fd00::2"}, want: "2001:db8::9"},
	{name: "IPv4-mapped trusted peer", remote: "[::ffff:10.0.0.1]:443", headers: []string{"X-Forwarded-For", "203.0.113.9"}, want: "203.0.113.9"},
	{name: "bare-IP trusted peer", remote: "10.0.0.1", headers: []string{"X-Forwarded-For", "203.0.113.9"}, want: "203.0.113.9"},
}

var forwardedCases = []clientIPCase{
	{name: "RFC 7239 example with proto and by", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43"}, want: "192.0.2.60"},
	{name: "quoted IPv6 with port", remote: "10.0.0.1:5000", headers: []string{"Forwarded", `For="[2001:db8:cafe::17]:4711"`}, want: "2001:db8:cafe::17"},
	{name: "quoted IPv6", remote: "10.0.0.1:5000", headers: []string{"Forwarded", `for="[2001:db8:cafe::17]"`}, want: "2001:db8:cafe::17"},
	{name: "quoted IPv4 with port", remote: "10.0.0.1:5000", headers: []string{"Forwarded", `for="192.0.2.60:8080"`}, want: "192.0.2.60"},
	{name: "obfuscated port", remote: "10.0.0.1:5000", headers: []string{"Forwarded", `for="[2001:db8:cafe::17]:_p0rt"`}, want: "2001:db8:cafe::17"},
	{name: "unquoted IPv6 accepted", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=[2001:db8:cafe::17]:4711"}, want: "2001:db8:cafe::17"},
	{name: "multiple elements: right-most untrusted", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=192.0.2.43, for=198.51.100.17"}, want: "198.51.100.17"},
	{name: "multiple elements with IPv6", remote: "10.0.0.1:5000", headers: []string{"Forwarded", `for=192.0.2.43, for="[2001:db8:cafe::17]"`}, want: "2001:db8:cafe::17"},
	{name: "trusted element skipped", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=6.6.6.6, for=192.0.2.43;proto=https, for=10.0.0.2;by=10.0.0.1"}, want: "192.0.2.43"},
	{name: "multiple lines", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=192.0.2.43", "Forwarded", "for=10.0.0.2;proto=https"}, want: "192.0.2.43"},
	{name: "FOR and For", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "FOR=192.0.2.43, For=10.0.0.2"}, want: "192.0.2.43"},
	{name: "parameter order and spaces", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "proto=https ; for=192.0.2.43 ;by=10.0.0.1 ,for=10.0.0.2"}, want: "192.0.2.43"},
	{name: "empty pairs allowed", remote: "10.0.0.1:5000", headers: []string{"Forwarded", ";for=192.0.2.43;;"}, want: "192.0.2.43"},
	{name: "quoted comma and semicolon", remote: "10.0.0.1:5000", headers: []string{"Forwarded", `for=192.0.2.43;ext="a,b;c", for=10.0.0.2`}, want: "192.0.2.43"},
	{name: "all trusted: left-most", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=10.0.0.3, for=10.0.0.2"}, want: "10.0.0.3"},
	{name: "hidden: its right neighbour", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=192.0.2.43, for=_hidden, for=10.0.0.2"}, want: "10.0.0.2"},
	{name: "quoted hidden", remote: "10.0.0.1:5000", headers: []string{"Forwarded", `for="_gazonk"`}, want: "10.0.0.1"},
	{name: "unknown", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=unknown"}, want: "10.0.0.1"},
	{name: "element without for", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=192.0.2.43, proto=https"}, want: "10.0.0.1"},
	{name: "two for in one element", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=192.0.2.43;for=192.0.2.44"}, want: "10.0.0.1"},
	{name: "empty element", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=192.0.2.43,,for=10.0.0.2"}, want: "10.0.0.2"},
	{name: "empty value", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for="}, want: "10.0.0.1"},
	{name: "empty quoted value", remote: "10.0.0.1:5000", headers: []string{"Forwarded", `for=""`}, want: "10.0.0.1"},
	{name: "pair without =", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=192.0.2.43;secure"}, want: "10.0.0.1"},
	{name: "space around =", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for = 192.0.2.43"}, want: "10.0.0.1"},
	{name: "unterminated quote", remote: "10.0.0.1:5000", headers: []string{"Forwarded", `for="192.0.2.43, for=10.0.0.2`}, want: "10.0.0.1"},
	{name: "stray quote in value", remote: "10.0.0.1:5000", headers: []string{"Forwarded", `for=192.0.2"43`}, want: "10.0.0.1"},
	{name: "backslash escape", remote: "10.0.0.1:5000", headers: []string{"Forwarded", `for="\192.0.2.43"`}, want: "10.0.0.1"},
	{name: "bad parameter name", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "f(r)=1;for=192.0.2.43"}, want: "10.0.0.1"},
	{name: "X-Forwarded-For syntax is not Forwarded", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "192.0.2.43"}, want: "10.0.0.1"},
	{name: "preferred to X-Forwarded-For", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "203.0.113.9", "Forwarded", "for=192.0.2.43"}, want: "192.0.2.43"},
	{name: "empty line still preferred", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "203.0.113.9", "Forwarded", ""}, want: "10.0.0.1"},
}

var realIPCases = []clientIPCase{
	{name: "one address", remote: "10.0.0.1:5000", headers: []string{"X-Real-IP", "203.0.113.9"}, want: "203.0.113.9"},
	{name: "spaces", remote: "10.0.0.1:5000", headers: []string{"X-Real-IP", " 203.0.113.9\t"}, want: "203.0.113.9"},
	{name: "IPv6", remote: "10.0.0.1:5000", headers: []string{"X-Real-IP", "2001:db8::9"}, want: "2001:db8::9"},
	{name: "trusted", remote: "10.0.0.1:5000", headers: []string{"X-Real-IP", "10.0.0.5"}, want: "10.0.0.5"},
	{name: "a list is not an address", remote: "10.0.0.1:5000", headers: []string{"X-Real-IP", "203.0.113.9, 10.0.0.2"}, want: "10.0.0.1"},
	{name: "several lines", remote: "10.0.0.1:5000", headers: []string{"X-Real-IP", "203.0.113.9", "X-Real-IP", "10.0.0.2"}, want: "203.0.113.9"},
	{name: "garbage", remote: "10.0.0.1:5000", headers: []string{"X-Real-IP", "nope"}, want: "10.0.0.1"},
}

var pinnedHeaderCases = []clientIPCase{
	{
		name: "X-Forwarded-For pinned: client's Forwarded ignored", header: "X-Forwarded-For", remote: "10.0.0.1:5000",
		headers: []string{"Forwarded", "for=6.6.6.6", "X-Forwarded-For", "203.0.113.9"}, want: "203.0.113.9",
	},
	{name: "any letter case", header: "x-forwarded-for", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=6.6.6.6", "X-Forwarded-For", "203.0.113.9"}, want: "203.0.113.9"},
	{name: "X-Real-IP pinned and absent: the peer", header: "X-Real-IP", remote: "10.0.0.1:5000", headers: []string{"X-Forwarded-For", "6.6.6.6"}, want: "10.0.0.1"},
	{name: "X-Real-IP pinned", header: "X-REAL-IP", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=6.6.6.6", "X-Real-IP", "203.0.113.9"}, want: "203.0.113.9"},
	{name: "Forwarded pinned", header: "Forwarded", remote: "10.0.0.1:5000", headers: []string{"Forwarded", "for=192.0.2.43", "X-Forwarded-For", "6.6.6.6"}, want: "192.0.2.43"},
}

var remoteAddrCases = []clientIPCase{
	{name: "empty", remote: "", headers: []string{"X-Forwarded-For", "203.0.113.9"}, want: ""},
	{name: "garbage", remote: "garbage", headers: []string{"X-Forwarded-For", "203.0.113.9"}, want: ""},
	{name: "unix socket", remote: "@", want: ""},
	{name: "IPv6 loopback with port", remote: "[::1]:80", want: "::1"},
	{name: "bare IPv4", remote: "1.2.3.4", want: "1.2.3.4"},
	{name: "bare IPv6", remote: "2001:db8::1", want: "2001:db8::1"},
	{name: "bracketed IPv6", remote: "[2001:db8::1]", want: "2001:db8::1"},
	{name: "zone dropped", remote: "[fe80::1%eth0]:80", want: "fe80::1"},
	{name: "any zone dropped", remote: "[fe80::1%e 0]:80", want: "fe80::1"},
	{name: "IPv4-mapped", remote: "[::ffff:1.2.3.4]:80", want: "1.2.3.4"},
	{name: "port 0", remote: "1.2.3.4:0", want: "1.2.3.4"},
	{name: "port too large", remote: "1.2.3.4:65536", want: ""},
	{name: "empty port", remote: "1.2.3.4:", want: ""},
	{name: "bracketed IPv4", remote: "[1.2.3.4]:80", want: ""},
	{name: "unclosed bracket", remote: "[::1:80", want: ""},
	{name: "leading space", remote: " 1.2.3.4:80", want: ""},
	{name: "host name", remote: "localhost:80", want: ""},
	{name: "IPv4 leading zero", remote: "01.2.3.4:80", want: ""},
}

func TestClientIP(t *testing.T) {
	t.Parallel()
	for _, group := range []struct {
		name  string
		cases []clientIPCase
	}{
		{"untrusted peer", untrustedPeerCases},
		{"X-Forwarded-For", xffCases},
		{"Forwarded", forwardedCases},
		{"X-Real-IP", realIPCases},
		{"Config.Header", pinnedHeaderCases},
		{"RemoteAddr", remoteAddrCases},
	} {
		for _, tc := range group.cases {
			t.Run(group.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				trusted := testTrusted
				if group.name == "RemoteAddr" {
					trusted = "0.0.0.0/0, ::/0" // any usable peer would have its headers read
				}
				r := trusting(t, trusted, clientip.Config{Header: tc.header})
				req := request(tc.remote, tc.headers...)
				if got := addrString(r.ClientIP(req)); got != tc.want {
					t.Errorf("ClientIP(RemoteAddr %q, headers %q) = %q, want %q", tc.remote, tc.headers, got, tc.want)
				}
				if got, want := r.Key(req), r.KeyOf(r.ClientIP(req)); got != want {
					t.Errorf("Key = %q, want KeyOf(ClientIP) = %q", got, want)
				}
			})
		}
	}
}

// hops returns n < 65536 distinct short addresses 10.0.y.z (trusted) or
// 203.0.y.z (untrusted).
func hops(n int, trusted bool) []string {
	first := 203
	if trusted {
		first = 10
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%d.0.%d.%d", first, i>>8, i&255)
	}
	return out
}

func TestBounds(t *testing.T) {
	t.Parallel()
	// 400 hops fit in 8 KiB, even as Forwarded elements; 1000 do not.
	trusted := hops(400, true)
	untrusted := hops(400, false)
	// With 400 trusted hops the walk ends at the 64th hop from the right
	// (the peer is the first); that is trusted[400-63].
	atLimit := trusted[400-63]
	forwarded := func(list []string) string { return "for=" + strings.Join(list, ", for=") }
	lines := func(name string, list []string) []string {
		var kv []string
		for _, v := range list {
			kv = append(kv, name, v)
		}
		return kv
	}
	many := hops(1000, false)
	exactly8K := "203.0.113.9" + strings.Repeat(" ", 8192-len("203.0.113.9"))
	for _, tc := range []struct {
		name    string
		headers []string
		want    string
	}{
		{"400 trusted XFF hops", []string{"X-Forwarded-For", strings.Join(trusted, ",")}, atLimit},
		{"400 trusted XFF lines", lines("X-Forwarded-For", trusted), atLimit},
		{"400 trusted Forwarded elements", []string{"Forwarded", forwarded(trusted)}, atLimit},
		{"400 trusted Forwarded lines", lines("Forwarded", strings.Split(forwarded(trusted), ", ")), atLimit},
		{"400 trusted X-Real-IP lines", lines("X-Real-IP", trusted), atLimit},
		{"untrusted beyond the limit never reached", []string{"X-Forwarded-For", "203.0.113.9," + strings.Join(trusted, ",")}, atLimit},
		{"400 untrusted hops: right-most", []string{"X-Forwarded-For", strings.Join(untrusted, ",")}, untrusted[399]},
		{"63 trusted hops then the client", []string{"X-Forwarded-For", "203.0.113.9," + strings.Join(trusted[:63], ",")}, trusted[0]},
		{"62 trusted hops then the client", []string{"X-Forwarded-For", "203.0.113.9," + strings.Join(trusted[:62], ",")}, "203.0.113.9"},
		{"63 Forwarded lines then the client", append([]string{"Forwarded", "for=203.0.113.9"}, lines("Forwarded", strings.Split(forwarded(trusted[:63]), ", "))...), trusted[0]},
		{"62 Forwarded lines then the client", append([]string{"Forwarded", "for=203.0.113.9"}, lines("Forwarded", strings.Split(forwarded(trusted[:62]), ", "))...), "203.0.113.9"},
		{"1000 XFF hops: over 8 KiB, the peer", []string{"X-Forwarded-For", strings.Join(many, ",")}, "10.0.0.1"},
		{"1000 XFF lines: over 8 KiB, the peer", lines("X-Forwarded-For", many), "10.0.0.1"},
		{"1000 Forwarded elements: over 8 KiB, the peer", []string{"Forwarded", forwarded(many)}, "10.0.0.1"},
		{"header of exactly 8 KiB read", []string{"X-Forwarded-For", exactly8K}, "203.0.113.9"},
		{"header over 8 KiB ignored", []string{"X-Forwarded-For", exactly8K + " "}, "10.0.0.1"},
		{"lines over 8 KiB together ignored", []string{"X-Forwarded-For", exactly8K[:5000], "X-Forwarded-For", "203.0.113.9" + strings.Repeat(" ", 4000)}, "10.0.0.1"},
		{"huge garbage ignored", []string{"X-Forwarded-For", strings.Repeat("\x00\"[,;=", 1<<14)}, "10.0.0.1"},
		{"huge X-Forwarded-For not a fallback to X-Real-IP", []string{"X-Forwarded-For", exactly8K + " ", "X-Real-IP", "203.0.113.9"}, "10.0.0.1"},
		{"100000 empty lines", lines("X-Forwarded-For", make([]string, 100000)), "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := trusting(t, testTrusted, clientip.Config{})
			if got := addrString(r.ClientIP(request("10.0.0.1:5000", tc.headers...))); got != tc.want {
				t.Errorf("ClientIP = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestKeyGrouping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  clientip.Config
		addr string
		want string
	}{
		{"IPv4 default /32", clientip.Config{}, "203.0.113.7", "203.0.113.7"},
		{"IPv4 /24", clientip.Config{IPv4Prefix: 24}, "203.0.113.7", "203.0.113.0/24"},
		{"IPv4 /32 explicit", clientip.Config{IPv4Prefix: 32}, "203.0.113.7", "203.0.113.7"},
		{"IPv4 /1", clientip.Config{IPv4Prefix: 1}, "203.0.113.7", "128.0.0.0/1"},
		{"IPv6 default /64", clientip.Config{}, "2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"},
		{"IPv6 /56", clientip.Config{IPv6Prefix: 56}, "2001:db8:1:2ff::1", "2001:db8:1:200::/56"},
		{"IPv6 /128", clientip.Config{IPv6Prefix: 128}, "2001:db8:1:2::7", "2001:db8:1:2::7"},
		{"IPv6 /1", clientip.Config{IPv6Prefix: 1}, "2001:db8::1", "::/1"},
		{"IPv6 prefix does not touch IPv4", clientip.Config{IPv6Prefix: 48}, "203.0.113.7", "203.0.113.7"},
		{"IPv4 prefix does not touch IPv6", clientip.Config{IPv4Prefix: 8}, "2001:db8:1:2::7", "2001:db8:1:2::/64"},
		{"IPv4-mapped is IPv4", clientip.Config{IPv4Prefix: 24}, "::ffff:203.0.113.7", "203.0.113.0/24"},
		{"zone dropped", clientip.Config{IPv6Prefix: 128}, "fe80::1%eth0", "fe80::1"},
		{"zero Addr", clientip.Config{}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newResolver(t, tc.cfg)
			var a netip.Addr
			if tc.addr != "" {
				a = netip.MustParseAddr(tc.addr)
			}
			if got := r.KeyOf(a); got != tc.want {
				t.Errorf("KeyOf(%v) = %q, want %q", a, got, tc.want)
			}
		})
	}
}

func TestKeyGroupsIPv6(t *testing.T) {
	t.Parallel()
	r := newResolver(t, clientip.Config{})
	// 1000 addresses rotating inside one /64 are one key.
	keys := map[string]bool{}
	for i := range 1000 {
		remote := fmt.Sprintf("[2001:db8:1:2:%x:%x:%x:%x]:443", i, i*7, i*13, i*31)
		keys[r.Key(request(remote))] = true
	}
	if len(keys) != 1 || !keys["2001:db8:1:2::/64"] {
		t.Errorf("one /64: got keys %v, want only 2001:db8:1:2::/64", keys)
	}
	// Neighbouring /64s are different keys.
	for _, remote := range []string{"[2001:db8:1:3::1]:443", "[2001:db8:1:1::1]:443", "[2001:db8:2:2::1]:443"} {
		if got := r.Key(request(remote)); keys[got] {
			t.Errorf("Key(%s) = %q, want a key other than 2001:db8:1:2::/64", remote, got)
		}
	}
	// With /56, 256 /64s of one /56 share a key.
	r56 := newResolver(t, clientip.Config{IPv6Prefix: 56})
	keys = map[string]bool{}
	for i := range 256 {
		keys[r56.Key(request(fmt.Sprintf("[2001:db8:1:2%02x::1]:443", i)))] = true
	}
	if len(keys) != 1 || !keys["2001:db8:1:200::/56"] {
		t.Errorf("/56: got keys %v, want only 2001:db8:1:200::/56", keys)
	}
	// With /128, every address is its own key.
	r128 := newResolver(t, clientip.Config{IPv6Prefix: 128})
	keys = map[string]bool{}
	for i := range 100 {
		keys[r128.Key(request(fmt.Sprintf("[2001:db8:1:2::%x]:443", i+1)))] = true
	}
	if len(keys) != 100 {
		t.Errorf("/128: got %d keys for 100 addresses, want 100", len(keys))
	}
}

func TestNilAndZero(t *testing.T) {
	t.Parallel()
	spoofed := request("203.0.113.7:1", "X-Forwarded-For", "192.0.2.1")
	for _, tc := range []struct {
		name string
		r    *clientip.Resolver
	}{
		{"nil Resolver", nil},
		{"zero Resolver", &clientip.Resolver{}},
		{"New(Config{})", newResolver(t, clientip.Config{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.r.Key(spoofed); got != "203.0.113.7" {
				t.Errorf("Key(spoofed) = %q, want 203.0.113.7", got)
			}
			if got := tc.r.Key(request("[2001:db8:1:2::7]:1")); got != "2001:db8:1:2::/64" {
				t.Errorf("Key(IPv6) = %q, want 2001:db8:1:2::/64", got)
			}
			if got := tc.r.ClientIP(nil); got.IsValid() {
				t.Errorf("ClientIP(nil) = %v, want the zero Addr", got)
			}
			if got := tc.r.Key(nil); got != "" {
				t.Errorf("Key(nil) = %q, want \"\"", got)
			}
		})
	}
	t.Run("nil Header", func(t *testing.T) {
		t.Parallel()
		r := trusting(t, testTrusted, clientip.Config{})
		if got := addrString(r.ClientIP(&http.Request{RemoteAddr: "10.0.0.1:1"})); got != "10.0.0.1" {
			t.Errorf("ClientIP = %q, want 10.0.0.1", got)
		}
	})
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	r := trusting(t, testTrusted, clientip.Config{IPv4Prefix: 24})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				req := request("10.0.0.1:1", "X-Forwarded-For", fmt.Sprintf("203.0.%d.%d, 10.0.0.2", g, i%256))
				if got, want := r.Key(req), fmt.Sprintf("203.0.%d.0/24", g); got != want {
					t.Errorf("Key = %q, want %q", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestAllocs is not parallel: testing.AllocsPerRun counts every allocation
// of the process.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	r := trusting(t, testTrusted, clientip.Config{})
	for _, tc := range []struct {
		name      string
		req       *http.Request
		clientIP  float64
		keyAllocs float64
	}{
		{"untrusted peer", request("203.0.113.7:1", "X-Forwarded-For", "192.0.2.1"), 0, 1},
		{"XFF 3 hops", request("10.0.0.1:1", "X-Forwarded-For", "192.0.2.1, 203.0.113.9, 10.0.0.2"), 0, 1},
		{"Forwarded 3 hops", request("10.0.0.1:1", "Forwarded", `for=192.0.2.1, for="[2001:db8::9]:80";proto=https, for=10.0.0.2`), 0, 1},
		{"X-Real-IP", request("10.0.0.1:1", "X-Real-IP", "203.0.113.9"), 0, 1},
		{"IPv6 /64", request("[2001:db8::1]:1"), 0, 1},
		{"64 trusted hops", request("10.0.0.1:1", "X-Forwarded-For", strings.Join(hops(100, true), ",")), 0, 1},
	} {
		if got := testing.AllocsPerRun(100, func() { r.ClientIP(tc.req) }); got != tc.clientIP {
			t.Errorf("%s: ClientIP allocates %v times, want %v", tc.name, got, tc.clientIP)
		}
		if got := testing.AllocsPerRun(100, func() { r.Key(tc.req) }); got != tc.keyAllocs {
			t.Errorf("%s: Key allocates %v times, want %v", tc.name, got, tc.keyAllocs)
		}
	}
}

func TestTrustsPeer(t *testing.T) {
	t.Parallel()
	r := trusting(t, testTrusted, clientip.Config{})
	for _, tc := range []struct {
		remote string
		want   bool
	}{
		{"10.0.0.1:5000", true},
		{"10.0.0.1", true},
		{"[::ffff:10.0.0.1]:5000", true},
		{"[fd00::1%eth0]:443", true},
		{"203.0.113.7:5000", false},
		{"[2001:db8::1]:443", false},
		{"", false},
		{"garbage", false},
	} {
		if got := r.TrustsPeer(request(tc.remote, "X-Forwarded-For", "192.0.2.1")); got != tc.want {
			t.Errorf("TrustsPeer(RemoteAddr %q) = %v, want %v", tc.remote, got, tc.want)
		}
	}
	if r.TrustsPeer(nil) {
		t.Error("TrustsPeer(nil) = true, want false")
	}
	var zero *clientip.Resolver
	if zero.TrustsPeer(request("10.0.0.1:1")) {
		t.Error("nil Resolver: TrustsPeer = true, want false")
	}
}
