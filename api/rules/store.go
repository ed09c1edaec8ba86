package rules

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// The match cache of a Store: a fixed array of cacheSets sets of cacheWays
// entries, so at most cacheSize entries, each holding a key of at most
// maxCachedKey bytes.
const (
	cacheWays    = 2
	cacheSets    = 4096 // a power of two
	cacheSize    = cacheWays * cacheSets
	maxCachedKey = 512 // len(method)+len(host)+len(path); longer requests are matched uncached
)

// cacheEntry is one immutable cached match: the rule index idx (-1: no rule)
// that Set version computed for the key (method, host, path).
type cacheEntry struct {
	hash    uint64
	version uint64
	idx     int32
	method  string
	host    string
	path    string
}

// Store holds the current rule Set and matches requests against it through a
// bounded cache. It is safe for concurrent use. Readers (Current, Match) never
// wait for writers or for each other: they use atomic loads only. Writers
// (Replace, Put, Delete) are serialised, and each change installs a new Set
// whose version is one more than the last.
//
// Create a Store with NewStore; the zero Store is not usable.
type Store struct {
	mu    sync.Mutex // serialises writers
	cur   atomic.Pointer[Set]
	seed  maphash.Seed
	cache []atomic.Pointer[cacheEntry] // cacheSize slots; set s is slots [s*cacheWays, (s+1)*cacheWays)
}

// NewStore validates rules as NewSet does and returns a Store whose current
// Set, of version 1, holds them.
func NewStore(rules []Rule) (*Store, error) {
	s, err := NewSet(rules, 1)
	if err != nil {
		return nil, err
	}
	st := &Store{seed: maphash.MakeSeed(), cache: make([]atomic.Pointer[cacheEntry], cacheSize)}
	st.cur.Store(s)
	return st, nil
}

// Current returns the current Set.
func (st *Store) Current() *Set { return st.cur.Load() }

// Replace validates rules as NewSet does and makes them the current Set, with
// the next version. On error the current Set is kept and the error, an
// *Error, gives the position of the first bad rule in rules.
func (st *Store) Replace(rules []Rule) (*Set, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, err := NewSet(rules, st.cur.Load().version+1)
	if err != nil {
		return nil, err
	}
	st.cur.Store(s)
	return s, nil
}

// replaceIfChanged is Replace, except that when rules are the current rules
// (after validation, in canonical form, in any order) it keeps the current
// Set and its version, and reports false.
func (st *Store) replaceIfChanged(rules []Rule) (*Set, bool, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	cur := st.cur.Load()
	norm, err := canonical(rules, true)
	if err != nil {
		return cur, false, err
	}
	slices.SortFunc(norm, func(a, b Rule) int { return strings.Compare(a.Name, b.Name) })
	if slices.Equal(norm, cur.rules) {
		return cur, false, nil
	}
	s := build(norm, cur.version+1, true)
	st.cur.Store(s)
	return s, true, nil
}

// Put adds r, or replaces the rule of the same name, and makes the result the
// current Set, with the next version. r is validated as NewSet validates each
// rule, and must not have the same Match as another rule; an error is an
// *Error with Index -1 and the current Set is kept.
func (st *Store) Put(r Rule) (*Set, error) {
	if e := r.check(); e != nil {
		return nil, e
	}
	r = r.normalize()
	st.mu.Lock()
	defer st.mu.Unlock()
	cur := st.cur.Load()
	// The current rules are valid and consistent: only r needs checking.
	if !r.Match.IsZero() {
		for _, old := range cur.rules {
			if old.Name != r.Name && sameMatch(old.Match, r.Match) {
				return nil, &Error{Index: -1, Name: r.Name, Field: "match", Message: "has the same prefix, method and host as " + ruleRef(false, -1, old.Name)}
			}
		}
	}
	i, found := slices.BinarySearchFunc(cur.rules, r.Name, func(x Rule, name string) int { return strings.Compare(x.Name, name) })
	var rules []Rule
	if found {
		rules = slices.Clone(cur.rules)
		rules[i] = r
	} else {
		rules = slices.Insert(slices.Clip(cur.rules), i, r)
	}
	s := build(rules, cur.version+1, true)
	st.cur.Store(s)
	return s, nil
}

// sameMatch reports whether two canonical matches are the same for the
// ambiguity check.
func sameMatch(a, b Match) bool {
	return a.Method == b.Method && a.Host == b.Host && len(a.Prefix) == len(b.Prefix) && lowerASCII(a.Prefix) == lowerASCII(b.Prefix)
}

// Delete removes the rule named name and makes the result the current Set,
// with the next version. It returns an error matching ErrNotFound, and keeps
// the current Set, when there is no such rule.
func (st *Store) Delete(name string) (*Set, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	cur := st.cur.Load()
	i, ok := cur.byName[name]
	if !ok {
		return nil, fmt.Errorf("rules: delete %q: %w", name, ErrNotFound)
	}
	rules := slices.Delete(slices.Clone(cur.rules), int(i), int(i)+1)
	s := build(rules, cur.version+1, true)
	st.cur.Store(s)
	return s, nil
}

// Match returns the rule of the current Set that applies to a request, as
// Set.Match does, through a cache.
//
// The cache is keyed by (method, host, path) exactly as given, and an entry
// is used only while the Set version it was computed for is current, so a
// change is seen by the very next call. It holds at most 8192 entries, in
// 4096 sets of 2 chosen by a seeded hash of the key; a new entry replaces an
// empty or outdated entry of its set, or else one of the two. Requests whose
// method, host and path together exceed 512 bytes are matched without the
// cache. A hit takes one atomic load of the Set, one hash of the key, one or
// two atomic loads of entries and no allocation.
func (st *Store) Match(method, host, path string) (Rule, bool) {
	s := st.cur.Load()
	if len(s.lens) == 0 {
		return Rule{}, false
	}
	if len(method)+len(host)+len(path) > maxCachedKey {
		return s.Match(method, host, path)
	}
	h := st.hash(method, host, path)
	set := st.cache[int(h&(cacheSets-1))*cacheWays:][:cacheWays]
	for i := range set {
		e := set[i].Load()
		if e != nil && e.hash == h && e.version == s.version && e.path == path && e.host == host && e.method == method {
			return s.result(e.idx)
		}
	}
	idx := s.match(method, host, path)
	way := int(h>>63) % cacheWays
	for i := range set {
		if e := set[i].Load(); e == nil || e.version != s.version {
			way = i
			break
		}
	}
	set[way].Store(newCacheEntry(h, s.version, idx, method, host, path))
	return s.result(idx)
}

// hash hashes a cache key with the Store's seed.
func (st *Store) hash(method, host, path string) uint64 {
	h := maphash.String(st.seed, path)
	h = (h ^ maphash.String(st.seed, host)) * 0x9e3779b97f4a7c15
	return (h ^ maphash.String(st.seed, method)) * 0xbf58476d1ce4e5b9
}

// newCacheEntry returns an entry that holds copies of the key strings, in one
// allocation, so that it keeps no caller's memory alive.
func newCacheEntry(h, version uint64, idx int32, method, host, path string) *cacheEntry {
	var b strings.Builder
	b.Grow(len(method) + len(host) + len(path))
	b.WriteString(method)
	b.WriteString(host)
	b.WriteString(path)
	k := b.String()
	return &cacheEntry{
		hash:    h,
		version: version,
		idx:     idx,
		method:  k[:len(method)],
		host:    k[len(method) : len(method)+len(host)],
		path:    k[len(method)+len(host):],
	}
}

// cacheLen returns the number of cache slots in use, for tests.
func (st *Store) cacheLen() int {
	n := 0
	for i := range st.cache {
		if st.cache[i].Load() != nil {
			n++
		}
	}
	return n
}
