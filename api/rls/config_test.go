package rls

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// TestConfigErrors checks each strictness rule of the format (the
// reference's test/config error files, and the extensions'): the error
// names the file, the line and the field.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, doc   string
		line        int
		field, want string
	}{
		{"bad yaml (bad_yaml.yaml)", "'''\n", 2, "", "found unexpected end of stream"},
		{"empty domain (empty_domain.yaml)", "descriptors:\n", 1, "domain", "is required"},
		{"blank domain", "domain: ''\n", 1, "domain", "must not be empty"},
		{"empty key (empty_key.yaml)", "domain: d\ndescriptors:\n  - value: value1\n", 3, "descriptors[0].key", "is required"},
		{"duplicate key (duplicate_key.yaml)", "domain: d\ndescriptors:\n  - key: key1\n    value: value1\n\n  - key: key1\n    value: value1\n",
			6, "descriptors[1].key", `key "key1" with value "value1" is already defined at this level`},
		{"duplicate key only", "domain: d\ndescriptors:\n  - key: k\n  - key: k\n", 4, "descriptors[1].key", `key "k" is already defined`},
		{"repeated yaml key", "domain: d\ndescriptors:\n  - key: k\n    key: j\n", 4, "descriptors[0].key", "is repeated (first at line 3)"},
		{"bad unit (bad_limit_unit.yaml)", "domain: d\ndescriptors:\n  - key: key1\n    rate_limit:\n      unit: foo\n      requests_per_unit: 5\n",
			5, "descriptors[0].rate_limit.unit", `"foo" is not a unit`},
		{"missing unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 5\n", 5, "descriptors[0].rate_limit.unit", "is required"},
		{"misspelled key (misspelled_key.yaml)", "domain: d\ndescriptors:\n  - key: key1\n    ratelimit:\n      unit: day\n",
			4, "descriptors[0].ratelimit", "is not a known key"},
		{"misspelled key (misspelled_key2.yaml)", "domain: d\ndescriptors:\n  - key: key1\n    rate_limit:\n      unit: day\n      requestsperunit: 5\n",
			6, "descriptors[0].rate_limit.requestsperunit", "is not a known key"},
		{"non-string key (non_string_key.yaml)", "0.25: test-domain\n", 1, "", `key "0.25" is not a string`},
		{"non-map list (non_map_list.yaml)", "domain: d\ndescriptors:\n  - a\n  - b\n", 3, "descriptors[0]", "must be a mapping"},
		{"unlimited with unit (unlimited_with_unit.yaml)", "domain: d\ndescriptors:\n  - key: foo\n    rate_limit:\n      unlimited: true\n      unit: day\n      requests_per_unit: 25\n",
			6, "descriptors[0].rate_limit.unit", "must not be set with unlimited"},
		{"empty replaces (replaces_empty.yaml)", "domain: d\ndescriptors:\n  - key: k\n    descriptors:\n      - key: s\n        rate_limit:\n          name: self\n          replaces:\n            - name:\n          unit: second\n",
			9, "descriptors[0].descriptors[0].rate_limit.replaces[0].name", "must not be empty"},
		{"self replaces (replaces_self.yaml)", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      name: self\n      replaces:\n        - name: self\n      unit: second\n",
			7, "descriptors[0].rate_limit.replaces[0].name", `must not be the limit's own name "self"`},
		{"share_threshold without wildcard", "domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n", 5, "descriptors[0].share_threshold", "needs a value with a '*' wildcard"},
		{"requests_per_unit negative", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n", 4, "descriptors[0].rate_limit.requests_per_unit", "must be a whole number from 0 to 4294967295"},
		{"requests_per_unit too big", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 4294967296}\n", 4, "descriptors[0].rate_limit.requests_per_unit", "from 0 to 4294967295"},
		{"shadow_mode not a bool", "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: sometimes\n", 4, "descriptors[0].shadow_mode", "must be true or false"},
		{"quota mode", "domain: d\ndescriptors:\n  - key: k\n    quota_mode: true\n", 4, "descriptors[0].quota_mode", "not supported"},
		{"metadata", "domain: d\ndescriptors:\n  - key: k\n    metadata: {a: b}\n", 4, "descriptors[0].metadata", "not supported"},
		{"bad algorithm", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: gcra}\n", 4, "descriptors[0].rate_limit.algorithm", "must be one of: fixed_window, sliding_window, token_bucket, leaky_bucket"},
		{"algorithm with unlimited", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, algorithm: token_bucket}\n", 4, "descriptors[0].rate_limit.algorithm", "must not be set with unlimited"},
		{"multiplier zero", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, unit_multiplier: 0}\n", 4, "descriptors[0].rate_limit.unit_multiplier", "must be a whole number from 1 to 31622400 for unit second"},
		{"window past MaxScale", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: month, requests_per_unit: 1, unit_multiplier: 13}\n", 4, "descriptors[0].rate_limit.unit_multiplier", "from 1 to 12 for unit month (a window is at most 8784h0m0s)"},
		{"burst too long to refill", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 1, algorithm: token_bucket, burst: 2}\n", 4, "descriptors[0].rate_limit.burst", "must be at most"},
		{"unknown top-level key", "domain: d\nrules: []\n", 2, "rules", "is not a known key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(File{Name: "conf/x.yaml", Data: []byte(c.doc)})
			var ce *ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) {
				t.Fatalf("got %v, want a *ConfigError", err)
			}
			if ce.File != "conf/x.yaml" || ce.Line != c.line || ce.Field != c.field || !strings.Contains(ce.Msg, c.want) {
				t.Errorf("got file %q line %d field %q msg %q; want conf/x.yaml line %d field %q msg containing %q",
					ce.File, ce.Line, ce.Field, ce.Msg, c.line, c.field, c.want)
			}
			prefix := "conf/x.yaml:"
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("message %q does not start with %q", err, prefix)
			}
		})
	}
}

// TestDuplicateDomainAcrossFiles is the reference's TestDuplicateDomain: a
// domain in two files is refused, naming both.
func TestDuplicateDomainAcrossFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), "domain: test-domain\ndescriptors:\n  - key: k\n")
	write(t, filepath.Join(dir, "b.yml"), "# second\ndomain: test-domain\n")
	_, err := Load(dir)
	want := filepath.Join(dir, "b.yml") + `:2: domain: domain "test-domain" is already defined in ` + filepath.Join(dir, "a.yaml")
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadDirectory reads the *.yaml and *.yml files of a directory in name
// order, skipping hidden names, other files and subdirectories, and
// following symlinks to files (a Kubernetes ConfigMap mount).
func TestLoadDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "..data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(data, "b.yaml"), "domain: b\n")
	if err := os.Symlink(filepath.Join("..data", "b.yaml"), filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "a.yml"), "domain: a\n")
	write(t, filepath.Join(dir, "notes.txt"), "domain: : broken")
	write(t, filepath.Join(dir, ".hidden.yaml"), "domain: : broken")
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Domains(), ","); got != "a,b" {
		t.Errorf("domains %s, want a,b", got)
	}
	if got := c.Files(); len(got) != 2 || got[0] != filepath.Join(dir, "a.yml") || got[1] != filepath.Join(dir, "b.yaml") {
		t.Errorf("files %v, want a.yml then b.yaml", got)
	}
	empty := t.TempDir()
	if _, err := Load(empty); !errors.Is(err, ErrNoFiles) {
		t.Errorf("empty dir: got %v, want ErrNoFiles", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: got %v, want os.ErrNotExist", err)
	}
}

// TestStoreSwap: a Store hands out one whole config at a time.
func TestStoreSwap(t *testing.T) {
	t.Parallel()
	a := loadFiles(t, "ported/basic.yaml")
	b := loadFiles(t, "ported/shadow.yaml")
	s := NewStore(nil)
	if s.Config() != nil {
		t.Fatal("new Store has a config")
	}
	if old := s.Swap(a); old != nil || s.Config() != a {
		t.Fatal("Swap(a) did not install a")
	}
	if old := s.Swap(b); old != a || s.Config() != b {
		t.Fatal("Swap(b) did not return a and install b")
	}
}

// TestExtensions: algorithm, burst and unit_multiplier become the policy.
func TestExtensions(t *testing.T) {
	t.Parallel()
	c, err := Parse(File{Name: "x.yaml", Data: []byte(`domain: ext
descriptors:
  - key: tb
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token_bucket, burst: 5}
  - key: thirty
    rate_limit: {unit: second, requests_per_unit: 3, unit_multiplier: 30}
  - key: week
    rate_limit: {unit: WEEK, requests_per_unit: 1}
`)})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		key   string
		alg   table.Algorithm
		scale time.Duration
		burst int64
	}{
		{"tb", table.TokenBucket, time.Minute, 5},
		{"thirty", table.FixedWindow, 30 * time.Second, 0},
		{"week", table.FixedWindow, 7 * 24 * time.Hour, 0},
	}
	for _, cs := range cases {
		m := c.match("ext", ds(cs.key+"=x"))
		if m.limit == nil {
			t.Fatalf("%s: no limit", cs.key)
		}
		if l := m.limit; l.Algorithm != cs.alg || l.Scale() != cs.scale || l.Burst != cs.burst {
			t.Errorf("%s: got %v %v burst %d, want %v %v burst %d", cs.key, l.Algorithm, l.Scale(), l.Burst, cs.alg, cs.scale, cs.burst)
		}
	}
}
