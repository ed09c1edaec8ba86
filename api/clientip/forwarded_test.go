package clientip

import (
	"strings"
	"testing"
)

func TestForParam(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		elem   string
		want   string
		wantOK bool
	}{
		{"for=192.0.2.60", "192.0.2.60", true},
		{"for=192.0.2.60;proto=http;by=203.0.113.43", "192.0.2.60", true},
		{`For="[2001:db8:cafe::17]:4711"`, "[2001:db8:cafe::17]:4711", true},
		{" ; proto=https ;\tfOr=_hidden ; ", "_hidden", true},
		{`for=unknown;ext="a;b,c"`, "unknown", true},
		{"proto=https", "", false},
		{"", "", false},
		{"for=1;for=2", "", false},
		{"for=", "", false},
		{`for=""`, "", true},
		{`for="1.2.3.4`, "", false},
		{`for="1.2.3.4\""`, "", false},
		{`for=1.2"3.4`, "", false},
		{"for=1.2.3.4;secure", "", false},
		{"for =1.2.3.4", "", false},
		{"for= 1.2.3.4", "", false},
		{"f@r=1;for=1.2.3.4", "", false},
		{"forx=1.2.3.4", "", false},
	} {
		got, ok := forParam(tc.elem)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("forParam(%q) = %q, %v; want %q, %v", tc.elem, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestParseHop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string // "" for not an address
	}{
		{"192.0.2.7", "192.0.2.7"},
		{"192.0.2.7:80", "192.0.2.7"},
		{"192.0.2.7:065535", "192.0.2.7"},
		{"192.0.2.7:_obf-1.x", "192.0.2.7"},
		{"2001:db8::7", "2001:db8::7"},
		{"[2001:db8::7]", "2001:db8::7"},
		{"[2001:db8::7]:443", "2001:db8::7"},
		{"[2001:db8::7]:_p", "2001:db8::7"},
		{"[fe80::1%eth0]:443", "fe80::1"},
		{"::ffff:192.0.2.7", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:1", "192.0.2.7"},
		{"", ""},
		{"192.0.2.7:", ""},
		{"192.0.2.7:65536", ""},
		{"192.0.2.7:_", ""},
		{"192.0.2.7:_a b", ""},
		{"192.0.2.7:8o", ""},
		{"192.0.2.7:80:80", ""},
		{"[192.0.2.7]", ""},
		{"[2001:db8::7", ""},
		{"[2001:db8::7]x", ""},
		{"[2001:db8::7]:", ""},
		{"2001:db8::7:80:80:80:80:80:80", ""},
		{"unknown", ""},
		{"_hidden", ""},
		{"192.0.2.7%eth0", ""},
		{" 192.0.2.7", ""},
		{"fe80::1%eth0.1_a-b~", "fe80::1"},
		{"fe80::1% 0", ""},
		{"[fe80::1%a=b]", ""},
		{"fe80::1%", ""},
	} {
		a, ok := parseHop(tc.in, false)
		got := ""
		if ok {
			got = a.String()
		}
		if got != tc.want {
			t.Errorf("parseHop(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzForwardedLine checks that a Forwarded line splits into elements that
// join back into it, and that every for= value found is a DQUOTE-free
// substring of its element.
func FuzzForwardedLine(f *testing.F) {
	for _, s := range []string{
		"for=192.0.2.60;proto=http;by=203.0.113.43",
		`for=192.0.2.43, for="[2001:db8:cafe::17]:4711"`,
		`for="a,b\",c", for=_x;;`,
		`for="unterminated, for=1.2.3.4`,
		",,;=\"\\",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var elems []string
		for rest, more := line, true; more; {
			var e string
			e, rest, more = cutUnquoted(rest, ',')
			elems = append(elems, e)
		}
		if got := strings.Join(elems, ","); got != line {
			t.Fatalf("elements %q join to %q, want %q", elems, got, line)
		}
		for _, e := range elems {
			v, ok := forParam(e)
			if !ok && v != "" {
				t.Fatalf("forParam(%q) = %q, false; want \"\" when not ok", e, v)
			}
			if ok && (!strings.Contains(e, v) || strings.Contains(v, `"`)) {
				t.Fatalf("forParam(%q) = %q: not a DQUOTE-free substring", e, v)
			}
		}
	})
}
