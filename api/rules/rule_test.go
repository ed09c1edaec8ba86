package rules

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	ok := nameRule("a")
	with := func(f func(r *Rule)) Rule { r := ok; f(&r); return r }
	tests := []struct {
		name  string
		rule  Rule
		field string // "" for a valid rule
	}{
		{"valid", ok, ""},
		{"valid url rule", urlRule("a.b_c-1", "/api", "post", "Example.com:80"), ""},
		{"valid ipv6 host", urlRule("a", "/", "", "[::1]:8080"), ""},
		{"valid bare ipv6 host", urlRule("a", "/", "", "2001:db8::1"), ""},
		{"valid unspecified ipv6 host", urlRule("a", "/", "", "[::]"), ""},
		{"valid ipv4-mapped ipv6 host", urlRule("a", "/", "", "[::ffff:192.0.2.1]:443"), ""},
		{"valid limit 0", with(func(r *Rule) { r.Limit = 0 }), ""},
		{"valid burst", with(func(r *Rule) { r.Burst = 5 }), ""},
		{"missing name", with(func(r *Rule) { r.Name = "" }), "name"},
		{"bad name", with(func(r *Rule) { r.Name = "_a" }), "name"},
		{"unknown algorithm", with(func(r *Rule) { r.Algorithm = table.Algorithm(200) }), "algorithm"},
		{"scale 0", with(func(r *Rule) { r.Scale = 0 }), "scale"},
		{"scale negative", with(func(r *Rule) { r.Scale = -time.Second }), "scale"},
		{"scale too large", with(func(r *Rule) { r.Scale = table.MaxScale + time.Millisecond }), "scale"},
		{"scale not whole ms", with(func(r *Rule) { r.Scale = time.Millisecond + 1 }), "scale"},
		{"limit negative", with(func(r *Rule) { r.Limit = -1 }), "limit"},
		{"burst negative", with(func(r *Rule) { r.Burst = -1 }), "burst"},
		{"match without prefix", urlRule("a", "", "GET", ""), "match.prefix"},
		{"prefix relative", urlRule("a", "api", "", ""), "match.prefix"},
		{"prefix too long", urlRule("a", "/"+string(make([]byte, MaxPrefixLen)), "", ""), "match.prefix"},
		{"prefix control char", urlRule("a", "/a\x00", "", ""), "match.prefix"},
		{"prefix invalid utf-8", urlRule("a", "/\xff", "", ""), "match.prefix"},
		{"method with space", urlRule("a", "/", "G T", ""), "match.method"},
		{"method too long", urlRule("a", "/", "GETGETGETGETGETGETGETGETGETGETGET", ""), "match.method"},
		{"host with slash", urlRule("a", "/", "", "a/b"), "match.host"},
		{"host port too long", urlRule("a", "/", "", "a:123456"), "match.host"},
		{"host unclosed bracket", urlRule("a", "/", "", "[::1"), "match.host"},
		{"host bracketed name", urlRule("a", "/", "", "[example.com]"), "match.host"},
		{"host bracket junk", urlRule("a", "/", "", "[::1]x"), "match.host"},
		{"host empty port", urlRule("a", "/", "", "a:"), "match.host"},
		{"host ipv6 letters", urlRule("a", "/", "", "fe80::g"), "match.host"},
		// Hex digits and colons that are no IPv6 address: "[:]" passed
		// once, and its canonical form ":" then failed (FuzzParse).
		{"host bracketed colon", urlRule("a", "/", "", "[:]"), "match.host"},
		{"host bracketed hex and colon", urlRule("a", "/", "", "[a:]:80"), "match.host"},
		{"host colons only", urlRule("a", "/", "", ":::"), "match.host"},
		{"host too many ipv6 groups", urlRule("a", "/", "", "1:2:3:4:5:6:7:8:9"), "match.host"},
		{"host ipv6 zone", urlRule("a", "/", "", "[fe80::1%eth0]"), "match.host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.rule.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			checkError(t, err, Error{Index: -1, Name: tt.rule.Name, Field: tt.field})
		})
	}
}

func TestFormatScale(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   time.Duration
		want string
	}{
		{time.Millisecond, "1ms"},
		{30 * time.Second, "30s"},
		{time.Minute, "1m"},
		{90 * time.Second, "1m30s"},
		{time.Hour, "1h"},
		{90 * time.Minute, "1h30m"},
		{time.Hour + time.Second, "1h0m1s"},
		{table.MaxScale, "8784h"},
		{1500 * time.Millisecond, "1.5s"},
	}
	for _, tt := range tests {
		if got := formatScale(tt.in); got != tt.want {
			t.Errorf("formatScale(%v) = %q, want %q", tt.in, got, tt.want)
		}
		if d, msg := parseScaleString(formatScale(tt.in)); d != tt.in || msg != "" {
			t.Errorf("parseScaleString(%q) = %v, %q; want %v", formatScale(tt.in), d, msg, tt.in)
		}
	}
}
