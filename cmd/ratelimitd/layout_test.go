package main

import (
	"go/ast"
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
		"table":                  {nil, []string{"github.com/tidwall/btree"}},
		"table/journal":          {nil, []string{"github.com/edsrzf/mmap-go"}},
		"sweeper":                {nil, nil},
		"actors/clock":           {nil, nil},
		"actors/clock/clocktest": {[]string{"actors/clock"}, nil},
		"actors":                 {[]string{"table", "table/journal", "sweeper", "actors/clock", "actors/internal/peer", "actors/topk"}, []string{"github.com/asynkron/protoactor-go", "go.etcd.io/etcd", "go.uber.org/zap"}},
		"actors/actorstest":      {[]string{"actors", "actors/clock/clocktest", "actors/internal/etcdtest", "actors/internal/certtest"}, nil},
		"actors/topk":            {nil, nil},
		"api":                    {[]string{"table"}, nil},
		"api/httpapi":            {transport, nil},
		"api/middleware":         {transport, nil},
		"api/proxy":              {transport, nil},
		"api/admin":              {append(transport, "api/internal/secret"), nil},
		"api/metrics":            {[]string{"api", "api/rules", "api/resp", "api/rls"}, []string{"github.com/prometheus/client_golang"}},
		"api/rules":              {[]string{"table", "api/internal/yamlconf", "api/internal/filewatch"}, nil},
		"api/clientip":           {nil, nil},
		"api/client":             {[]string{"table", "api/internal/jsonstr"}, nil},
		"api/resp":               {[]string{"table", "api/rules", "api/sockio", "api/internal/secret"}, []string{"github.com/tidwall/redcon"}},
		"api/sockio":             {nil, nil},
		"api/dashboard":          {[]string{"table", "api/internal/secret"}, nil},
		// secret compares the passwords and tokens of the transports that ask for one, and limits the attempts at them.
		"api/internal/secret":   {[]string{"table"}, nil},
		"api/internal/httpwire": {[]string{"api", "api/rules", "table", "api/internal/jsonstr"}, nil},
		"api/internal/jsonstr":  {nil, nil},
		"api/internal/apitest":  {[]string{"api", "api/httpapi", "api/rules", "table"}, nil},
		// yamlconf owns yaml for the config formats (api/rules, api/rls).
		"api/internal/yamlconf": {nil, []string{"go.yaml.in/yaml/v3"}},
		// filewatch owns fsnotify for the reloads of the config files.
		"api/internal/filewatch": {nil, []string{"github.com/fsnotify/fsnotify"}},
		"api/rls":                {[]string{"table", "api/internal/yamlconf", "api/internal/filewatch"}, []string{"google.golang.org/grpc", "github.com/envoyproxy/go-control-plane/envoy", "google.golang.org/protobuf"}},
		// grpc has two owners, each serving its own protocol: the Envoy RLS transport and the members' transport.
		"actors/internal/peer":     {nil, []string{"google.golang.org/grpc"}},
		"actors/internal/etcdtest": {[]string{"actors/internal/certtest"}, nil},
		"actors/internal/certtest": {nil, nil},
		"cmd/ratelimitd":           {[]string{"actors", "api", "api/admin", "api/clientip", "api/httpapi", "api/metrics", "api/proxy", "api/resp", "api/rls", "api/rules", "sweeper", "table", "table/journal", "actors/topk", "api/dashboard", "api/sockio"}, nil},
	}
	// Parts of a module that another package owns: the members' transport
	// alone makes TLS credentials of gRPC.
	owned := map[string]string{"google.golang.org/grpc/credentials": "actors/internal/peer"}
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
			for part, owner := range owned {
				if (p == part || strings.HasPrefix(p, part+"/")) && rel != owner {
					t.Errorf("%s imports %s; only %s may", path, p, owner)
				}
			}
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

// framework is the module path of the actor framework: an implementation
// detail of package actors that no exported API of ours may show.
const framework = "github.com/asynkron/protoactor-go"

// TestNoFrameworkInPublicAPI: no exported name of any package of the module
// (an exported function's signature, an exported field or method, an
// exported type, var or const) uses a type of the actor framework, so that
// embedders and the transports never depend on it. Test files are exempt.
func TestNoFrameworkInPublicAPI(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		names := map[string]bool{} // the file's names for framework packages
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p != framework && !strings.HasPrefix(p, framework+"/") {
				continue
			}
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names[name] = true
		}
		if len(names) == 0 {
			return nil
		}
		report := func(what string, n ast.Node) {
			if n == nil || !usesFramework(n, names) {
				return
			}
			t.Errorf("%s: exported %s uses a type of %s", fset.Position(n.Pos()), what, framework)
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if !decl.Name.IsExported() || decl.Recv != nil && !exportedRecv(decl.Recv) {
					continue
				}
				report(decl.Name.Name, decl.Type)
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						if spec.Name.IsExported() {
							reportType(spec.Name.Name, spec.Type, report)
						}
					case *ast.ValueSpec:
						for i, name := range spec.Names {
							if !name.IsExported() {
								continue
							}
							report(name.Name, spec.Type)
							if i < len(spec.Values) {
								report(name.Name, spec.Values[i])
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// reportType reports the framework types an exported type shows: in its
// exported fields and methods if it is a struct or an interface, else
// anywhere in its definition.
func reportType(name string, typ ast.Expr, report func(string, ast.Node)) {
	var fields *ast.FieldList
	switch typ := typ.(type) {
	case *ast.StructType:
		fields = typ.Fields
	case *ast.InterfaceType:
		fields = typ.Methods
	default:
		report(name, typ)
		return
	}
	for _, field := range fields.List {
		if len(field.Names) == 0 { // embedded: exported with its type
			report(name, field.Type)
		}
		for _, n := range field.Names {
			if n.IsExported() {
				report(name+"."+n.Name, field.Type)
			}
		}
	}
}

// usesFramework reports whether n names a package in names (pkg.Type).
func usesFramework(n ast.Node, names map[string]bool) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && names[id.Name] {
				found = true
			}
		}
		return !found
	})
	return found
}

// exportedRecv reports whether a method's receiver type is exported.
func exportedRecv(recv *ast.FieldList) bool {
	typ := recv.List[0].Type
	for {
		switch t := typ.(type) {
		case *ast.StarExpr:
			typ = t.X
		case *ast.IndexExpr:
			typ = t.X
		case *ast.IndexListExpr:
			typ = t.X
		case *ast.Ident:
			return t.IsExported()
		default:
			return false
		}
	}
}
