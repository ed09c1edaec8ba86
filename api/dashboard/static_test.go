package dashboard

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSecurityHeaders: every response — the page, the login form and its
// answers, static files, JSON, errors, 404 and 405 — carries the CSP,
// nosniff and DENY framing; the JSON, the page and the form are not stored.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, Options{Traffic: &TrafficRing{}, Top: &fakeTop{}, Rules: fakeRules{}, Health: &fakeHealth{}})
	resp, _ := login(t, nil, srv.URL, testToken)
	cookie := map[string]string{"Cookie": CookieName + "=" + sessionCookie(t, resp).Value}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	for _, c := range []struct {
		method, path, body string
		header             map[string]string
		status             int
		cache              string
	}{
		{"GET", "/", "", nil, 200, "no-store"},
		{"GET", "/dashboard", "", cookie, 200, "no-store"},
		{"HEAD", "/dashboard", "", cookie, 200, "no-store"},
		{"POST", "/login", "token=nope", form, 401, "no-store"},
		{"POST", "/login", "token=" + testToken, form, 303, "no-store"},
		{"POST", "/logout", "", nil, 303, "no-store"},
		{"GET", "/dashboard/static/app.js", "", nil, 200, "no-cache"},
		{"GET", "/dashboard/static/nope.js", "", nil, 404, "no-store"},
		{"GET", "/top", "", cookie, 200, "no-store"},
		{"GET", "/top?by=x", "", cookie, 400, "no-store"},
		{"GET", "/dashboard/traffic", "", cookie, 200, "no-store"},
		{"GET", "/dashboard/traffic", "", nil, 401, "no-store"},
		{"GET", "/dashboard/rules", "", cookie, 200, "no-store"},
		{"GET", "/dashboard/health", "", cookie, 200, "no-store"},
		{"POST", "/simulate", `{}`, map[string]string{"Cookie": cookie["Cookie"], "Content-Type": "application/json"}, 400, "no-store"},
		{"DELETE", "/dashboard", "", nil, 405, "no-store"},
		{"GET", "/elsewhere", "", nil, 404, "no-store"},
	} {
		resp, body := do(t, nil, c.method, srv.URL+c.path, c.body, c.header)
		h := resp.Header
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: status %d, want %d (%.100s)", c.method, c.path, resp.StatusCode, c.status, body)
		}
		for k, want := range map[string]string{
			"Content-Security-Policy": ContentSecurityPolicy,
			"X-Content-Type-Options":  "nosniff",
			"X-Frame-Options":         "DENY",
			"Referrer-Policy":         "no-referrer",
			"Cache-Control":           c.cache,
		} {
			if got := h.Get(k); got != want {
				t.Errorf("%s %s: %s %q, want %q", c.method, c.path, k, got, want)
			}
		}
	}
	for _, bad := range []string{"'unsafe-inline'", "'unsafe-eval'", "*", "data:", "http:"} {
		if strings.Contains(ContentSecurityPolicy, bad) {
			t.Errorf("the CSP allows %s", bad)
		}
	}
	for _, need := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"} {
		if !strings.Contains(ContentSecurityPolicy, need+";") && !strings.HasSuffix(ContentSecurityPolicy, need) {
			t.Errorf("the CSP lacks %s", need)
		}
	}
}

// TestStaticFiles: static files are served with their type and an ETag
// that answers 304 when the browser has it.
func TestStaticFiles(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, Options{})
	for name, ctype := range map[string]string{
		"app.js": "text/javascript; charset=utf-8", "uPlot.iife.min.js": "text/javascript; charset=utf-8",
		"style.css": "text/css; charset=utf-8", "uPlot.min.css": "text/css; charset=utf-8", "VENDOR.md": "text/plain; charset=utf-8",
		"favicon.svg": "image/svg+xml",
	} {
		want, err := files.ReadFile("static/" + name)
		if err != nil {
			t.Fatal(err)
		}
		resp, body := do(t, nil, http.MethodGet, srv.URL+PathStatic+name, "", nil)
		if resp.StatusCode != 200 || body != string(want) || resp.Header.Get("Content-Type") != ctype {
			t.Errorf("%s: %d %q, %d bytes; want 200 %q, %d bytes", name, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), ctype, len(want))
		}
		sum := sha256.Sum256(want)
		etag := `"` + hex.EncodeToString(sum[:12]) + `"`
		if resp.Header.Get("ETag") != etag {
			t.Errorf("%s: ETag %q, want %q", name, resp.Header.Get("ETag"), etag)
		}
		if resp, _ := do(t, nil, http.MethodGet, srv.URL+PathStatic+name, "", map[string]string{"If-None-Match": etag}); resp.StatusCode != http.StatusNotModified {
			t.Errorf("%s with If-None-Match: %d, want 304", name, resp.StatusCode)
		}
	}
	// The page itself is not a static file: it needs a session.
	for _, p := range []string{"index.html", "../page/index.html", "login.html"} {
		if resp, _ := do(t, nil, http.MethodGet, srv.URL+PathStatic+p, "", nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
}

var refRE = regexp.MustCompile(`(?:src|href)="(/dashboard/static/[^"]+)"`)

// pageRefs returns the static files an embedded page loads.
func pageRefs(t *testing.T, page string) []string {
	t.Helper()
	b, err := files.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, m := range refRE.FindAllStringSubmatch(string(b), -1) {
		refs = append(refs, strings.TrimPrefix(m[1], PathStatic))
	}
	return refs
}

// TestPageFiles: every file the page and the login form load is embedded,
// every embedded script and style sheet is loaded, and the page with what
// it loads weighs at most 200 KB.
func TestPageFiles(t *testing.T) {
	t.Parallel()
	refs := pageRefs(t, "page/index.html")
	if want := []string{"uPlot.min.css", "favicon.svg", "style.css", "uPlot.iife.min.js", "app.js"}; !slices.Equal(refs, want) {
		t.Errorf("the page loads %v, want %v", refs, want)
	}
	if login := pageRefs(t, "page/login.html"); !slices.Equal(login, []string{"favicon.svg", "style.css"}) {
		t.Errorf("the login form loads %v, want only the icon and style.css", login)
	}
	page, _ := files.ReadFile("page/index.html")
	weight := len(page)
	for _, r := range refs {
		b, err := files.ReadFile("static/" + r)
		if err != nil {
			t.Errorf("the page loads %s, which is not embedded: %v", r, err)
		}
		weight += len(b)
	}
	const maxWeight = 200_000
	if weight > maxWeight {
		t.Errorf("the page and what it loads weigh %d bytes, more than %d", weight, maxWeight)
	}
	t.Logf("page weight: %d bytes", weight)
	err := fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		if (strings.HasSuffix(name, ".js") || strings.HasSuffix(name, ".css") || strings.HasSuffix(name, ".svg")) && !slices.Contains(refs, name) {
			t.Errorf("%s is embedded but the page does not load it", name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPagesHaveNoInlineCode: the CSP forbids inline script and style, so
// the pages must hold none; the script never parses data as HTML.
func TestPagesHaveNoInlineCode(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"page/index.html", "page/login.html"} {
		b, _ := files.ReadFile(p)
		s := string(b)
		for _, bad := range []*regexp.Regexp{
			regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]`), // a script with a body
			regexp.MustCompile(`<style`),
			regexp.MustCompile(`\sstyle=`),
			regexp.MustCompile(`\son[a-z]+=`), // event handler attributes
			regexp.MustCompile(`javascript:`),
			regexp.MustCompile(`https?://`), // nothing from elsewhere
		} {
			if loc := bad.FindStringIndex(s); loc != nil {
				t.Errorf("%s holds %q", p, s[loc[0]:min(loc[1]+20, len(s))])
			}
		}
	}
	js, _ := files.ReadFile("static/app.js")
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setTimeout(\"", "http://", "https://"} {
		if strings.Contains(string(js), bad) {
			t.Errorf("app.js uses %s", bad)
		}
	}
	if !strings.Contains(string(js), ".textContent = ") {
		t.Error("app.js sets no textContent")
	}
}

// TestVendoredFiles: the chart library is npm's uplot 1.6.32, unchanged,
// with its MIT licence and the note that says so.
func TestVendoredFiles(t *testing.T) {
	t.Parallel()
	note, err := files.ReadFile("static/VENDOR.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, sum := range map[string]string{
		"uPlot.iife.min.js": "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f",
		"uPlot.min.css":     "df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04",
	} {
		b, err := files.ReadFile("static/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: SHA-256 %x, want %s (VENDOR.md)", name, got, sum)
		}
		if !strings.Contains(string(note), sum) || !strings.Contains(string(note), "`"+name+"`") {
			t.Errorf("VENDOR.md does not name %s and its hash", name)
		}
	}
	js, _ := files.ReadFile("static/uPlot.iife.min.js")
	lic, _ := files.ReadFile("static/uPlot.LICENSE")
	if !strings.HasPrefix(string(js), "/*! https://github.com/leeoniya/uPlot (v1.6.32) */") ||
		!strings.Contains(string(lic), "The MIT License") || !strings.Contains(string(lic), "Leon Sorokin") ||
		!strings.Contains(string(note), "1.6.32") || !strings.Contains(string(note), "npm pack uplot@1.6.32") {
		t.Error("the vendored uPlot is not 1.6.32 with its MIT licence and its origin noted")
	}
}
