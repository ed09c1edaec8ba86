// Package clientip finds who the client of an HTTP request is, safely, and
// turns it into a rate-limit key.
//
// It keeps promise 5 of ratelimitd ("safe under abuse"): client IPs are
// taken from forwarding headers only behind trusted proxies. A client that
// talks to the server directly cannot choose its key by sending
// X-Forwarded-For; a client behind a trusted proxy gets the address that
// proxy saw, not one it wrote itself.
//
//	trusted, err := clientip.ParsePrefixes(*trustedProxies) // "10.0.0.0/8, 2001:db8::/32"
//	...
//	r, err := clientip.New(clientip.Config{Trusted: trusted})
//	...
//	key := r.Key(req) // "203.0.113.7", or "2001:db8:1:2::/64" for an IPv6 client
//
// # Rules
//
// ClientIP applies these rules; Key masks its answer (see Grouping).
//
//  1. The direct peer is req.RemoteAddr: host:port, or a bare IP
//     ("[2001:db8::1]:443", "192.0.2.7:5000", "192.0.2.7", "2001:db8::1",
//     "[2001:db8::1]"). An IPv6 zone is dropped and an IPv4-mapped IPv6
//     address is unmapped (::ffff:192.0.2.7 is 192.0.2.7); every address
//     below is normalized the same way. If RemoteAddr is not an address
//     ("", "@" for a Unix socket, garbage), the answer is the zero Addr and
//     the Key is "".
//  2. Forwarding headers are read only if the direct peer is inside
//     Config.Trusted. Otherwise the peer is the client, whatever the headers
//     say: requests from one untrusted peer are one client however their
//     X-Forwarded-For values vary.
//  3. Which header, when the peer is trusted: Config.Header if set; else
//     RFC 7239 Forwarded if present, else X-Forwarded-For if present, else
//     X-Real-IP. Exactly one header is read. Its entries are: for Forwarded,
//     the for= parameter of each comma-separated element (parameter names
//     are case-insensitive; the value may be quoted); for X-Forwarded-For,
//     each comma-separated entry; for X-Real-IP, each whole line (a single
//     address). Spaces and tabs around entries are ignored. An entry, like
//     RemoteAddr, is a bare IP, "[v6]", "v4:port" or "[v6]:port"; the port
//     (digits, or an RFC 7239 obfuscated port such as "_p1") is ignored,
//     and so is an IPv6 zone, which in an entry must be made of letters,
//     digits and "-._~".
//     Several lines of the header are one list, in order. Header keys are
//     looked up in canonical form, as net/http stores them.
//  4. The hops are the header entries followed by the peer. They are walked
//     from the right: every hop inside Config.Trusted is skipped; the first
//     one that is not is the client. If every hop is trusted, the left-most
//     hop is the client.
//  5. An entry that is not a valid IP met during the walk stops it: the
//     client is then the last hop walked, the trusted one to its right. Not
//     an IP are garbage, RFC 7239 obfuscated identifiers ("_hidden") and
//     "unknown", an empty entry (as in "a,,b", a trailing comma or an empty
//     line), a Forwarded element without a for= parameter, with two, or
//     with a malformed parameter, and a quoted value that uses a backslash
//     escape. So a trusted proxy that forwarded garbage is the client we
//     know: everyone whose proxy forwarded garbage shares that proxy's key,
//     and nobody escapes their own key by sending garbage.
//  6. The work is bounded: at most the last 64 hops are looked at, the peer
//     included. If all 64 are trusted, the 64th from the right is the
//     client. A chosen header whose lines together exceed 8 KiB (8192
//     bytes) is ignored and the peer is the client.
//
// Entries left of the client are never looked at. So, behind proxies that
// write the header as described under Non-guarantees, what a client puts in
// its own headers can at most move its key to the address of the trusted
// proxy in front of it, never to an address of its choosing.
//
// # Grouping
//
// Key and KeyOf mask the client address to a group prefix, so that
// addresses rotating inside one allocation share one budget. IPv6 clients
// are grouped by Config.IPv6Prefix (default /64, the usual size of one
// end-site subnet), IPv4 clients by Config.IPv4Prefix (default /32, each
// address alone). A full-length group is written as the bare address
// ("203.0.113.7"), a shorter one as the masked prefix ("203.0.113.0/24",
// "2001:db8:1:2::/64").
//
// # Guarantees
//
//   - ClientIP, Key and KeyOf never panic, whatever the request (even nil),
//     RemoteAddr and header contents; a nil or zero Resolver trusts no one.
//   - An untrusted peer's headers are never read.
//   - The answer is the zero Addr (only if RemoteAddr is not an address),
//     the peer, or an address written in the chosen header.
//   - Key(req) == KeyOf(ClientIP(req)), and keys of different groups are
//     different strings.
//   - Work per request is bounded by 64 hops and 8 KiB of header, plus a
//     size check over the header's lines. ClientIP does not allocate on
//     well-formed input; Key allocates only its result.
//   - A Resolver is immutable and safe for concurrent use.
//
// # Non-guarantees
//
//   - The answer is only as honest as the trusted proxies. Each must add
//     the hop it saw to the header this package reads, or remove that
//     header. A proxy that appends to X-Forwarded-For but passes a client's
//     Forwarded header through lets the client pick its address, because
//     Forwarded is preferred; set Config.Header to the header your proxies
//     write. Trusting 0.0.0.0/0 or ::/0 believes any peer.
//   - No check that an address is public or routable: a private or loopback
//     address forwarded by a trusted proxy is used as is.
//   - Clients behind one NAT share an IPv4 key; all hosts of an IPv6 /64
//     share one key, and a client holding a larger IPv6 block (a /48, say)
//     still has many /64 keys: choose IPv6Prefix to taste.
//   - HTTP's rule that empty list elements be ignored (RFC 9110, section
//     5.6.1) is not followed: an empty entry stops the walk (rule 5).
//   - RFC 7239 by=, host= and proto= are not used; ports are ignored.
package clientip
