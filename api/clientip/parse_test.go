package clientip_test

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/ratelimitd/ratelimitd/api/clientip"
)

func TestParsePrefixes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   ", nil},
		{"10.0.0.0/8", []string{"10.0.0.0/8"}},
		{" 10.0.0.0/8 , 192.0.2.7 ,2001:db8::/32 ", []string{"10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32"}},
		{"\t10.0.0.0/8,\t2001:db8::1\t", []string{"10.0.0.0/8", "2001:db8::1/128"}},
		{"10.1.2.3/8", []string{"10.0.0.0/8"}},
		{"2001:db8::1/32", []string{"2001:db8::/32"}},
		{"::ffff:10.0.0.0/104", []string{"10.0.0.0/8"}},
		{"::ffff:192.0.2.7", []string{"192.0.2.7/32"}},
		{"::ffff:0.0.0.0/96", []string{"0.0.0.0/0"}},
		{"0.0.0.0/0, ::/0", []string{"0.0.0.0/0", "::/0"}},
		{"10.0.0.0/8,10.0.0.0/8", []string{"10.0.0.0/8", "10.0.0.0/8"}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := clientip.ParsePrefixes(tc.in)
			if err != nil {
				t.Fatalf("ParsePrefixes(%q): %v", tc.in, err)
			}
			var want []netip.Prefix
			for _, s := range tc.want {
				want = append(want, netip.MustParsePrefix(s))
			}
			if !slices.Equal(got, want) {
				t.Errorf("ParsePrefixes(%q) = %v, want %v", tc.in, got, want)
			}
		})
	}
}

func TestParsePrefixesErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string
	}{
		{",", `clientip: bad prefix: item 1 "": empty`},
		{"10.0.0.0/8,", `clientip: bad prefix: item 2 "": empty`},
		{"10.0.0.0/8, ,10.0.0.1", `clientip: bad prefix: item 2 "": empty`},
		{"nope", `clientip: bad prefix: item 1 "nope": not an IP address`},
		{"10.0.0.0/8, example.com", `clientip: bad prefix: item 2 "example.com": not an IP address`},
		{"10.0.0.256", `clientip: bad prefix: item 1 "10.0.0.256": not an IP address`},
		{"10.0.0/8", `clientip: bad prefix: item 1 "10.0.0/8": not an IP address`},
		{"1.2.3.4:80", `clientip: bad prefix: item 1 "1.2.3.4:80": not an IP address`},
		{"[::1]", `clientip: bad prefix: item 1 "[::1]": not an IP address`},
		{"10.0.0.0 /8", `clientip: bad prefix: item 1 "10.0.0.0 /8": not an IP address`},
		{"10.0.0.0/33", `clientip: bad prefix: item 1 "10.0.0.0/33": prefix length must be 0..32`},
		{"2001:db8::/129", `clientip: bad prefix: item 1 "2001:db8::/129": prefix length must be 0..128`},
		{"10.0.0.0/", `clientip: bad prefix: item 1 "10.0.0.0/": prefix length is not a decimal number`},
		{"10.0.0.0/08", `clientip: bad prefix: item 1 "10.0.0.0/08": prefix length is not a decimal number`},
		{"10.0.0.0/-1", `clientip: bad prefix: item 1 "10.0.0.0/-1": prefix length is not a decimal number`},
		{"10.0.0.0/8/9", `clientip: bad prefix: item 1 "10.0.0.0/8/9": prefix length is not a decimal number`},
		{"10.0.0.0/1000", `clientip: bad prefix: item 1 "10.0.0.0/1000": prefix length must be 0..32`},
		{"fe80::1%eth0", `clientip: bad prefix: item 1 "fe80::1%eth0": zone not allowed`},
		{"fe80::1%eth0/64", `clientip: bad prefix: item 1 "fe80::1%eth0/64": zone not allowed`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := clientip.ParsePrefixes(tc.in)
			if err == nil {
				t.Fatalf("ParsePrefixes(%q) = %v, want error %q", tc.in, got, tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("ParsePrefixes(%q) error = %q, want %q", tc.in, err, tc.want)
			}
			if !errors.Is(err, clientip.ErrBadPrefix) {
				t.Errorf("ParsePrefixes(%q) error %q does not match ErrBadPrefix", tc.in, err)
			}
			if got != nil {
				t.Errorf("ParsePrefixes(%q) = %v with an error, want nil", tc.in, got)
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  clientip.Config
	}{
		{"zero", clientip.Config{}},
		{"limits", clientip.Config{IPv4Prefix: 1, IPv6Prefix: 1}},
		{"full length", clientip.Config{IPv4Prefix: 32, IPv6Prefix: 128}},
		{"Header Forwarded", clientip.Config{Header: "forwarded"}},
		{"Header X-Forwarded-For", clientip.Config{Header: "X-Forwarded-For"}},
		{"Header X-Real-IP", clientip.Config{Header: "x-real-ip"}},
		{"Header X-Real-Ip", clientip.Config{Header: "X-Real-Ip"}},
		{"Trusted", clientip.Config{Trusted: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if r, err := clientip.New(tc.cfg); err != nil || r == nil {
				t.Errorf("New(%+v) = %v, %v; want a Resolver, nil", tc.cfg, r, err)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	ok := netip.MustParsePrefix("10.0.0.0/8")
	for _, tc := range []struct {
		name string
		cfg  clientip.Config
		want string
	}{
		{"IPv6Prefix negative", clientip.Config{IPv6Prefix: -1}, "clientip: bad config: IPv6Prefix -1: must be 1..128 (0 means 64)"},
		{"IPv6Prefix 129", clientip.Config{IPv6Prefix: 129}, "clientip: bad config: IPv6Prefix 129: must be 1..128 (0 means 64)"},
		{"IPv4Prefix negative", clientip.Config{IPv4Prefix: -1}, "clientip: bad config: IPv4Prefix -1: must be 1..32 (0 means 32)"},
		{"IPv4Prefix 33", clientip.Config{IPv4Prefix: 33}, "clientip: bad config: IPv4Prefix 33: must be 1..32 (0 means 32)"},
		{"zero prefix", clientip.Config{Trusted: []netip.Prefix{ok, {}}}, "clientip: bad config: Trusted[1]: not a valid prefix"},
		{"too long prefix", clientip.Config{Trusted: []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr("10.0.0.1"), 33)}}, "clientip: bad config: Trusted[0]: not a valid prefix"},
		{"unknown Header", clientip.Config{Header: "X-Client-IP"}, `clientip: bad config: Header "X-Client-IP": must be "", "Forwarded", "X-Forwarded-For" or "X-Real-IP"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := clientip.New(tc.cfg)
			if err == nil {
				t.Fatalf("New(%+v) = %v, want error %q", tc.cfg, r, tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("New(%+v) error = %q, want %q", tc.cfg, err, tc.want)
			}
			if !errors.Is(err, clientip.ErrBadConfig) {
				t.Errorf("New(%+v) error %q does not match ErrBadConfig", tc.cfg, err)
			}
			if r != nil {
				t.Errorf("New(%+v) = %v with an error, want nil", tc.cfg, r)
			}
		})
	}
}

func TestNewNormalizesTrusted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		trusted string // as netip.MustParsePrefix takes it
		remote  string
		want    string
	}{
		{"host bits ignored", "10.1.2.3/8", "10.200.0.1:1", "203.0.113.9"},
		{"IPv4-mapped prefix is IPv4", "::ffff:10.0.0.0/104", "10.0.0.1:1", "203.0.113.9"},
		{"IPv4-mapped address is IPv4", "::ffff:10.0.0.1/128", "10.0.0.1:1", "203.0.113.9"},
		{"IPv6 ::/0 does not contain IPv4", "::/0", "10.0.0.1:1", "10.0.0.1"},
		{"IPv6 ::/0 contains IPv6", "::/0", "[2001:db8::1]:1", "203.0.113.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newResolver(t, clientip.Config{Trusted: []netip.Prefix{netip.MustParsePrefix(tc.trusted)}})
			req := request(tc.remote, "X-Forwarded-For", "203.0.113.9")
			if got := addrString(r.ClientIP(req)); got != tc.want {
				t.Errorf("ClientIP = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNewCopiesTrusted(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	r := newResolver(t, clientip.Config{Trusted: trusted})
	trusted[0] = netip.MustParsePrefix("192.0.2.0/24")
	req := request("10.0.0.1:1", "X-Forwarded-For", "203.0.113.9")
	if got := addrString(r.ClientIP(req)); got != "203.0.113.9" {
		t.Errorf("after changing cfg.Trusted: ClientIP = %q, want 203.0.113.9", got)
	}
}
