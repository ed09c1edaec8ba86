package rls

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/api/internal/yamlconf"
	"github.com/ratelimitd/ratelimitd/table"
)

// The sentinel errors of the package. Match them with errors.Is.
var (
	// ErrConfig is matched by every error Load and Parse return about the
	// content of a config file; such errors are *ConfigError values.
	ErrConfig = errors.New("rls: invalid config")
	// ErrNoFiles: the config directory holds no *.yaml or *.yml file.
	ErrNoFiles = errors.New("rls: no config files")
	// ErrOption is matched by every error NewService returns for options it cannot use.
	ErrOption = errors.New("rls: invalid option")
	// ErrClosed is returned (wrapped, in ReloadResult.Err) by
	// Watcher.Reload after Close, or when Close interrupts it.
	ErrClosed = errors.New("rls: watcher closed")
	// ErrUnsettled is returned (wrapped, in ReloadResult.Err) when the
	// config kept changing between the reads of one reload.
	ErrUnsettled = errors.New("rls: config kept changing")
)

// ConfigError is a fault in a config file: the file, the line, the field
// and what is wrong. It matches ErrConfig with errors.Is.
type ConfigError struct {
	File  string // the file's path as given to Load, or the name given to Parse
	Line  int    // 1-based; 0 when the fault has no line (an unreadable file)
	Field string // the key path, e.g. "descriptors[0].rate_limit.unit"; empty for a YAML syntax error
	Msg   string // what is wrong
}

// Error implements error: "FILE:LINE: FIELD: MSG".
func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports whether target is ErrConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// Config is a loaded set of domains, each a tree of descriptors. It is
// immutable and safe for concurrent use; a reload builds a new one.
type Config struct {
	domains map[string]*level
	files   []string
	digest  [32]byte // of the files' names and contents, in load order
}

// Domains returns the configured domains, sorted.
func (c *Config) Domains() []string {
	names := make([]string, 0, len(c.domains))
	for d := range c.domains {
		names = append(names, d)
	}
	slices.Sort(names)
	return names
}

// Files returns the files the config was loaded from, in load order.
func (c *Config) Files() []string { return slices.Clone(c.files) }

// level is one level of a descriptor tree: its descriptors by exact
// key and value, its wildcard descriptors in config order, and its
// descriptors by key alone.
type level struct {
	exact   map[entry]*node
	wild    []*node
	keyOnly map[string]*node
}

// entry is a descriptor entry: a key and a value.
type entry struct{ key, value string }

// node is one configured descriptor.
type node struct {
	key, value     string
	parts          []string // value split at '*' when it is a wildcard
	limit          *Limit   // nil: none at this level
	valueToMetric  bool
	shareThreshold bool
	children       *level // nil: a leaf
}

// Limit is a configured (or, for a request's override, requested) limit.
type Limit struct {
	Name            string
	RequestsPerUnit uint32
	Unit            rlsv3.RateLimitResponse_RateLimit_Unit
	UnitMultiplier  uint32 // 1 unless set
	Unlimited       bool
	ShadowMode      bool
	DetailedMetric  bool
	Replaces        []string
	Algorithm       table.Algorithm
	Burst           int64
	// multiplierSet says the config or the override named unit_multiplier,
	// so that the answer's current_limit carries it.
	multiplierSet bool
}

// Scale returns the window of l: its unit times its multiplier.
func (l *Limit) Scale() time.Duration {
	return unitSeconds(l.Unit) * time.Duration(l.UnitMultiplier) * time.Second
}

// unitSeconds returns the length of a unit in seconds, epoch-aligned as
// the reference counts them: a week of 7 days, a month of 30, a year of
// 365; 0 for an unknown unit.
func unitSeconds(u rlsv3.RateLimitResponse_RateLimit_Unit) time.Duration {
	switch u {
	case rlsv3.RateLimitResponse_RateLimit_SECOND:
		return 1
	case rlsv3.RateLimitResponse_RateLimit_MINUTE:
		return 60
	case rlsv3.RateLimitResponse_RateLimit_HOUR:
		return 3600
	case rlsv3.RateLimitResponse_RateLimit_DAY:
		return 86400
	case rlsv3.RateLimitResponse_RateLimit_WEEK:
		return 7 * 86400
	case rlsv3.RateLimitResponse_RateLimit_MONTH:
		return 30 * 86400
	case rlsv3.RateLimitResponse_RateLimit_YEAR:
		return 365 * 86400
	}
	return 0
}

// unitNames lists the units of the config format, in the order the
// error message gives them.
var unitNames = []string{"second", "minute", "hour", "day", "week", "month", "year"}

// maxMultiplier returns the largest unit_multiplier that keeps the window
// of unit within table.MaxScale.
func maxMultiplier(u rlsv3.RateLimitResponse_RateLimit_Unit) uint64 {
	return uint64(table.MaxScale / (unitSeconds(u) * time.Second))
}

// The keys of the config format.
var (
	fileKeys       = []string{"domain", "descriptors"}
	descriptorKeys = []string{"key", "value", "rate_limit", "descriptors", "shadow_mode", "detailed_metric", "value_to_metric", "share_threshold", "quota_mode", "metadata"}
	rateLimitKeys  = []string{"unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm", "burst", "unit_multiplier"}
	replacesKeys   = []string{"name"}
)

// Store holds the current Config. A reload builds a new Config and swaps
// it in whole, so a check sees either the old config or the new one, never
// a mixture. It is safe for concurrent use.
type Store struct {
	p atomic.Pointer[Config]
}

// NewStore returns a Store holding c (which may be nil: no config yet).
func NewStore(c *Config) *Store {
	s := &Store{}
	s.p.Store(c)
	return s
}

// Config returns the current config, or nil if none was stored.
func (s *Store) Config() *Config { return s.p.Load() }

// Swap makes c the current config and returns the previous one.
func (s *Store) Swap(c *Config) *Config { return s.p.Swap(c) }

// Load reads the config at path: one YAML file, or a directory whose
// *.yaml and *.yml files (not those whose names start with '.', and not
// in subdirectories) are read in name order. Every file must be valid
// and no domain may appear twice; an error is a *ConfigError naming the
// file, the line and the field (or, for a file that cannot be read, an
// error wrapping the os error; for a directory with no config file,
// ErrNoFiles). Load does not change any Store: a watcher calls Load and,
// on success, Store.Swap, so a bad file leaves the last good config in
// force.
func Load(path string) (*Config, error) {
	files, err := readFiles(path)
	if err != nil {
		return nil, err
	}
	return Parse(files...)
}

// readFiles reads the config files at path (see Load), each named by its
// path.
func readFiles(path string) ([]File, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("rls: config: %w", err)
	}
	names := []string{path}
	if info.IsDir() {
		if names, err = configFiles(path); err != nil {
			return nil, err
		}
	}
	files := make([]File, len(names))
	for i, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("rls: config: %w", err)
		}
		files[i] = File{Name: name, Data: data}
	}
	return files, nil
}

// digestOf returns the SHA-256 of the names and contents of files, in
// order, each length-prefixed so that no two lists share one.
func digestOf(files []File) [32]byte {
	h := sha256.New()
	var n [8]byte
	for _, f := range files {
		for _, b := range [][]byte{[]byte(f.Name), f.Data} {
			binary.BigEndian.PutUint64(n[:], uint64(len(b)))
			h.Write(n[:])
			h.Write(b)
		}
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// configFiles lists the config files of dir.
func configFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("rls: config: %w", err)
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		p := filepath.Join(dir, name)
		// A symlink (as in a Kubernetes ConfigMap) counts if it leads to a file.
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			continue
		}
		files = append(files, p)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: %s has no *.yaml or *.yml file", ErrNoFiles, dir)
	}
	return files, nil // os.ReadDir sorts by name
}

// Parse builds a Config from the contents of config files, given as
// (name, data) pairs in load order, with Load's rules.
func Parse(files ...File) (*Config, error) {
	c := &Config{domains: map[string]*level{}, digest: digestOf(files)}
	owner := map[string]string{}
	for _, f := range files {
		if err := c.add(f.Name, f.Data, owner); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// File is one config file's name and contents, for Parse.
type File struct {
	Name string
	Data []byte
}

// add parses one file into c; owner maps each domain to its file.
func (c *Config) add(name string, data []byte, owner map[string]string) error {
	c.files = append(c.files, name)
	root, err := yamlconf.Parse(data)
	if err != nil {
		return wrapYAML(name, err)
	}
	p := &parser{file: name}
	domain, lv, err := p.root(root)
	if err != nil {
		return wrapYAML(name, err)
	}
	if prev, dup := owner[domain]; dup {
		return &ConfigError{File: name, Line: p.domainLine, Field: "domain",
			Msg: fmt.Sprintf("domain %q is already defined in %s", domain, prev)}
	}
	owner[domain] = name
	c.domains[domain] = lv
	return nil
}

// wrapYAML turns a *yamlconf.Error into a *ConfigError of file.
func wrapYAML(file string, err error) error {
	var ye *yamlconf.Error
	if errors.As(err, &ye) {
		return &ConfigError{File: file, Line: ye.Line, Field: ye.Field, Msg: ye.Msg}
	}
	return &ConfigError{File: file, Msg: err.Error()}
}

// parser walks one file's tree.
type parser struct {
	file       string
	domainLine int
}

func (p *parser) root(root *yamlconf.Node) (string, *level, error) {
	f, err := root.Fields("", fileKeys)
	if err != nil {
		return "", nil, err
	}
	dn, ok := f["domain"]
	if !ok {
		return "", nil, root.Errorf("domain", "is required")
	}
	p.domainLine = dn.Line
	domain, err := dn.String("domain")
	if err != nil {
		return "", nil, err
	}
	if domain == "" {
		return "", nil, dn.Errorf("domain", "must not be empty")
	}
	if len(domain) > MaxDomainLen {
		return "", nil, dn.Errorf("domain", "must be at most %d bytes", MaxDomainLen)
	}
	lv := &level{}
	if d, ok := f["descriptors"]; ok {
		if err := p.descriptors(lv, d, "descriptors"); err != nil {
			return "", nil, err
		}
	}
	return domain, lv, nil
}

// descriptors parses the list n (at path) into lv.
func (p *parser) descriptors(lv *level, n *yamlconf.Node, path string) error {
	items, err := n.List(path)
	if err != nil {
		return err
	}
	for i, item := range items {
		if err := p.descriptor(lv, item, yamlconf.Index(path, i)); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) descriptor(lv *level, n *yamlconf.Node, path string) error {
	f, err := n.Fields(path, descriptorKeys)
	if err != nil {
		return err
	}
	if n.Kind != yamlconf.Mapping {
		return n.Errorf(path, "must be a mapping")
	}
	d := &node{}
	kn, ok := f["key"]
	if !ok {
		return n.Errorf(yamlconf.Join(path, "key"), "is required")
	}
	if d.key, err = kn.String(yamlconf.Join(path, "key")); err != nil {
		return err
	}
	if d.key == "" {
		return kn.Errorf(yamlconf.Join(path, "key"), "must not be empty")
	}
	if vn, ok := f["value"]; ok {
		if d.value, err = vn.String(yamlconf.Join(path, "value")); err != nil {
			return err
		}
	}
	flags := []struct {
		key string
		dst *bool
	}{{"value_to_metric", &d.valueToMetric}, {"share_threshold", &d.shareThreshold}}
	for _, fl := range flags {
		if v, ok := f[fl.key]; ok {
			if *fl.dst, err = v.Bool(yamlconf.Join(path, fl.key)); err != nil {
				return err
			}
		}
	}
	var shadow, detailed bool
	for _, fl := range []struct {
		key string
		dst *bool
	}{{"shadow_mode", &shadow}, {"detailed_metric", &detailed}} {
		if v, ok := f[fl.key]; ok {
			if *fl.dst, err = v.Bool(yamlconf.Join(path, fl.key)); err != nil {
				return err
			}
		}
	}
	if v, ok := f["quota_mode"]; ok {
		q, err := v.Bool(yamlconf.Join(path, "quota_mode"))
		if err != nil {
			return err
		}
		if q {
			return v.Errorf(yamlconf.Join(path, "quota_mode"), "quota mode is not supported by ratelimitd")
		}
	}
	if v, ok := f["metadata"]; ok {
		return v.Errorf(yamlconf.Join(path, "metadata"), "response metadata is not supported by ratelimitd")
	}
	if strings.Contains(d.value, "*") {
		d.parts = strings.Split(d.value, "*")
	}
	if d.shareThreshold && d.parts == nil {
		return f["share_threshold"].Errorf(yamlconf.Join(path, "share_threshold"), "needs a value with a '*' wildcard")
	}
	if rn, ok := f["rate_limit"]; ok {
		if d.limit, err = p.rateLimit(rn, yamlconf.Join(path, "rate_limit")); err != nil {
			return err
		}
		d.limit.ShadowMode, d.limit.DetailedMetric = shadow, detailed
	}
	if cn, ok := f["descriptors"]; ok {
		child := &level{}
		if err := p.descriptors(child, cn, yamlconf.Join(path, "descriptors")); err != nil {
			return err
		}
		if !child.empty() {
			d.children = child
		}
	}
	return lv.add(d, kn, path)
}

// empty reports whether lv holds no descriptor.
func (lv *level) empty() bool {
	return len(lv.exact) == 0 && len(lv.wild) == 0 && len(lv.keyOnly) == 0
}

// add files d into lv, refusing a second descriptor with the same key
// and value.
func (lv *level) add(d *node, at *yamlconf.Node, path string) error {
	dup := func() error {
		what := "key " + fmt.Sprintf("%q", d.key)
		if d.value != "" {
			what += fmt.Sprintf(" with value %q", d.value)
		}
		return at.Errorf(yamlconf.Join(path, "key"), "%s is already defined at this level", what)
	}
	switch {
	case d.value == "":
		if lv.keyOnly == nil {
			lv.keyOnly = map[string]*node{}
		}
		if _, ok := lv.keyOnly[d.key]; ok {
			return dup()
		}
		lv.keyOnly[d.key] = d
	case d.parts != nil:
		for _, w := range lv.wild {
			if w.key == d.key && w.value == d.value {
				return dup()
			}
		}
		lv.wild = append(lv.wild, d)
	default:
		if lv.exact == nil {
			lv.exact = map[entry]*node{}
		}
		k := entry{d.key, d.value}
		if _, ok := lv.exact[k]; ok {
			return dup()
		}
		lv.exact[k] = d
	}
	return nil
}

func (p *parser) rateLimit(n *yamlconf.Node, path string) (*Limit, error) {
	f, err := n.Fields(path, rateLimitKeys)
	if err != nil {
		return nil, err
	}
	if n.Kind != yamlconf.Mapping {
		return nil, n.Errorf(path, "must be a mapping")
	}
	l := &Limit{UnitMultiplier: 1}
	at := func(k string) string { return yamlconf.Join(path, k) }
	if v, ok := f["unlimited"]; ok {
		if l.Unlimited, err = v.Bool(at("unlimited")); err != nil {
			return nil, err
		}
	}
	if v, ok := f["name"]; ok {
		if l.Name, err = v.String(at("name")); err != nil {
			return nil, err
		}
	}
	if v, ok := f["requests_per_unit"]; ok {
		rpu, err := v.Uint(at("requests_per_unit"), math.MaxUint32)
		if err != nil {
			return nil, err
		}
		l.RequestsPerUnit = uint32(rpu)
	}
	if l.Unlimited {
		for _, k := range []string{"unit", "algorithm", "burst", "unit_multiplier"} {
			if v, ok := f[k]; ok && v.Kind != yamlconf.Null {
				return nil, v.Errorf(at(k), "must not be set with unlimited")
			}
		}
	} else {
		un, ok := f["unit"]
		if !ok {
			return nil, n.Errorf(at("unit"), "is required (one of %s)", strings.Join(unitNames, ", "))
		}
		s, err := un.String(at("unit"))
		if err != nil {
			return nil, err
		}
		v, known := rlsv3.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(s)]
		if !known || v == 0 {
			return nil, un.Errorf(at("unit"), "%q is not a unit (one of %s)", s, strings.Join(unitNames, ", "))
		}
		l.Unit = rlsv3.RateLimitResponse_RateLimit_Unit(v)
		if mn, ok := f["unit_multiplier"]; ok {
			max := maxMultiplier(l.Unit)
			m, err := mn.Uint(at("unit_multiplier"), math.MaxUint64)
			if err != nil || m < 1 || m > max {
				return nil, mn.Errorf(at("unit_multiplier"), "must be a whole number from 1 to %d for unit %s (a window is at most %v)",
					max, strings.ToLower(l.Unit.String()), table.MaxScale)
			}
			l.UnitMultiplier, l.multiplierSet = uint32(m), true
		}
		if an, ok := f["algorithm"]; ok {
			s, err := an.String(at("algorithm"))
			if err != nil {
				return nil, err
			}
			if l.Algorithm, err = table.ParseAlgorithm(s); err != nil {
				var fe *table.FieldError
				errors.As(err, &fe)
				return nil, an.Errorf(at("algorithm"), "%s", fe.Message)
			}
		}
		if bn, ok := f["burst"]; ok {
			b, err := bn.Uint(at("burst"), math.MaxInt64)
			if err != nil {
				return nil, err
			}
			l.Burst = int64(b)
			pol := table.Policy{Algorithm: l.Algorithm, Scale: l.Scale(), Limit: int64(l.RequestsPerUnit), Burst: l.Burst}
			if err := pol.Validate(); err != nil {
				var fe *table.FieldError
				errors.As(err, &fe)
				return nil, bn.Errorf(at("burst"), "%s", fe.Message)
			}
		}
	}
	if rn, ok := f["replaces"]; ok {
		items, err := rn.List(at("replaces"))
		if err != nil {
			return nil, err
		}
		for i, item := range items {
			ip := yamlconf.Index(at("replaces"), i)
			rf, err := item.Fields(ip, replacesKeys)
			if err != nil {
				return nil, err
			}
			var name string
			if nn, ok := rf["name"]; ok {
				if name, err = nn.String(yamlconf.Join(ip, "name")); err != nil {
					return nil, err
				}
			}
			if name == "" {
				return nil, item.Errorf(yamlconf.Join(ip, "name"), "must not be empty")
			}
			if name == l.Name {
				return nil, item.Errorf(yamlconf.Join(ip, "name"), "must not be the limit's own name %q", name)
			}
			l.Replaces = append(l.Replaces, name)
		}
	}
	return l, nil
}
