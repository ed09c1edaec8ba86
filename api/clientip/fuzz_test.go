package clientip_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/api/clientip"
)

// FuzzClientIP feeds arbitrary RemoteAddr and header values to ClientIP and
// checks, against an independent and deliberately loose reading of the
// input, that the answer is the peer or an address written in the
// headers, that an untrusted peer is always the answer, and that Key
// agrees with KeyOf. Header values are split into lines at "\n"; which
// headers are present, and the Config, are chosen by mode.
func FuzzClientIP(f *testing.F) {
	f.Add(uint8(0), "10.0.0.1:5000", "for=192.0.2.60;proto=http;by=203.0.113.43", "", "")
	f.Add(uint8(0x1c), "10.0.0.1:5000", `for="[2001:db8:cafe::17]:4711", For=10.0.0.2`, "6.6.6.6, 203.0.113.9, 10.0.0.2", "203.0.113.9")
	f.Add(uint8(0x18), "[fd00::1]:443", "", "6.6.6.6,203.0.113.9\n10.0.0.2,fd00::2", "")
	f.Add(uint8(0x11), "203.0.113.7:1", "", "192.0.2.1", "192.0.2.2")
	f.Add(uint8(0x12), "[::ffff:10.0.0.1]:80", `for="_hidden", for=unknown,,for="\x"`, "garbage", "")
	f.Add(uint8(0x1d), "10.0.0.1", `for=192.0.2.43;ext="a,b;c", for=10.0.0.2`, "", "fe80::1%eth0")
	f.Add(uint8(0x1c), "garbage", "for=192.0.2.1", "192.0.2.1", "192.0.2.1")
	f.Add(uint8(0x1f), "", "", "", "")

	configs := []clientip.Config{
		{},
		{Trusted: mustPrefixes(f, testTrusted)},
		{Trusted: mustPrefixes(f, "0.0.0.0/0, ::/0"), IPv4Prefix: 24, IPv6Prefix: 56},
		{Trusted: mustPrefixes(f, testTrusted+", 192.0.2.0/25"), Header: "X-Forwarded-For", IPv6Prefix: 128},
	}
	resolvers := make([]*clientip.Resolver, len(configs))
	for i, cfg := range configs {
		resolvers[i] = newResolver(f, cfg)
	}
	names := []string{"Forwarded", "X-Forwarded-For", "X-Real-Ip"}

	f.Fuzz(func(t *testing.T, mode uint8, remote, fwd, xff, xri string) {
		cfg, r := configs[mode&3], resolvers[mode&3]
		req := &http.Request{RemoteAddr: remote, Header: http.Header{}}
		for i, v := range []string{fwd, xff, xri} {
			if mode&(4<<i) != 0 {
				req.Header[names[i]] = strings.Split(v, "\n")
			}
		}

		got := r.ClientIP(req)
		if key, want := r.Key(req), r.KeyOf(got); key != want {
			t.Fatalf("Key = %q, KeyOf(ClientIP) = %q", key, want)
		}
		if !got.IsValid() {
			if r.Key(req) != "" {
				t.Fatalf("zero ClientIP but Key %q", r.Key(req))
			}
			if peer, ok := loosePeer(remote); ok {
				t.Fatalf("ClientIP is the zero Addr, want a client for RemoteAddr %q (%v)", remote, peer)
			}
			return
		}
		if got.Zone() != "" || got.Is4In6() {
			t.Fatalf("ClientIP = %v: has a zone or is IPv4-mapped", got)
		}
		peer, peerOK := loosePeer(remote)
		if peerOK && !contains(cfg.Trusted, peer) {
			if got != peer {
				t.Fatalf("untrusted peer %v: ClientIP = %v, want the peer", peer, got)
			}
			return
		}
		if got == peer || candidates(remote)[got] {
			return
		}
		if !candidates(fwd + "\n" + xff + "\n" + xri)[got] {
			t.Fatalf("ClientIP = %v: neither the peer (RemoteAddr %q) nor in the headers", got, remote)
		}
	})
}

// loosePeer parses RemoteAddr with the standard library alone.
func loosePeer(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().WithZone("").Unmap(), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.WithZone("").Unmap(), true
	}
	if inner, ok := strings.CutPrefix(s, "["); ok {
		if inner, ok = strings.CutSuffix(inner, "]"); ok {
			if a, err := netip.ParseAddr(inner); err == nil && a.Is6() {
				return a.WithZone("").Unmap(), true
			}
		}
	}
	return netip.Addr{}, false
}

// candidates returns every address that can be read in s: tokens between
// delimiters, with or without brackets and a port.
func candidates(s string) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	add := func(tok string) {
		if a, err := netip.ParseAddr(tok); err == nil {
			out[a.WithZone("").Unmap()] = true
		}
	}
	for _, tok := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(",;=\"\n \t", r) }) {
		add(tok)
		add(strings.TrimSuffix(strings.TrimPrefix(tok, "["), "]"))
		if host, _, err := net.SplitHostPort(tok); err == nil {
			add(host)
		}
	}
	return out
}

func contains(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// mustPrefixes returns ParsePrefixes(s) or fails.
func mustPrefixes(tb testing.TB, s string) []netip.Prefix {
	tb.Helper()
	p, err := clientip.ParsePrefixes(s)
	if err != nil {
		tb.Fatalf("ParsePrefixes(%q): %v", s, err)
	}
	return p
}

// FuzzParsePrefixes checks ParsePrefixes against netip, item by item, and
// that its output is normalized and reads back to itself.
func FuzzParsePrefixes(f *testing.F) {
	for _, s := range []string{
		"", " ", "10.0.0.0/8", " 10.0.0.0/8 , 192.0.2.7 ,2001:db8::/32 ", "::ffff:10.0.0.0/104",
		"10.1.2.3/8", ",", "a,,b", "10.0.0.0/33", "10.0.0.0/08", "fe80::1%eth0", "0.0.0.0/0,::/0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := clientip.ParsePrefixes(s)
		if err != nil {
			if !errors.Is(err, clientip.ErrBadPrefix) || !strings.HasPrefix(err.Error(), "clientip: bad prefix: item ") {
				t.Fatalf("ParsePrefixes(%q) error %q: not an item error matching ErrBadPrefix", s, err)
			}
			if got != nil {
				t.Fatalf("ParsePrefixes(%q) = %v with error %v", s, got, err)
			}
		}
		if strings.TrimSpace(s) == "" {
			if got != nil || err != nil {
				t.Fatalf("ParsePrefixes(%q) = %v, %v; want nil, nil", s, got, err)
			}
			return
		}
		items := strings.Split(s, ",")
		if err == nil && len(got) != len(items) {
			t.Fatalf("ParsePrefixes(%q) = %d prefixes for %d items", s, len(got), len(items))
		}
		for i, item := range items {
			item = strings.TrimSpace(item)
			want, ok := stdPrefix(item)
			if err == nil && (!ok || got[i] != want) {
				t.Fatalf("ParsePrefixes(%q)[%d] = %v; netip reads %q as %v, %v", s, i, got[i], item, want, ok)
			}
			if err != nil && !ok {
				// The first item netip rejects must be the one reported.
				if !strings.HasPrefix(err.Error(), fmt.Sprintf("clientip: bad prefix: item %d ", i+1)) {
					t.Fatalf("ParsePrefixes(%q) error %q; netip first rejects item %d", s, err, i+1)
				}
				break
			}
			if err != nil && i == len(items)-1 {
				t.Fatalf("ParsePrefixes(%q) error %v, but netip reads every item", s, err)
			}
		}
		if err != nil {
			return
		}
		for _, p := range got {
			if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() {
				t.Fatalf("ParsePrefixes(%q) gave %v: not normalized", s, p)
			}
		}
		parts := make([]string, len(got))
		for i, p := range got {
			parts[i] = p.String()
		}
		again, err := clientip.ParsePrefixes(strings.Join(parts, ","))
		if err != nil || len(again) != len(got) {
			t.Fatalf("reading back %v: %v, %v", got, again, err)
		}
		for i := range got {
			if again[i] != got[i] {
				t.Fatalf("reading back %v gave %v", got, again)
			}
		}
	})
}

// stdPrefix reads one item of ParsePrefixes with netip alone.
func stdPrefix(item string) (netip.Prefix, bool) {
	var p netip.Prefix
	if strings.Contains(item, "/") {
		var err error
		if p, err = netip.ParsePrefix(item); err != nil {
			return netip.Prefix{}, false
		}
	} else {
		a, err := netip.ParseAddr(item)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, false
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	p = p.Masked()
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p, true
}
