package rls

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/table"
)

// FuzzParseConfig: Parse never panics on any file, a refused file is a
// *ConfigError matching ErrConfig that names the file (and a line within
// it, when it has one), and whatever parses is a Config whose domains
// answer lookups: parsing it again gives the same domains, and every path
// the config names (a wildcard's '*'s and a key alone's value filled in by
// the fuzzer), and the fuzzer's own key and value, finds either no limit,
// an unlimited one, or one that is a valid policy of package table (what
// the service counts against): a config that loads never fails a request.
func FuzzParseConfig(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "ported", "*.yaml"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seed files: %v", err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "key", "value")
	}
	for _, s := range []string{
		"domain: d\ndescriptors:\n  - key: k\n    value: \"/api/*\"\n    rate_limit: {unit: minute, requests_per_unit: 600, name: api, replaces: [{name: other}], algorithm: token_bucket, burst: 50, unit_multiplier: 2}\n    shadow_mode: true\n    share_threshold: true\n",
		"domain: d\ndescriptors:\n  - key: k\n    descriptors:\n      - key: j\n        rate_limit: {unlimited: true}\n",
		"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
		"domain: d\ndescriptors: [{key: k}, {key: k}]\n",
		"domain: &a d\ndescriptors: *a\n",
		"domain: d\ndescriptors:\n  - <<: {key: k}\n",
		"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 18446744073709551616}\n",
		"",
		"---\n---\n",
		"domain: [\n",
	} {
		f.Add([]byte(s), "k", "/api/v1")
	}
	f.Fuzz(func(t *testing.T, data []byte, key, value string) {
		const name = "conf/f.yaml"
		c, err := Parse(File{Name: name, Data: data})
		if err != nil {
			var ce *ConfigError
			if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) {
				t.Fatalf("Parse error %T %v is not a *ConfigError matching ErrConfig", err, err)
			}
			if ce.File != name || !strings.HasPrefix(err.Error(), name+":") || ce.Line < 0 || ce.Msg == "" {
				t.Fatalf("Parse error %q (%+v) does not name %s, a line and what is wrong", err, ce, name)
			}
			// YAML breaks lines at \n, \r\n and a lone \r; a fault at the
			// end of the file (a document of "---" alone, with no key) is
			// on the line after the last.
			if lines := strings.Count(string(data), "\n") + strings.Count(string(data), "\r") - strings.Count(string(data), "\r\n") + 1; ce.Line > lines+1 {
				t.Fatalf("Parse error %q names line %d of a %d-line file", err, ce.Line, lines)
			}
			return
		}
		again, err := Parse(File{Name: name, Data: data})
		if err != nil || !slices.Equal(again.Domains(), c.Domains()) {
			t.Fatalf("a second Parse of the same file: %v, domains %q, want %q", err, again.Domains(), c.Domains())
		}
		for _, domain := range c.Domains() {
			if !c.knows(domain) {
				t.Fatalf("domain %q listed but not known", domain)
			}
			// Every configured path, as a request would name it (a wildcard's
			// '*'s and a key alone's value filled with value), and key=value.
			paths := [][]*rlcommon.RateLimitDescriptor_Entry{{{Key: key, Value: value}}}
			var walk func(lv *level, path []*rlcommon.RateLimitDescriptor_Entry)
			walk = func(lv *level, path []*rlcommon.RateLimitDescriptor_Entry) {
				if lv == nil || len(path) >= 8 || len(paths) >= 1000 {
					return
				}
				visit := func(n *node, v string) {
					p := append(slices.Clone(path), &rlcommon.RateLimitDescriptor_Entry{Key: n.key, Value: v})
					paths = append(paths, p)
					walk(n.children, p)
				}
				for _, n := range lv.exact {
					visit(n, n.value)
				}
				for _, n := range lv.wild {
					visit(n, strings.Join(n.parts, value))
				}
				for _, n := range lv.keyOnly {
					visit(n, value)
				}
			}
			walk(c.domains[domain], nil)
			for _, p := range paths {
				one := &rlcommon.RateLimitDescriptor{Entries: p}
				m := c.match(domain, one)
				if m.limit == nil || m.limit.Unlimited {
					continue
				}
				l := m.limit
				// What the service counts a request against must be a valid
				// policy: a config that parses never fails a request.
				pol := table.Policy{Algorithm: l.Algorithm, Scale: l.Scale(), Limit: int64(l.RequestsPerUnit), Burst: l.Burst}
				if err := pol.Validate(); err != nil {
					t.Fatalf("domain %q, entries %v: the limit %+v is not a valid policy: %v", domain, one.Entries, *l, err)
				}
			}
		}
	})
}
