package rules

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/decoders.golden")

// ruleBodies are rules with zero, one or several faults, each written in
// both formats: the YAML as one rule of a file, the JSON as a rule object.
var ruleBodies = []struct{ yaml, json string }{
	{`{name: a, scale: 1s, limit: 1}`, `{"name":"a","scale":"1s","limit":1}`},
	{`{name: a, scale: 1000, limit: 1, burst: 2, algorithm: token_bucket, shadow: true, key: "header:X", match: {prefix: /A, method: get, host: "H:80"}}`,
		`{"name":"a","scale":1000,"limit":1,"burst":2,"algorithm":"token_bucket","shadow":true,"key":"header:X","match":{"prefix":"/A","method":"get","host":"H:80"}}`},
	{`{scale: 1s, limit: 1}`, `{"scale":"1s","limit":1}`},
	{`{name: A, scale: 1s, limit: 1}`, `{"name":"A","scale":"1s","limit":1}`},
	{`{name: 123, scale: 1s, limit: 1}`, `{"name":123,"scale":"1s","limit":1}`},
	{`{name: [a], scale: 1s, limit: 1}`, `{"name":["a"],"scale":"1s","limit":1}`},
	{`{name: a, scale: 1s, limit: 1, bogus: 1, zzz: 2}`, `{"name":"a","scale":"1s","limit":1,"zzz":2,"bogus":1}`},
	{`{name: a, algorithm: leaky, scale: 1s, limit: 1}`, `{"name":"a","algorithm":"leaky","scale":"1s","limit":1}`},
	{`{name: a, algorithm: [x], scale: 1s, limit: 1}`, `{"name":"a","algorithm":0,"scale":"1s","limit":1}`},
	{`{name: a, limit: 1}`, `{"name":"a","limit":1}`},
	{`{name: a, scale: soon, limit: 1}`, `{"name":"a","scale":"soon","limit":1}`},
	{`{name: a, scale: 0, limit: 1}`, `{"name":"a","scale":0,"limit":1}`},
	{`{name: a, scale: 1.5, limit: 1}`, `{"name":"a","scale":1.5,"limit":1}`},
	{`{name: a, scale: 99999999999999999999, limit: 1}`, `{"name":"a","scale":99999999999999999999,"limit":1}`},
	{`{name: a, scale: "99999999999999999999", limit: 1}`, `{"name":"a","scale":"99999999999999999999","limit":1}`},
	{`{name: a, scale: 1500us, limit: 1}`, `{"name":"a","scale":"1500us","limit":1}`},
	{`{name: a, scale: 8785h, limit: 1}`, `{"name":"a","scale":"8785h","limit":1}`},
	{`{name: a, scale: true, limit: 1}`, `{"name":"a","scale":true,"limit":1}`},
	{`{name: a, scale: 1s}`, `{"name":"a","scale":"1s"}`},
	{`{name: a, scale: 1s, limit: "1"}`, `{"name":"a","scale":"1s","limit":"1"}`},
	{`{name: a, scale: 1s, limit: -1}`, `{"name":"a","scale":"1s","limit":-1}`},
	{`{name: a, scale: 1s, limit: 1.0}`, `{"name":"a","scale":"1s","limit":1e3}`},
	{`{name: a, scale: 1s, limit: 1, burst: -1}`, `{"name":"a","scale":"1s","limit":1,"burst":-1}`},
	{`{name: a, scale: 1s, limit: 1, burst: x}`, `{"name":"a","scale":"1s","limit":1,"burst":"x"}`},
	{`{name: a, scale: 1s, limit: 1, shadow: "true"}`, `{"name":"a","scale":"1s","limit":1,"shadow":"true"}`},
	{`{name: a, scale: 1s, limit: 1, shadow: 1}`, `{"name":"a","scale":"1s","limit":1,"shadow":1}`},
	{`{name: a, scale: 1s, limit: 1, key: 5}`, `{"name":"a","scale":"1s","limit":1,"key":5}`},
	{`{name: a, scale: 1s, limit: 1, key: "cookie:x"}`, `{"name":"a","scale":"1s","limit":1,"key":"cookie:x"}`},
	{`{name: a, scale: 1s, limit: 1, match: /api}`, `{"name":"a","scale":"1s","limit":1,"match":"/api"}`},
	{`{name: a, scale: 1s, limit: 1, match: {method: GET}}`, `{"name":"a","scale":"1s","limit":1,"match":{"method":"GET"}}`},
	{`{name: a, scale: 1s, limit: 1, match: {prefix: ""}}`, `{"name":"a","scale":"1s","limit":1,"match":{"prefix":""}}`},
	{`{name: a, scale: 1s, limit: 1, match: {prefix: /, path: /}}`, `{"name":"a","scale":"1s","limit":1,"match":{"prefix":"/","path":"/"}}`},
	{`{name: a, scale: 1s, limit: 1, match: {prefix: api}}`, `{"name":"a","scale":"1s","limit":1,"match":{"prefix":"api"}}`},
	{`{name: a, scale: 1s, limit: 1, match: {prefix: /, method: "G T"}}`, `{"name":"a","scale":"1s","limit":1,"match":{"prefix":"/","method":"G T"}}`},
	{`{name: a, scale: 1s, limit: 1, match: {prefix: /, host: [x]}}`, `{"name":"a","scale":"1s","limit":1,"match":{"prefix":"/","host":1}}`},
	{`{name: a, scale: 1s, limit: 1, match: {prefix: /, host: "a b"}}`, `{"name":"a","scale":"1s","limit":1,"match":{"prefix":"/","host":"a b"}}`},
	{`{name: a, scale: 1s, limit: 1, match: ~, burst: ~, shadow: ~, algorithm: ~, key: ~}`, `{"name":"a","scale":"1s","limit":1,"match":null,"burst":null,"shadow":null,"algorithm":null,"key":null}`},
	{`{name: A, algorithm: leaky, scale: 1s, limit: 1}`, `{"name":"A","algorithm":"leaky","scale":"1s","limit":1}`},
	{`{name: A, limit: 1}`, `{"name":"A","limit":1}`},
	{`{name: A, scale: 0, limit: -1}`, `{"name":"A","scale":0,"limit":-1}`},
	{`{name: a, scale: 0, limit: -1, burst: -1}`, `{"name":"a","scale":0,"limit":-1,"burst":-1}`},
	{`{name: a, scale: soon}`, `{"name":"a","scale":"soon"}`},
	{`{name: a, scale: 1s, limit: x, burst: y}`, `{"name":"a","scale":"1s","limit":"x","burst":"y"}`},
	{`{name: a, scale: 1s, limit: 1, key: "x", match: {prefix: api}}`, `{"name":"a","scale":"1s","limit":1,"key":"x","match":{"prefix":"api"}}`},
	{`{name: A, scale: 1s, limit: 1, match: /api}`, `{"name":"A","scale":"1s","limit":1,"match":"/api"}`},
	{`{name: a, scale: 1s, limit: -1, match: {method: GET}}`, `{"name":"a","scale":"1s","limit":-1,"match":{"method":"GET"}}`},
	{`[1]`, `[1]`},
	{`a`, `"a"`},
}

// TestDecodersGolden pins the answers of both rule decoders, errors,
// messages and lines included, to testdata/decoders.golden.
func TestDecodersGolden(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	for _, b := range ruleBodies {
		file := "rules:\n  - " + b.yaml + "\n"
		rs, err := Parse([]byte(file))
		fmt.Fprintf(&out, "yaml %s\n  -> %v %v\n", b.yaml, rs, err)
		var r Rule
		err = json.Unmarshal([]byte(b.json), &r)
		fmt.Fprintf(&out, "json %s\n  -> %+v %v\n", b.json, r, err)
	}
	path := filepath.Join("testdata", "decoders.golden")
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("line %d:\ngot  %s\nwant %s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("got %d lines, want %d", len(gl), len(wl))
	}
}
