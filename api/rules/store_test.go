package rules

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

func TestStoreVersions(t *testing.T) {
	t.Parallel()
	st := mustStore(t, nameRule("a"))
	if v := st.Current().Version(); v != 1 {
		t.Fatalf("got version %d, want 1", v)
	}
	steps := []struct {
		name string
		do   func() (*Set, error)
		want []string // the rule names after the step
	}{
		{"put new", func() (*Set, error) { return st.Put(urlRule("b", "/b", "", "")) }, []string{"a", "b"}},
		{"put replacing", func() (*Set, error) { r := nameRule("a"); r.Limit = 99; return st.Put(r) }, []string{"a", "b"}},
		{"delete", func() (*Set, error) { return st.Delete("b") }, []string{"a"}},
		{"replace", func() (*Set, error) { return st.Replace([]Rule{nameRule("x"), nameRule("y")}) }, []string{"x", "y"}},
		{"replace with nothing", func() (*Set, error) { return st.Replace(nil) }, nil},
	}
	for i, step := range steps {
		s, err := step.do()
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if want := uint64(i + 2); s.Version() != want || st.Current() != s {
			t.Errorf("%s: got version %d (current %d), want %d", step.name, s.Version(), st.Current().Version(), want)
		}
		var names []string
		for _, r := range s.Rules() {
			names = append(names, r.Name)
		}
		if fmt.Sprint(names) != fmt.Sprint(step.want) {
			t.Errorf("%s: got rules %v, want %v", step.name, names, step.want)
		}
	}
	if r, _ := mustStoreAfterPut(t).Get("a"); r.Limit != 99 {
		t.Errorf("got limit %d after Put, want 99", r.Limit)
	}
}

// mustStoreAfterPut returns the Set after replacing rule a with limit 99.
func mustStoreAfterPut(t *testing.T) *Set {
	st := mustStore(t, nameRule("a"))
	r := nameRule("a")
	r.Limit = 99
	s, err := st.Put(r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreFailuresKeepTheSet(t *testing.T) {
	t.Parallel()
	st := mustStore(t, urlRule("a", "/a", "", ""), nameRule("b"))
	before := st.Current()
	tests := []struct {
		name string
		do   func() (*Set, error)
		want Error
	}{
		{"replace with a bad rule", func() (*Set, error) {
			return st.Replace([]Rule{nameRule("x"), {Name: "y", Policy: table.Policy{Scale: -1}}})
		}, Error{Index: 1, Name: "y", Field: "scale"}},
		{"replace with duplicates", func() (*Set, error) { return st.Replace([]Rule{nameRule("x"), nameRule("x")}) }, Error{Index: 1, Name: "x", Field: "name"}},
		{"put a bad rule", func() (*Set, error) {
			return st.Put(Rule{Name: "c", Policy: table.Policy{Scale: time.Second, Limit: -1}})
		}, Error{Index: -1, Name: "c", Field: "limit"}},
		{"put an ambiguous rule", func() (*Set, error) { return st.Put(urlRule("c", "/A", "", "")) }, Error{Index: -1, Name: "c", Field: "match"}},
	}
	for _, tt := range tests {
		s, err := tt.do()
		if s != nil {
			t.Errorf("%s: got a Set, want nil", tt.name)
		}
		checkError(t, err, tt.want)
		if st.Current() != before {
			t.Errorf("%s: the current Set changed (version %d), want it kept", tt.name, st.Current().Version())
		}
	}
	if _, err := st.Put(urlRule("c", "/A", "", "")); err == nil || !strings.Contains(err.Error(), `rule "a"`) {
		t.Errorf("got %v, want it to name the other rule, a", err)
	}
	_, err := st.Delete("missing")
	if !errors.Is(err, ErrNotFound) || st.Current() != before {
		t.Errorf("Delete(missing) = %v, version %d; want ErrNotFound and version 1", err, st.Current().Version())
	}
	if _, err := NewStore([]Rule{{Name: "bad"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("NewStore(bad) = %v, want ErrInvalid", err)
	}
	// Putting a rule over itself under the same match is not ambiguous.
	if _, err := st.Put(urlRule("a", "/A", "", "")); err != nil {
		t.Errorf("Put(a) with a's own match: %v", err)
	}
}

func TestStoreMatchSeesChanges(t *testing.T) {
	t.Parallel()
	st := mustStore(t, urlRule("api", "/api", "", ""), urlRule("login", "/api/login", "", ""))
	match := func() string {
		r, ok := st.Match("GET", "h", "/api/login")
		if !ok {
			return ""
		}
		return fmt.Sprintf("%s/%d", r.Name, r.Limit)
	}
	steps := []struct {
		name string
		do   func() error
		want string
	}{
		{"start", func() error { return nil }, "login/10"},
		{"cached", func() error { return nil }, "login/10"},
		{"delete", func() error { _, err := st.Delete("login"); return err }, "api/10"},
		{"put", func() error {
			r := urlRule("login", "/api/login", "", "")
			r.Limit = 3
			_, err := st.Put(r)
			return err
		}, "login/3"},
		{"put changed", func() error {
			r := urlRule("login", "/api/login", "", "")
			r.Limit = 4
			_, err := st.Put(r)
			return err
		}, "login/4"},
		{"replace", func() error { _, err := st.Replace([]Rule{urlRule("other", "/other", "", "")}); return err }, ""},
		{"replace back", func() error { _, err := st.Replace([]Rule{urlRule("api", "/API", "", "")}); return err }, "api/10"},
	}
	for _, step := range steps {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		// Twice: the computing call, then the cached one.
		for i := range 2 {
			if got := match(); got != step.want {
				t.Errorf("%s, call %d: got %q, want %q", step.name, i, got, step.want)
			}
		}
	}
}

func TestStoreCacheBound(t *testing.T) {
	t.Parallel()
	st := mustStore(t, urlRule("api", "/api", "", ""), urlRule("root", "/", "GET", ""))
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d", seed)
	const n = 100_000
	for i := range n {
		path := fmt.Sprintf("/api/%x/%d", rng.Uint64(), i)
		want := "api"
		if i%2 == 0 {
			path = path[4:] // /<hex>/<i>
			want = "root"
		}
		r, ok := st.Match("GET", "h", path)
		if !ok || r.Name != want {
			t.Fatalf("Match(%q) = %q, %v; want %s", path, r.Name, ok, want)
		}
	}
	if got := st.cacheLen(); got > cacheSize || got < cacheSize/2 {
		t.Errorf("got %d cache entries after %d distinct paths, want at most %d (and the cache in use)", got, n, cacheSize)
	}
	// A request too long to cache is still matched, and not cached.
	before := st.cacheLen()
	long := "/api/" + strings.Repeat("x", maxCachedKey)
	for range 2 {
		if r, ok := st.Match("GET", "h", long); !ok || r.Name != "api" {
			t.Errorf("Match(long) = %q, %v; want api", r.Name, ok)
		}
	}
	if st.cacheLen() != before {
		t.Errorf("got %d cache entries after a long path, want %d", st.cacheLen(), before)
	}
}

func TestStoreMatchCachesAllComponents(t *testing.T) {
	t.Parallel()
	st := mustStore(t, urlRule("post", "/x", "POST", ""), urlRule("host", "/x", "", "a.org"), urlRule("any", "/x", "", ""))
	tests := []struct{ method, host, path, want string }{
		{"POST", "b.org", "/x", "post"},
		{"GET", "a.org", "/x", "host"},
		{"GET", "b.org", "/x", "any"},
		{"POST", "a.org", "/x", "host"},
		{"GET", "b.org", "/y", ""},
	}
	for range 3 {
		for _, tt := range tests {
			r, ok := st.Match(tt.method, tt.host, tt.path)
			if ok != (tt.want != "") || r.Name != tt.want {
				t.Errorf("Match(%q, %q, %q) = %q, %v; want %q", tt.method, tt.host, tt.path, r.Name, ok, tt.want)
			}
		}
	}
}

// TestStoreConcurrent matches from many goroutines while another changes the
// rules; run it with -race. Every rule returned must be one that some version
// held, and must fit the path.
func TestStoreConcurrent(t *testing.T) {
	t.Parallel()
	const names = 8
	// variant returns the v-th version of rule i; all are valid together.
	variant := func(i, v int) Rule {
		r := urlRule(fmt.Sprintf("r%d", i), fmt.Sprintf("/p%d", i), "", "")
		r.Limit = int64(v)
		if v%2 == 1 {
			r.Match.Prefix = fmt.Sprintf("/P%d/", i)
		}
		return r
	}
	const variants = 4
	valid := map[Rule]bool{}
	for i := range names {
		for v := range variants {
			valid[variant(i, v).normalize()] = true
		}
	}
	var initial []Rule
	for i := range names {
		initial = append(initial, variant(i, 0))
	}
	st := mustStore(t, initial...)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			for n := 0; ; n++ {
				if n%64 == 0 {
					select {
					case <-stop:
						return
					default:
					}
				}
				i := rng.IntN(names)
				path := fmt.Sprintf("/p%d/x", i)
				r, ok := st.Match("GET", "h", path)
				if !ok {
					continue // rule i deleted in this version
				}
				if !valid[r] || !strings.EqualFold(r.Match.Prefix, fmt.Sprintf("/p%d", i)) && !strings.EqualFold(r.Match.Prefix, fmt.Sprintf("/p%d/", i)) {
					errs <- fmt.Errorf("Match(%q) = %+v, a rule no version held", path, r)
					return
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(99, 3))
	var last uint64 = 1
	for n := range 600 {
		var s *Set
		var err error
		i, v := rng.IntN(names), rng.IntN(variants)
		switch n % 3 {
		case 0:
			s, err = st.Put(variant(i, v))
		case 1:
			s, err = st.Delete(fmt.Sprintf("r%d", i))
			if errors.Is(err, ErrNotFound) {
				continue
			}
		case 2:
			var rules []Rule
			for j := range names {
				if rng.IntN(4) > 0 {
					rules = append(rules, variant(j, v))
				}
			}
			s, err = st.Replace(rules)
		}
		if err != nil {
			t.Fatalf("change %d: %v", n, err)
		}
		if s.Version() != last+1 {
			t.Fatalf("change %d: got version %d, want %d", n, s.Version(), last+1)
		}
		last = s.Version()
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
