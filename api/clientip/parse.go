package clientip

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParsePrefixes parses a comma-separated list of CIDR prefixes and bare IP
// addresses, such as the value of a --trusted-proxies flag:
//
//	10.0.0.0/8, 192.0.2.7, 2001:db8::/32
//
// Spaces are allowed around items. A bare address is a prefix of full
// length (/32 or /128). Host bits are cleared (10.1.2.3/8 is 10.0.0.0/8),
// and an IPv4-mapped IPv6 item of length 96 or more is the IPv4 prefix it
// maps (::ffff:192.0.2.7 is 192.0.2.7/32). Zones are not allowed. A string
// that is empty or only spaces gives nil. Errors wrap ErrBadPrefix and name
// the bad item by its 1-based position and its text; an empty item (as in
// "a,,b" or a trailing comma) is an error.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := make([]netip.Prefix, 0, strings.Count(s, ",")+1)
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		p, reason := parsePrefix(item)
		if reason != "" {
			return nil, fmt.Errorf("%w: item %d %q: %s", ErrBadPrefix, i+1, item, reason)
		}
		out = append(out, p)
	}
	return out, nil
}

// parsePrefix parses one trimmed item of ParsePrefixes. It returns the
// normalized prefix, or why the item is bad.
func parsePrefix(item string) (netip.Prefix, string) {
	if item == "" {
		return netip.Prefix{}, "empty"
	}
	addr, bits, hasBits := strings.Cut(item, "/")
	a, err := netip.ParseAddr(addr)
	switch {
	case err != nil:
		return netip.Prefix{}, "not an IP address"
	case a.Zone() != "":
		return netip.Prefix{}, "zone not allowed"
	}
	n := a.BitLen()
	if hasBits {
		var ok bool
		if n, ok = parseBits(bits); !ok {
			return netip.Prefix{}, "prefix length is not a decimal number"
		}
		if n > a.BitLen() {
			return netip.Prefix{}, fmt.Sprintf("prefix length must be 0..%d", a.BitLen())
		}
	}
	return normPrefix(netip.PrefixFrom(a, n)), ""
}

// parseBits parses a prefix length: decimal digits without a leading zero
// unless it is "0". Values above 999 are returned as 999.
func parseBits(s string) (int, bool) {
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = min(n*10+int(c-'0'), 999)
	}
	return n, true
}

// parseHop parses one hop: the direct peer or a forwarding-header entry.
// Accepted forms are
//
//	192.0.2.7   192.0.2.7:PORT   2001:db8::7   [2001:db8::7]   [2001:db8::7]:PORT
//
// where PORT is decimal digits with a value of at most 65535 (as
// netip.ParseAddrPort takes them, leading zeros allowed) or an RFC 7239
// obfuscated port ("_" and one or more of ALPHA DIGIT "." "_" "-"). The
// form is chosen by syntax (leading "[", number of colons), so parseHop does
// not allocate on any accepted input. An IPv6 zone is accepted and dropped;
// unless anyZone, it must consist of RFC 3986 unreserved characters (as an
// RFC 6874 ZoneID does), which a forwarding proxy would write. The result
// has no zone and is never IPv4-mapped.
func parseHop(s string, anyZone bool) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		end := strings.LastIndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !validPort(rest[1:])) {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(s[1:end])
		if err != nil || !a.Is6() || !anyZone && !validZone(a.Zone()) {
			return netip.Addr{}, false
		}
		return normAddr(a), true
	}
	switch strings.Count(s, ":") {
	case 0: // bare IPv4
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Addr{}, false
		}
		return a, true
	case 1: // IPv4:port
		host, port, _ := strings.Cut(s, ":")
		if !validPort(port) {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is4() {
			return netip.Addr{}, false
		}
		return a, true
	default: // bare IPv6
		a, err := netip.ParseAddr(s)
		if err != nil || !anyZone && !validZone(a.Zone()) {
			return netip.Addr{}, false
		}
		return normAddr(a), true
	}
}

// validZone reports whether zone is empty or made of RFC 3986 unreserved
// characters: ALPHA DIGIT "-" "." "_" "~".
func validZone(zone string) bool {
	for i := 0; i < len(zone); i++ {
		if c := zone[i]; !isAlnum(c) && c != '-' && c != '.' && c != '_' && c != '~' {
			return false
		}
	}
	return true
}

// validPort reports whether p is a port: decimal digits with a value of at
// most 65535, or an RFC 7239 obfport.
func validPort(p string) bool {
	if p == "" {
		return false
	}
	if p[0] == '_' {
		if len(p) == 1 {
			return false
		}
		for i := 1; i < len(p); i++ {
			c := p[i]
			if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
				return false
			}
		}
		return true
	}
	n := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c < '0' || c > '9' {
			return false
		}
		if n = n*10 + int(c-'0'); n > 65535 {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// trimOWS removes HTTP optional whitespace (spaces and tabs) around s.
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// cutUnquoted cuts s around the first sep outside an HTTP quoted-string
// (a backslash inside quotes escapes the next byte). It returns s, "",
// false when there is none; an unterminated quoted-string runs to the end
// of s.
func cutUnquoted(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); {
		rest := s[i:]
		j := strings.IndexByte(rest, sep)
		q := strings.IndexByte(rest, '"')
		if j >= 0 && (q < 0 || j < q) {
			return s[:i+j], s[i+j+1:], true
		}
		if q < 0 {
			break
		}
		// Skip the quoted-string opened at q, escapes included.
		i += q + 1
		for i < len(s) && s[i] != '"' {
			if s[i] == '\\' {
				i++
			}
			i++
		}
		i++ // past the closing quote (or the end)
	}
	return s, "", false
}

// forParam returns the value of the for parameter of one RFC 7239
// forwarded-element, unquoted, and whether the element is well formed and
// has exactly one. Parameter names are case-insensitive. A well-formed
// element is a ";"-separated list of (possibly empty) name=value pairs,
// with optional spaces or tabs around each pair; a name is an RFC 9110
// token; a value is a quoted-string or a run of bytes other than space,
// tab, ";", "," and DQUOTE (more lenient than RFC 7239's token, so that an
// unquoted "[2001:db8::1]:80" is read as its sender meant). A quoted value
// containing a backslash escape is reported as not well formed: no address
// needs one.
func forParam(elem string) (string, bool) {
	var val string
	seen := false
	for rest, more := elem, true; more; {
		var pair string
		pair, rest, more = cutUnquoted(rest, ';')
		pair = trimOWS(pair)
		if pair == "" {
			continue
		}
		name, v, ok := strings.Cut(pair, "=")
		if !ok || !isToken(name) {
			return "", false
		}
		if v, ok = paramValue(v); !ok {
			return "", false
		}
		if len(name) == 3 && strings.EqualFold(name, "for") {
			if seen {
				return "", false
			}
			val, seen = v, true
		}
	}
	return val, seen
}

// paramValue unquotes a Forwarded parameter value (see forParam).
func paramValue(v string) (string, bool) {
	if v == "" {
		return "", false
	}
	if v[0] == '"' {
		if len(v) < 2 || v[len(v)-1] != '"' {
			return "", false
		}
		v = v[1 : len(v)-1]
		for i := 0; i < len(v); i++ {
			if v[i] == '"' || v[i] == '\\' {
				return "", false
			}
		}
		return v, true
	}
	for i := 0; i < len(v); i++ {
		if v[i] == '"' || v[i] == ' ' || v[i] == '\t' {
			return "", false
		}
	}
	return v, true
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		default:
			if !isAlnum(c) {
				return false
			}
		}
	}
	return true
}
