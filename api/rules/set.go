package rules

import (
	"cmp"
	"slices"
	"strings"
)

// Set is an immutable, validated set of rules with a version. It is safe for
// concurrent use. Build one with NewSet, or get one from a Store.
type Set struct {
	version uint64
	rules   []Rule           // canonical form, sorted by name
	byName  map[string]int32 // name → index into rules
	// byPrefix maps a lower-cased Match.Prefix to the indexes of the rules
	// with that prefix, most specific first (see Set.Match).
	byPrefix map[string][]int32
	lens     []int // the distinct lengths of the keys of byPrefix, longest first
	// policyErrs holds, by index into rules, the table.Policy.Validate
	// error of each rule whose policy the table cannot take; nil when none.
	policyErrs map[int32]error
}

// NewSet validates rules and returns them as a Set of the given version.
//
// Every rule must pass Rule.Validate; names must be unique; no two rules may
// have the same Match (the same prefix, compared case-insensitively, the same
// method and the same host), which would make matching ambiguous. The first
// rule, in slice order, that breaks one of these is reported as an *Error
// whose Index is its position in rules. The rules are stored in canonical
// form (see Rule); rules itself is not modified or retained.
func NewSet(rules []Rule, version uint64) (*Set, error) {
	return newSet(rules, version, true)
}

// newSet is NewSet; indexed says whether positions in rules mean anything to
// the caller: if not, errors have Index -1 and name other rules by name.
func newSet(rules []Rule, version uint64, indexed bool) (*Set, error) {
	norm, err := canonical(rules, indexed)
	if err != nil {
		return nil, err
	}
	return build(norm, version, false), nil
}

// canonical validates rules as NewSet does and returns them in canonical
// form, in the same order.
func canonical(rules []Rule, indexed bool) ([]Rule, error) {
	c := newChecker(indexed, len(rules))
	norm := make([]Rule, len(rules))
	for i, r := range rules {
		if e := r.check(); e != nil {
			if indexed {
				e.Index = i
			}
			return nil, e
		}
		r = r.normalize()
		if e := c.add(i, r); e != nil {
			return nil, e
		}
		norm[i] = r
	}
	return norm, nil
}

// matchKey identifies a Match for the ambiguity check and the index.
type matchKey struct{ prefix, method, host string }

// checker finds the checks across rules that a rule breaks: a name used
// before, a match used before.
type checker struct {
	indexed bool
	names   map[string]int
	matches map[matchKey]int
	rules   []Rule
}

func newChecker(indexed bool, n int) *checker {
	return &checker{indexed: indexed, names: make(map[string]int, n), matches: make(map[matchKey]int), rules: make([]Rule, 0, n)}
}

// add checks r, valid and in canonical form, at position i against the rules
// added before it, and adds it.
func (c *checker) add(i int, r Rule) *Error {
	index := i
	if !c.indexed {
		index = -1
	}
	if j, ok := c.names[r.Name]; ok {
		return &Error{Index: index, Name: r.Name, Field: "name", Message: "is already the name of " + ruleRef(c.indexed, j, r.Name)}
	}
	c.names[r.Name] = len(c.rules)
	if !r.Match.IsZero() {
		k := matchKey{lowerASCII(r.Match.Prefix), r.Match.Method, r.Match.Host}
		if j, ok := c.matches[k]; ok {
			return &Error{Index: index, Name: r.Name, Field: "match", Message: "has the same prefix, method and host as " + ruleRef(c.indexed, j, c.rules[j].Name)}
		}
		c.matches[k] = len(c.rules)
	}
	c.rules = append(c.rules, r)
	return nil
}

// build indexes valid rules in canonical form with distinct names and
// matches, sorting them by name first unless sorted says they are; it keeps
// norm.
func build(norm []Rule, version uint64, sorted bool) *Set {
	if !sorted {
		slices.SortFunc(norm, func(a, b Rule) int { return strings.Compare(a.Name, b.Name) })
	}
	s := &Set{
		version: version,
		rules:   norm,
		byName:  make(map[string]int32, len(norm)),
	}
	keys := make([]string, len(norm)) // lower-cased prefixes
	var urls []int32                  // the indexes of the rules with a Match
	for i, r := range norm {
		s.byName[r.Name] = int32(i)
		if err := r.Policy.Validate(); err != nil {
			if s.policyErrs == nil {
				s.policyErrs = make(map[int32]error)
			}
			s.policyErrs[int32(i)] = err
		}
		if !r.Match.IsZero() {
			keys[i] = lowerASCII(r.Match.Prefix)
			urls = append(urls, int32(i))
		}
	}
	// Group by prefix, most specific first within a group; names break ties
	// between rules that can never match the same request (different methods
	// or hosts). Each group is a sub-slice of urls.
	slices.SortFunc(urls, func(a, b int32) int {
		if c := strings.Compare(keys[a], keys[b]); c != 0 {
			return c
		}
		if c := cmp.Compare(specificity(norm[b].Match), specificity(norm[a].Match)); c != 0 {
			return c
		}
		return strings.Compare(norm[a].Name, norm[b].Name)
	})
	s.byPrefix = make(map[string][]int32, len(urls))
	for start := 0; start < len(urls); {
		k := keys[urls[start]]
		end := start + 1
		for end < len(urls) && keys[urls[end]] == k {
			end++
		}
		s.byPrefix[k] = urls[start:end:end]
		s.lens = append(s.lens, len(k))
		start = end
	}
	slices.Sort(s.lens)
	slices.Reverse(s.lens)
	s.lens = slices.Compact(s.lens)
	return s
}

// specificity ranks matches with the same prefix: method and host (3) before
// host only (2) before method only (1) before neither (0).
func specificity(m Match) int {
	n := 0
	if m.Host != "" {
		n += 2
	}
	if m.Method != "" {
		n++
	}
	return n
}

// Version returns the version of s.
func (s *Set) Version() uint64 { return s.version }

// Len returns the number of rules in s.
func (s *Set) Len() int { return len(s.rules) }

// Get returns the rule named name, if s has one.
func (s *Set) Get(name string) (Rule, bool) {
	i, ok := s.byName[name]
	if !ok {
		return Rule{}, false
	}
	return s.rules[i], true
}

// Lookup is Get that also returns, for a rule whose policy the table
// cannot take, the error of table.Policy.Validate: a rule can pass
// Rule.Validate and still ask for a refill time (burst × scale/limit) over
// table.MaxScale, which only a check by it can report. Each rule's policy
// is validated once, when the Set is built.
func (s *Set) Lookup(name string) (Rule, bool, error) {
	i, ok := s.byName[name]
	if !ok {
		return Rule{}, false, nil
	}
	return s.rules[i], true, s.policyErrs[i]
}

// Rules returns a copy of the rules of s, in canonical form, sorted by name.
func (s *Set) Rules() []Rule { return slices.Clone(s.rules) }

// Match returns the rule that applies to a request, if any, without a cache
// (Store.Match caches). method is the request method (r.Method), host the Host
// header (r.Host, a port is ignored), path the URL path (r.URL.Path: no query;
// see the package documentation on decoding and cleaning).
//
// A rule whose Match has prefix P matches path when, comparing ASCII letters
// case-insensitively,
//
//   - P ends with "/" and path starts with P ("/api/" matches "/api/" and
//     "/api/x" but not "/api"), or
//   - P does not end with "/" and path is P or starts with P + "/" ("/api"
//     matches "/api" and "/api/x" but not "/apix"),
//
// and its Method (if set) equals method and its Host (if set) equals host,
// both case-insensitively. Of the rules that match, the one with the longest
// prefix wins; among rules with the same prefix, one with both a method and a
// host wins over one with only a host, which wins over one with only a method,
// which wins over one with neither. No two rules of a Set can tie.
func (s *Set) Match(method, host, path string) (Rule, bool) {
	return s.result(s.match(method, host, path))
}

// result returns rule i, or false when i is negative.
func (s *Set) result(i int32) (Rule, bool) {
	if i < 0 {
		return Rule{}, false
	}
	return s.rules[i], true
}

// match returns the index of the rule Match returns, or -1. It allocates only
// for a path that has upper-case letters within its first 128 bytes and is
// longer than that.
func (s *Set) match(method, host, path string) int32 {
	if len(s.lens) == 0 {
		return -1
	}
	// Only the first lens[0] bytes of path can be part of a prefix.
	head := path[:min(len(path), s.lens[0])]
	var buf [128]byte
	var low []byte // head lower-cased, or nil when head has no upper case
	for i := 0; i < len(head); i++ {
		if 'A' <= head[i] && head[i] <= 'Z' {
			if len(head) <= len(buf) {
				low = buf[:len(head)]
			} else {
				low = make([]byte, len(head))
			}
			copy(low, head)
			for j := i; j < len(low); j++ {
				if 'A' <= low[j] && low[j] <= 'Z' {
					low[j] += 'a' - 'A'
				}
			}
			break
		}
	}
	host = hostOnly(host)
	for _, n := range s.lens {
		if n > len(path) {
			continue
		}
		// A prefix not ending in "/" must end at a segment boundary.
		if path[n-1] != '/' && n != len(path) && path[n] != '/' {
			continue
		}
		var idx []int32
		if low != nil {
			idx = s.byPrefix[string(low[:n])]
		} else {
			idx = s.byPrefix[head[:n]]
		}
		for _, i := range idx {
			m := &s.rules[i].Match
			if (m.Method == "" || strings.EqualFold(m.Method, method)) && (m.Host == "" || strings.EqualFold(m.Host, host)) {
				return i
			}
		}
	}
	return -1
}
