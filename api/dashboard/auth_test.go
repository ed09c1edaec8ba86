package dashboard

import (
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
)

// login POSTs the login form with token and returns the response.
func login(t *testing.T, c *http.Client, base, token string) (*http.Response, string) {
	t.Helper()
	return do(t, c, http.MethodPost, base+PathLogin, url.Values{"token": {token}}.Encode(),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
}

// sessionCookie returns the session cookie a response sets.
func sessionCookie(t *testing.T, resp *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == CookieName {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", CookieName, resp.Header["Set-Cookie"])
	return nil
}

func isLoginForm(body string) bool {
	return strings.Contains(body, `<form method="post" action="/login">`) && strings.Contains(body, `name="token" type="password"`)
}

// TestLogin: without a session every page path shows the login form (200,
// no redirect); a wrong token is 401 with the form and no hint; the right
// one sets the session cookie, HttpOnly, SameSite=Strict, Path=/, expiring
// in 12 h, not Secure over plain HTTP, and sends the browser to the page,
// which the cookie then opens.
func TestLogin(t *testing.T) {
	t.Parallel()
	srv, clk := server(t, Options{})
	for _, p := range []string{PathRoot, PathPage, PathPage + "/"} {
		resp, body := do(t, nil, http.MethodGet, srv.URL+p, "", nil)
		if resp.StatusCode != http.StatusOK || !isLoginForm(body) || resp.Header.Get("Cache-Control") != "no-store" ||
			resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || len(resp.Cookies()) != 0 {
			t.Errorf("GET %s without a session: %d %v, body %.80q; want 200 and the login form", p, resp.StatusCode, resp.Header, body)
		}
	}
	var wrong []string
	for _, tok := range []string{"", "x", testToken[:len(testToken)-1], testToken + "x", strings.ToUpper(testToken)} {
		resp, body := login(t, nil, srv.URL, tok)
		if resp.StatusCode != http.StatusUnauthorized || !isLoginForm(body) || len(resp.Cookies()) != 0 {
			t.Errorf("login with %q: %d, cookies %v; want 401, the form, no cookie", tok, resp.StatusCode, resp.Cookies())
		}
		wrong = append(wrong, body)
	}
	for _, b := range wrong[1:] {
		if b != wrong[0] {
			t.Errorf("wrong tokens got different answers (a hint):\n%s\n%s", wrong[0], b)
		}
	}
	if !strings.Contains(wrong[0], "Not accepted.") {
		t.Errorf("a wrong token's form says nothing: %s", wrong[0])
	}

	resp, _ := login(t, nil, srv.URL, testToken)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != PathPage {
		t.Fatalf("login: %d Location %q, want 303 to %s", resp.StatusCode, resp.Header.Get("Location"), PathPage)
	}
	c := sessionCookie(t, resp)
	set := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"Path=/", "HttpOnly", "SameSite=Strict", "Max-Age=43200", "Expires=" + clk.Now().Add(12*time.Hour).UTC().Format(http.TimeFormat)} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %q", set, want)
		}
	}
	if c.Secure || strings.Contains(set, "Secure") {
		t.Errorf("Set-Cookie %q: Secure over plain HTTP", set)
	}
	resp, body := do(t, nil, http.MethodGet, srv.URL+PathPage, "", map[string]string{"Cookie": c.Name + "=" + c.Value})
	if resp.StatusCode != http.StatusOK || isLoginForm(body) || !strings.Contains(body, `<script src="/dashboard/static/app.js" defer></script>`) {
		t.Errorf("GET %s with the cookie: %d %.100q, want the page", PathPage, resp.StatusCode, body)
	}
}

// TestLoginBrowser walks the flow as a browser does, with a cookie jar and
// following redirects: log in, land on the page, read JSON, log out.
func TestLoginBrowser(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, Options{Traffic: &TrafficRing{}})
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, body := login(t, browser, srv.URL, testToken)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != PathPage || isLoginForm(body) {
		t.Fatalf("after login: %d at %s, want the page", resp.StatusCode, resp.Request.URL.Path)
	}
	if resp, _ := do(t, browser, http.MethodGet, srv.URL+PathTraffic, "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s with the session: %d, want 200", PathTraffic, resp.StatusCode)
	}
	resp, body = do(t, browser, http.MethodPost, srv.URL+PathLogout, "", nil)
	if resp.StatusCode != http.StatusOK || !isLoginForm(body) {
		t.Errorf("after logout: %d, want the login form", resp.StatusCode)
	}
	if resp, _ := do(t, browser, http.MethodGet, srv.URL+PathTraffic, "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET %s after logout: %d, want 401", PathTraffic, resp.StatusCode)
	}
}

// TestSecureCookieOverTLS: behind TLS the session cookie is Secure.
func TestSecureCookieOverTLS(t *testing.T) {
	t.Parallel()
	h, err := New(Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, _ := login(t, c, srv.URL, testToken)
	if ck := sessionCookie(t, resp); !ck.Secure || resp.TLS == nil {
		t.Errorf("over TLS: Set-Cookie %q, want Secure", resp.Header.Get("Set-Cookie"))
	}
}

// TestSessionRejected: a forged cookie (another key, a changed expiry, a
// truncated MAC, garbage) or an expired one opens nothing: 401 for the
// JSON endpoints, the login form for the page.
func TestSessionRejected(t *testing.T) {
	t.Parallel()
	srv, clk := server(t, Options{Traffic: &TrafficRing{}})
	other, _ := server(t, Options{Traffic: &TrafficRing{}})
	resp, _ := login(t, nil, srv.URL, testToken)
	good := sessionCookie(t, resp).Value
	resp, _ = login(t, nil, other.URL, testToken)
	foreign := sessionCookie(t, resp).Value

	tampered := []byte(good)
	tampered[3] ^= 1 // inside the expiry
	cases := map[string]string{
		"another process's key": foreign,
		"expiry changed":        string(tampered),
		"MAC cut short":         good[:len(good)-2],
		"garbage":               "bm90IGEgY29va2ll",
		"empty":                 "",
	}
	check := func(name, value string) {
		t.Helper()
		h := map[string]string{"Cookie": CookieName + "=" + value}
		if resp, body := do(t, nil, http.MethodGet, srv.URL+PathTraffic, "", h); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("%s: GET %s: %d %s, want 401", name, PathTraffic, resp.StatusCode, body)
		}
		if resp, body := do(t, nil, http.MethodGet, srv.URL+PathPage, "", h); resp.StatusCode != http.StatusOK || !isLoginForm(body) {
			t.Errorf("%s: GET %s: %d, want the login form", name, PathPage, resp.StatusCode)
		}
	}
	for name, v := range cases {
		check(name, v)
	}
	// The good cookie works until it expires, 12 h on.
	h := map[string]string{"Cookie": CookieName + "=" + good}
	clk.Add(12*time.Hour - time.Second)
	if resp, _ := do(t, nil, http.MethodGet, srv.URL+PathTraffic, "", h); resp.StatusCode != http.StatusOK {
		t.Errorf("a second before expiry: %d, want 200", resp.StatusCode)
	}
	clk.Add(time.Second)
	check("expired", good)
}

// TestTokenRotation: with Options.Tokens, any token the function returns
// logs in and is a bearer token, and a session lasts while the token it
// was logged in with is returned: dropping the old token ends the old
// token's sessions and no other.
func TestTokenRotation(t *testing.T) {
	t.Parallel()
	const oldTok, newTok = "old-token-0123456789", "new-token-0123456789"
	var current atomic.Pointer[[]string]
	set := func(toks ...string) { current.Store(&toks) }
	set(oldTok)
	srv, _ := server(t, Options{Traffic: &TrafficRing{}, Tokens: func() []string { return *current.Load() }})
	status := func(header map[string]string) int {
		t.Helper()
		resp, _ := do(t, nil, http.MethodGet, srv.URL+PathTraffic, "", header)
		return resp.StatusCode
	}
	withCookie := func(v string) map[string]string { return map[string]string{"Cookie": CookieName + "=" + v} }
	withBearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

	if resp, _ := login(t, nil, srv.URL, newTok); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("login with the new token before the rotation: %d, want 401", resp.StatusCode)
	}
	resp, _ := login(t, nil, srv.URL, oldTok)
	oldSession := sessionCookie(t, resp).Value

	set(oldTok, newTok)
	resp, _ = login(t, nil, srv.URL, newTok)
	newSession := sessionCookie(t, resp).Value
	for name, h := range map[string]map[string]string{
		"the old session": withCookie(oldSession), "the new session": withCookie(newSession),
		"the old bearer": withBearer(oldTok), "the new bearer": withBearer(newTok),
	} {
		if got := status(h); got != http.StatusOK {
			t.Errorf("during the rotation, %s: %d, want 200", name, got)
		}
	}

	set(newTok)
	for name, c := range map[string]struct {
		h    map[string]string
		want int
	}{
		"the old session": {withCookie(oldSession), http.StatusUnauthorized},
		"the old bearer":  {withBearer(oldTok), http.StatusUnauthorized},
		"the new session": {withCookie(newSession), http.StatusOK},
		"the new bearer":  {withBearer(newTok), http.StatusOK},
	} {
		if got := status(c.h); got != c.want {
			t.Errorf("after the rotation, %s: %d, want %d", name, got, c.want)
		}
	}
	if resp, body := do(t, nil, http.MethodGet, srv.URL+PathPage, "", withCookie(oldSession)); resp.StatusCode != http.StatusOK || !isLoginForm(body) {
		t.Errorf("the page with the old session after the rotation: %d, want the login form", resp.StatusCode)
	}
	if resp, _ := login(t, nil, srv.URL, oldTok); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("login with the dropped token: %d, want 401", resp.StatusCode)
	}
}

// TestBearer: the JSON endpoints take the admin token as a bearer token
// instead of a cookie; another scheme, a wrong token or two headers do not
// pass.
func TestBearer(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, Options{Traffic: &TrafficRing{}})
	for _, c := range []struct {
		name   string
		header []string
		status int
	}{
		{"bearer", []string{"Bearer " + testToken}, 200},
		{"scheme in any case", []string{"bEaReR " + testToken}, 200},
		{"none", nil, 401},
		{"wrong token", []string{"Bearer " + testToken + "x"}, 401},
		{"basic", []string{"Basic " + testToken}, 401},
		{"twice", []string{"Bearer " + testToken, "Bearer " + testToken}, 401},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+PathTraffic, nil)
		req.Header["Authorization"] = c.header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.status)
		}
	}
}

// TestBearerLimited: wrong bearer tokens count against the address's
// login attempts (right ones and requests without a token do not), on
// the JSON endpoints and on the page alike; once they are used up, a
// request with a token, the right one too, is 429 with Retry-After, the
// JSON endpoints in JSON and the page as the login form, and so is a
// login; a session cookie is still served, and another address too.
func TestBearerLimited(t *testing.T) {
	t.Parallel()
	var logs apitest.LogBuffer
	var fails apitest.TokenFailures
	srv, clk := server(t, Options{Traffic: &TrafficRing{}, Logger: logs.Logger(), OnTokenFailure: fails.Hook})
	resp, _ := login(t, noRedirects(), srv.URL, testToken) // one of the attempts
	cookie := sessionCookie(t, resp)
	get := func(path string, header map[string]string) (*http.Response, string) {
		t.Helper()
		return do(t, nil, http.MethodGet, srv.URL+path, "", header)
	}
	wrong := map[string]string{"Authorization": "Bearer " + testToken + "x"}
	for i := range 20 {
		if resp, _ := get(PathTraffic, bearer); resp.StatusCode != 200 {
			t.Fatalf("the right token %d: %d, want 200", i+1, resp.StatusCode)
		}
		if resp, _ := get(PathTraffic, nil); resp.StatusCode != 401 {
			t.Fatalf("no token %d: %d, want 401", i+1, resp.StatusCode)
		}
	}
	for i := range LoginAttempts - 1 {
		path := PathTraffic
		if i%2 == 1 {
			path = PathPage // the page with a wrong token: the login form
		}
		if resp, body := get(path, wrong); path == PathTraffic && resp.StatusCode != 401 || path == PathPage && (resp.StatusCode != 200 || !isLoginForm(body)) {
			t.Fatalf("wrong token %d on %s: %d, want 401 (the endpoint) or the login form (the page)", i+1, path, resp.StatusCode)
		}
	}
	if n := strings.Count(logs.String(), "bearer tokens refused for a while"); n != 1 {
		t.Fatalf("logged %d lock-outs after the last attempt, want 1:\n%s", n, logs.String())
	}
	resp, body := get(PathTraffic, bearer)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "6" || !strings.Contains(body, `"error":"too many attempts at the token from this address; retry in 6 s"`) {
		t.Errorf("the right token, limited: %d Retry-After %q %s; want 429, 6 and the JSON error", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	resp, body = get(PathPage, bearer)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "6" || !isLoginForm(body) || !strings.Contains(body, "try again in 6 s") {
		t.Errorf("the page with the right token, limited: %d Retry-After %q; want 429, 6 and the login form saying so", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp, _ := login(t, noRedirects(), srv.URL, testToken); resp.StatusCode != 429 {
		t.Errorf("a login, limited: %d, want 429", resp.StatusCode)
	}
	if resp, _ := do(t, nil, http.MethodGet, srv.URL+PathTraffic, "", map[string]string{"Cookie": cookie.Name + "=" + cookie.Value}); resp.StatusCode != 200 {
		t.Errorf("the session cookie, limited: %d, want 200", resp.StatusCode)
	}
	if resp, _ := get(PathTraffic, nil); resp.StatusCode != 401 {
		t.Errorf("no token, limited: %d, want 401", resp.StatusCode)
	}
	req := httptest.NewRequest(http.MethodGet, PathTraffic, nil)
	req.RemoteAddr = "192.0.2.9:1000"
	req.Header.Set("Authorization", "Bearer "+testToken)
	h, err := New(Options{Token: testToken, Traffic: &TrafficRing{}, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 {
		t.Errorf("another handler's address: %d, want 200", w.Code)
	}
	clk.Add(6 * time.Second)
	if resp, _ := get(PathTraffic, bearer); resp.StatusCode != 200 {
		t.Errorf("the right token 6 s on: %d, want 200", resp.StatusCode)
	}
	// Told: the 9 wrong bearer tokens and the 3 attempts refused unread
	// (the endpoint, the page, the login); not the right login, the
	// session, nor the requests without a token.
	if w, l := fails.Wrong.Load(), fails.Limited.Load(); w != 9 || l != 3 {
		t.Errorf("OnTokenFailure: %d wrong and %d limited, want 9 and 3", w, l)
	}
}

// TestLoginLimited: an address may try LoginAttempts logins at once, then
// one per 6 s (10 a minute); the next is 429 with Retry-After, the right
// token too; another address is not held back; an IPv6 /64 counts as one.
func TestLoginLimited(t *testing.T) {
	t.Parallel()
	clk := newClock()
	var fails apitest.TokenFailures
	h, err := New(Options{Token: testToken, Now: clk.Now, OnTokenFailure: fails.Hook})
	if err != nil {
		t.Fatal(err)
	}
	try := func(addr, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, PathLogin, strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = addr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for i := range LoginAttempts {
		if w := try("192.0.2.1:1000", "wrong"); w.Code != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d, want 401", i+1, w.Code)
		}
	}
	w := try("192.0.2.1:2000", testToken)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "6" || !strings.Contains(w.Body.String(), "try again in 6 s") {
		t.Errorf("attempt 11: %d Retry-After %q, want 429 and 6", w.Code, w.Header().Get("Retry-After"))
	}
	if len(w.Result().Cookies()) != 0 {
		t.Error("a limited login set a cookie")
	}
	if w := try("192.0.2.2:1000", testToken); w.Code != http.StatusSeeOther {
		t.Errorf("another address: %d, want 303", w.Code)
	}
	clk.Add(6 * time.Second)
	if w := try("192.0.2.1:3000", testToken); w.Code != http.StatusSeeOther {
		t.Errorf("6 s later: %d, want 303", w.Code)
	}
	if w := try("192.0.2.1:3000", testToken); w.Code != http.StatusTooManyRequests {
		t.Errorf("at once again: %d, want 429", w.Code)
	}
	for i := range LoginAttempts {
		if w := try("[2001:db8:1:2::"+strings.Repeat("a", i%3+1)+"]:1", "wrong"); w.Code != http.StatusUnauthorized {
			t.Fatalf("IPv6 attempt %d: %d, want 401", i+1, w.Code)
		}
	}
	if w := try("[2001:db8:1:2:ffff::1]:1", testToken); w.Code != http.StatusTooManyRequests {
		t.Errorf("the same /64: %d, want 429", w.Code)
	}
	if w := try("[2001:db8:1:3::1]:1", testToken); w.Code != http.StatusSeeOther {
		t.Errorf("another /64: %d, want 303", w.Code)
	}
	if w, l := fails.Wrong.Load(), fails.Limited.Load(); w != 2*LoginAttempts || l != 3 {
		t.Errorf("OnTokenFailure: %d wrong and %d limited, want %d and 3", w, l, 2*LoginAttempts)
	}
}

func TestClientKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ addr, want string }{
		{"192.0.2.1:80", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:80", "192.0.2.1"},
		{"[2001:db8::1]:80", "2001:db8::/64"},
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"pipe", "?pipe"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = c.addr
		if got := clientKey(r); got != c.want {
			t.Errorf("clientKey(%q) = %q, want %q", c.addr, got, c.want)
		}
	}
}

func TestNewOptions(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{"", "has space", "tab\t", strings.Repeat("x", 4097), "é"} {
		if _, err := New(Options{Token: tok}); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("Token %.20q: got %v, want ErrInvalidOption", tok, err)
		}
	}
	if _, err := New(Options{Token: strings.Repeat("x", 4096)}); err != nil {
		t.Errorf("a 4096-byte token: %v", err)
	}
	toks := func() []string { return []string{"a-token"} }
	if _, err := New(Options{Token: "a-token", Tokens: toks}); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "Tokens") {
		t.Errorf("Token and Tokens: got %v, want ErrInvalidOption naming Tokens", err)
	}
	if _, err := New(Options{Tokens: toks}); err != nil {
		t.Errorf("Tokens alone: %v", err)
	}
}
