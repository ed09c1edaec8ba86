package clientip_test

import (
	"fmt"
	"net/http/httptest"
	"net/netip"

	"github.com/ratelimitd/ratelimitd/api/clientip"
)

func Example() {
	// The value of a --trusted-proxies flag: our load balancers.
	trusted, err := clientip.ParsePrefixes("10.0.0.0/8, fd00::/8")
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := clientip.New(clientip.Config{Trusted: trusted})
	if err != nil {
		fmt.Println(err)
		return
	}

	// A client talking to us directly cannot choose its address.
	direct := httptest.NewRequest("GET", "/check_rate", nil)
	direct.RemoteAddr = "203.0.113.7:51234"
	direct.Header.Set("X-Forwarded-For", "192.0.2.1")
	fmt.Println(r.ClientIP(direct), r.Key(direct))

	// Behind our proxies, the hop the first of them saw is the client; what
	// the client wrote itself (6.6.6.6) is ignored.
	proxied := httptest.NewRequest("GET", "/check_rate", nil)
	proxied.RemoteAddr = "10.0.0.1:443"
	proxied.Header.Set("X-Forwarded-For", "6.6.6.6, 198.51.100.23, 10.0.0.2")
	fmt.Println(r.ClientIP(proxied), r.Key(proxied))

	// IPv6 clients are grouped by /64.
	v6 := httptest.NewRequest("GET", "/check_rate", nil)
	v6.RemoteAddr = "10.0.0.1:443"
	v6.Header.Set("Forwarded", `for="[2001:db8:1:2:3:4:5:6]:4711";proto=https`)
	fmt.Println(r.ClientIP(v6), r.Key(v6))

	// Output:
	// 203.0.113.7 203.0.113.7
	// 198.51.100.23 198.51.100.23
	// 2001:db8:1:2:3:4:5:6 2001:db8:1:2::/64
}

func ExampleParsePrefixes() {
	p, err := clientip.ParsePrefixes(" 10.1.2.3/8, 192.0.2.7 , ::ffff:198.51.100.0/120, 2001:db8::/32")
	fmt.Println(p, err)
	_, err = clientip.ParsePrefixes("10.0.0.0/8, 10.0.0.0/33")
	fmt.Println(err)
	// Output:
	// [10.0.0.0/8 192.0.2.7/32 198.51.100.0/24 2001:db8::/32] <nil>
	// clientip: bad prefix: item 2 "10.0.0.0/33": prefix length must be 0..32
}

func ExampleResolver_KeyOf() {
	r, err := clientip.New(clientip.Config{IPv4Prefix: 24, IPv6Prefix: 56})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.KeyOf(netip.MustParseAddr("203.0.113.7")))
	fmt.Println(r.KeyOf(netip.MustParseAddr("2001:db8:1:2ff::1")))
	fmt.Printf("%q\n", r.KeyOf(netip.Addr{}))
	// Output:
	// 203.0.113.0/24
	// 2001:db8:1:200::/56
	// ""
}
