package apitest

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of the wire tests")

// Case is one request of a wire test.
type Case struct {
	Name   string
	Method string
	Target string // path and query, or a whole URL
	Body   string
	Header []string // name, value pairs
}

// Wire serves the cases with h, one after the other, and compares every
// answer (status, headers but Date, body) with testdata/NAME.golden, so
// that no byte a client sees can change unnoticed; -update rewrites it.
func Wire(t *testing.T, name string, h http.Handler, cases []Case) {
	t.Helper()
	var out bytes.Buffer
	for _, c := range cases {
		var req *http.Request
		if c.Body != "" {
			req = httptest.NewRequest(c.Method, c.Target, strings.NewReader(c.Body))
		} else {
			req = httptest.NewRequest(c.Method, c.Target, nil)
		}
		for i := 0; i+1 < len(c.Header); i += 2 {
			req.Header.Add(c.Header[i], c.Header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		body := c.Body
		if len(body) > 120 {
			body = body[:120] + "…(" + strconv.Itoa(len(c.Body)) + " bytes)"
		}
		fmt.Fprintf(&out, "=== %s\n%s %s %q\n--> %d\n", c.Name, c.Method, c.Target, body, w.Code)
		keys := make([]string, 0, len(w.Header()))
		for k := range w.Header() {
			if k != "Date" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&out, "%s: %q\n", k, w.Header()[k])
		}
		fmt.Fprintf(&out, "%s\n\n", w.Body.Bytes())
	}
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got := out.Bytes(); !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s: line %d differs:\ngot  %s\nwant %s", path, i+1, g, w)
			}
		}
	}
}
