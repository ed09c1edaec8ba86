package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestLayout keeps the import rules of DESIGN.md §3 for every package of the
// module: which packages of ours each may import, and which third-party
// module it alone owns. Test files are exempt.
func TestLayout(t *testing.T) {
	t.Parallel()
	const module = "github.com/ratelimitd/ratelimitd/"
	// A transport speaks one protocol: it may import the seam (api), the
	// value types (table), the rules and the shared HTTP wire code, never
	// another transport nor actors.
	transport := []string{"api", "table", "api/rules", "api/internal/httpwire"}
	rules := map[string]struct{ ours, theirs []string }{
		"table":                 {nil, []string{"github.com/tidwall/btree"}},
		"table/journal":         {nil, []string{"github.com/edsrzf/mmap-go"}},
		"sweeper":               {[]string{"table"}, []string{"github.com/asynkron/protoactor-go"}},
		"sweeper/clocktest":     {[]string{"sweeper"}, nil},
		"actors":                {[]string{"table", "table/journal", "sweeper"}, []string{"github.com/asynkron/protoactor-go"}},
		"actors/actorstest":     {[]string{"actors", "sweeper/clocktest"}, nil},
		"api":                   {[]string{"table"}, nil},
		"api/httpapi":           {transport, nil},
		"api/middleware":        {transport, nil},
		"api/proxy":             {transport, nil},
		"api/admin":             {transport, nil},
		"api/metrics":           {[]string{"api", "api/rules"}, []string{"github.com/prometheus/client_golang"}},
		"api/rules":             {[]string{"table"}, []string{"go.yaml.in/yaml/v3", "github.com/fsnotify/fsnotify"}},
		"api/clientip":          {nil, nil},
		"api/client":            {[]string{"table", "api/internal/jsonstr"}, nil},
		"api/internal/httpwire": {[]string{"api", "api/rules", "table", "api/internal/jsonstr"}, nil},
		"api/internal/jsonstr":  {nil, nil},
		"api/internal/apitest":  {[]string{"api", "api/httpapi", "api/rules", "table"}, nil},
		"cmd/ratelimitd":        {[]string{"actors", "api", "api/admin", "api/clientip", "api/httpapi", "api/metrics", "api/proxy", "api/rules", "sweeper", "table"}, nil},
	}
	root := filepath.Join("..", "..")
	seen := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() && path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (bench/): its own rules
			}
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		rule, ok := rules[rel]
		if !ok {
			t.Errorf("package %s has no import rule here; add one", rel)
			return nil
		}
		seen[rel] = true
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case strings.HasPrefix(p, module):
				if !slices.Contains(rule.ours, strings.TrimPrefix(p, module)) {
					t.Errorf("%s imports %s; %s may import only %v of ours", path, p, rel, rule.ours)
				}
			case strings.Contains(strings.Split(p, "/")[0], "."):
				if !slices.ContainsFunc(rule.theirs, func(owned string) bool { return p == owned || strings.HasPrefix(p, owned+"/") }) {
					t.Errorf("%s imports %s; only its owning package may (%s owns %v)", path, p, rel, rule.theirs)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for pkg := range rules {
		if !seen[pkg] {
			t.Errorf("rule for %s, which has no Go files", pkg)
		}
	}
}
