package clientip

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Limits on the work done per request (see the package documentation).
const (
	// maxHops is the most hops looked at per request, the direct peer
	// included.
	maxHops = 64
	// maxHeaderBytes is the largest total size, over all its lines, of a
	// forwarding header that is read. A larger one is ignored.
	maxHeaderBytes = 8 << 10
)

// Canonical header keys, as net/http stores them in http.Header.
const (
	hdrForwarded     = "Forwarded"
	hdrXForwardedFor = "X-Forwarded-For"
	hdrXRealIP       = "X-Real-Ip" // http.CanonicalHeaderKey("X-Real-IP")
)

// Config configures a Resolver. The zero value trusts no proxy and groups
// IPv6 clients by /64.
type Config struct {
	// Trusted lists the direct peers (and the hops behind them) whose
	// forwarding headers are believed: the reverse proxies and load
	// balancers in front of this server. Empty means none: the direct peer
	// is always the client. Host bits are ignored (10.1.2.3/8 is
	// 10.0.0.0/8) and an IPv4-mapped IPv6 prefix of length 96 or more is
	// taken as the IPv4 prefix it maps (::ffff:10.0.0.0/104 is 10.0.0.0/8).
	// An IPv6 prefix never contains an IPv4 client, not even ::/0.
	// Lookups are linear in len(Trusted): it is meant for tens of prefixes.
	Trusted []netip.Prefix

	// IPv6Prefix is the prefix length by which IPv6 clients are grouped
	// into one rate-limit key. 0 means 64 (one key per /64, the usual
	// end-site subnet); 128 means each address alone; valid 1..128.
	IPv6Prefix int

	// IPv4Prefix is the prefix length by which IPv4 clients are grouped
	// into one rate-limit key. 0 means 32 (each address alone); valid
	// 1..32.
	IPv4Prefix int

	// Header, when not empty, is the only forwarding header read from a
	// trusted peer: "Forwarded", "X-Forwarded-For" or "X-Real-IP" (any
	// letter case). Empty means the first one present, in that order.
	// Set it to the header your proxies write: a proxy that appends to
	// X-Forwarded-For but passes a client's own Forwarded header through
	// untouched otherwise lets that client choose its address.
	Header string
}

// Resolver finds the client of an HTTP request and its rate-limit key by
// the rules of the package documentation. It is immutable and safe for
// concurrent use. A nil or zero Resolver behaves as one made by
// New(Config{}): it trusts no proxy.
type Resolver struct {
	trusted []netip.Prefix // normalized: masked, IPv4-mapped unmapped
	v4bits  int            // 0 means 32
	v6bits  int            // 0 means 64
	header  string         // canonical key, or "" for the first present
}

// New validates cfg and returns a Resolver for it. Its errors wrap
// ErrBadConfig and name the field at fault. New copies cfg.Trusted: later
// changes to the slice do not affect the Resolver.
func New(cfg Config) (*Resolver, error) {
	r := &Resolver{v4bits: cfg.IPv4Prefix, v6bits: cfg.IPv6Prefix}
	if cfg.IPv6Prefix < 0 || cfg.IPv6Prefix > 128 {
		return nil, fmt.Errorf("%w: IPv6Prefix %d: must be 1..128 (0 means 64)", ErrBadConfig, cfg.IPv6Prefix)
	}
	if cfg.IPv4Prefix < 0 || cfg.IPv4Prefix > 32 {
		return nil, fmt.Errorf("%w: IPv4Prefix %d: must be 1..32 (0 means 32)", ErrBadConfig, cfg.IPv4Prefix)
	}
	switch {
	case cfg.Header == "":
	case strings.EqualFold(cfg.Header, hdrForwarded):
		r.header = hdrForwarded
	case strings.EqualFold(cfg.Header, hdrXForwardedFor):
		r.header = hdrXForwardedFor
	case strings.EqualFold(cfg.Header, hdrXRealIP):
		r.header = hdrXRealIP
	default:
		return nil, fmt.Errorf("%w: Header %q: must be \"\", \"Forwarded\", \"X-Forwarded-For\" or \"X-Real-IP\"", ErrBadConfig, cfg.Header)
	}
	if len(cfg.Trusted) > 0 {
		r.trusted = make([]netip.Prefix, len(cfg.Trusted))
		for i, p := range cfg.Trusted {
			if !p.IsValid() {
				return nil, fmt.Errorf("%w: Trusted[%d]: not a valid prefix", ErrBadConfig, i)
			}
			r.trusted[i] = normPrefix(p)
		}
	}
	return r, nil
}

// normPrefix masks p and turns an IPv4-mapped IPv6 prefix of length 96 or
// more into the IPv4 prefix it maps. p must be valid.
func normPrefix(p netip.Prefix) netip.Prefix {
	p = p.Masked()
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// normAddr drops the zone of a and unmaps an IPv4-mapped IPv6 address.
func normAddr(a netip.Addr) netip.Addr {
	return a.WithZone("").Unmap()
}

// trusts reports whether a lies inside a trusted prefix.
func (r *Resolver) trusts(a netip.Addr) bool {
	if r == nil {
		return false
	}
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// TrustsPeer reports whether the direct peer of req (its RemoteAddr, read
// as by ClientIP) is inside Config.Trusted, that is, whether ClientIP reads
// req's forwarding headers. A reverse proxy uses it to decide whether to
// keep the forwarding headers it passes on (appending the peer) or to
// replace them, by exactly the rule that picked the client. It is false
// for a nil req or an unusable RemoteAddr.
func (r *Resolver) TrustsPeer(req *http.Request) bool {
	if req == nil {
		return false
	}
	peer, ok := parseHop(req.RemoteAddr, true)
	return ok && r.trusts(peer)
}

// ClientIP returns the client of req: the direct peer (req.RemoteAddr), or,
// when the peer is a trusted proxy, the hop its forwarding headers name, by
// the rules of the package documentation. The address has no zone and is
// never IPv4-mapped. ClientIP returns the zero Addr only when req is nil or
// req.RemoteAddr is not an address ("" or "@" for a Unix socket, garbage);
// headers are then not read. It never panics.
func (r *Resolver) ClientIP(req *http.Request) netip.Addr {
	if req == nil {
		return netip.Addr{}
	}
	peer, ok := parseHop(req.RemoteAddr, true)
	if !ok {
		return netip.Addr{}
	}
	if !r.trusts(peer) {
		return peer
	}
	name, lines := r.forwarding(req.Header)
	if len(lines) == 0 || oversized(lines) {
		return peer
	}
	w := walker{r: r, client: peer, budget: maxHops - 1}
	switch name {
	case hdrForwarded:
		w.forwarded(lines)
	case hdrXForwardedFor:
		w.commaList(lines)
	default:
		w.single(lines)
	}
	return w.client
}

// forwarding returns the forwarding header to read from h and its lines:
// r.header if set, else the first present of Forwarded, X-Forwarded-For
// and X-Real-IP.
func (r *Resolver) forwarding(h http.Header) (string, []string) {
	if r.header != "" {
		return r.header, h[r.header]
	}
	for _, name := range [...]string{hdrForwarded, hdrXForwardedFor, hdrXRealIP} {
		if lines := h[name]; len(lines) > 0 {
			return name, lines
		}
	}
	return "", nil
}

// oversized reports whether lines together exceed maxHeaderBytes.
func oversized(lines []string) bool {
	n := 0
	for _, l := range lines {
		n += len(l)
		if n > maxHeaderBytes {
			return true
		}
	}
	return false
}

// Key returns the rate-limit key of req: KeyOf(r.ClientIP(req)). It is ""
// only when ClientIP is the zero Addr.
func (r *Resolver) Key(req *http.Request) string {
	return r.KeyOf(r.ClientIP(req))
}

// KeyOf returns the rate-limit key of the address a: a (zone dropped,
// IPv4-mapped unmapped) masked to the group prefix of its family, as text.
// A full-length group is the bare address ("203.0.113.7",
// "2001:db8::7" with IPv6Prefix 128); a shorter one is the masked prefix in
// CIDR notation ("203.0.113.0/24", "2001:db8:1:2::/64"). The zero Addr gives
// "". Keys of different groups differ; an IPv4 key never equals an IPv6 one.
func (r *Resolver) KeyOf(a netip.Addr) string {
	a = normAddr(a)
	if !a.IsValid() {
		return ""
	}
	bits := r.groupBits(a)
	var buf [64]byte // the longest key, an IPv6 prefix, is 43 bytes
	if bits == a.BitLen() {
		return string(a.AppendTo(buf[:0]))
	}
	p, err := a.Prefix(bits)
	if err != nil { // unreachable: bits was validated by New
		return string(a.AppendTo(buf[:0]))
	}
	return string(p.AppendTo(buf[:0]))
}

// groupBits returns the group prefix length for a, which is valid and
// unmapped.
func (r *Resolver) groupBits(a netip.Addr) int {
	var v4, v6 int
	if r != nil {
		v4, v6 = r.v4bits, r.v6bits
	}
	if a.Is4() {
		if v4 == 0 {
			return 32
		}
		return v4
	}
	if v6 == 0 {
		return 64
	}
	return v6
}

// walker walks the hops of a forwarding header from the right. client is
// the last hop walked (initially the trusted direct peer); budget is the
// number of header entries still allowed to be looked at.
type walker struct {
	r      *Resolver
	client netip.Addr
	budget int
}

// step walks one header entry, the next hop to the left. It reports
// whether the walk goes on: it stops at an entry that is not an address
// (client stays the hop to its right), at an untrusted address (which
// becomes client), and when the budget is spent.
func (w *walker) step(entry string) bool {
	if w.budget <= 0 {
		return false
	}
	w.budget--
	a, ok := parseHop(entry, false)
	if !ok {
		return false
	}
	w.client = a
	return w.r.trusts(a)
}

// commaList walks X-Forwarded-For lines: comma-separated entries with
// optional spaces or tabs around each.
func (w *walker) commaList(lines []string) {
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		for {
			j := strings.LastIndexByte(line, ',')
			if !w.step(trimOWS(line[j+1:])) {
				return
			}
			if j < 0 {
				break
			}
			line = line[:j]
		}
	}
}

// single walks X-Real-IP lines: one address per line, with optional
// spaces or tabs around it.
func (w *walker) single(lines []string) {
	for i := len(lines) - 1; i >= 0; i-- {
		if !w.step(trimOWS(lines[i])) {
			return
		}
	}
}

// forwarded walks RFC 7239 Forwarded lines: comma-separated elements whose
// for= parameter is the hop.
func (w *walker) forwarded(lines []string) {
	for i := len(lines) - 1; i >= 0; i-- {
		if !w.forwardedLine(lines[i]) {
			return
		}
	}
}

// forwardedLine walks the elements of one Forwarded line from the right and
// reports whether the walk goes on to the line before. Quoted strings make
// the line readable only from the left, so its last maxHops elements are
// first collected in a ring of substrings (no allocation).
func (w *walker) forwardedLine(line string) bool {
	var ring [maxHops]string
	n := 0
	for rest, more := line, true; more; n++ {
		var elem string
		elem, rest, more = cutUnquoted(rest, ',')
		ring[n%maxHops] = elem
	}
	for k := n - 1; k >= 0 && k >= n-maxHops; k-- {
		v, ok := forParam(ring[k%maxHops])
		if !ok {
			v = "" // not an address: step stops the walk
		}
		if !w.step(v) {
			return false
		}
	}
	return true
}
