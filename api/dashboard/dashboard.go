package dashboard

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/api/internal/secret"
)

// Errors of New, matched with errors.Is.
var (
	// ErrInvalidOption is matched by the error New returns for Options out
	// of range; the message names the option.
	ErrInvalidOption = errors.New("dashboard: invalid option")
)

// The paths the Handler serves; every other one goes to Options.Next.
const (
	PathRoot     = "/"                  // the page (or the login form)
	PathPage     = "/dashboard"         // the page (or the login form); also with a trailing slash
	PathStatic   = "/dashboard/static/" // the page's scripts, styles and chart library
	PathLogin    = "/login"             // POST: the login form's target
	PathLogout   = "/logout"            // POST: ends the session in this browser
	PathTop      = "/top"               // GET: top keys
	PathSimulate = "/simulate"          // POST: the algorithm playground
	PathTraffic  = "/dashboard/traffic" // GET: checks per second
	PathRules    = "/dashboard/rules"   // GET: the rules' rates
	PathHealth   = "/dashboard/health"  // GET: the rate limiter's health
	pathPageDir  = PathPage + "/"       // the page, too
	contentJSON  = "application/json"   // Content-Type of the JSON answers
	contentHTML  = "text/html; charset=utf-8"
	noStore      = "no-store"
	noCache      = "no-cache" // static files: revalidated by ETag
)

// Top keys: GET /top?n= is at most MaxTopN, DefaultTopN when absent.
const (
	MaxTopN     = 100
	DefaultTopN = 20
)

// ContentSecurityPolicy is the Content-Security-Policy of every response:
// everything from this origin only, no inline script or style, no eval,
// no framing, forms posted only here.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// maxSimulations is how many simulations run at once; more wait.
const maxSimulations = 2

//go:embed static page
var files embed.FS

// Options configures New. Every data source is optional: without one, its
// endpoint answers 404 and the page shows the panel as not available.
type Options struct {
	// Token is the admin token: the login form's secret, and the bearer
	// token the JSON endpoints accept. Required, unless Tokens is set: 1
	// to 4096 visible ASCII characters (no spaces).
	Token string
	// Tokens, when not nil, replaces Token: any of the tokens it returns,
	// asked at each request, logs in and is a bearer token, so that they
	// can change while the handler serves. A session lasts while the token
	// it was logged in with is among them. It must be safe for concurrent
	// use.
	Tokens func() []string

	Traffic Traffic // the live traffic chart; a *TrafficRing the checks record into
	Top     TopKeys // top keys by hits and by denials
	Rules   Rules   // each rule's rates
	Health  Health  // the rate limiter's health

	// Next serves every path the dashboard does not (the admin API); nil
	// answers them 404. The dashboard's security headers are set first.
	Next http.Handler
	// Now is the clock: sessions expire, logins are limited and data is
	// read by it; nil means time.Now.
	Now func() time.Time
	// Logger receives failed and limited logins; nil discards them.
	Logger *slog.Logger
	// OnTokenFailure, if set, is told of every login and every bearer
	// token refused: limited false for a wrong token (401, or the login
	// form again), true for one refused without being compared, its
	// address having no attempt left (429). It must be safe for
	// concurrent use and quick.
	OnTokenFailure func(limited bool)
}

// Handler serves the dashboard: the page, its JSON endpoints and the login
// form (see the package documentation). It is safe for concurrent use.
type Handler struct {
	opts     Options
	now      func() time.Time
	log      *slog.Logger
	tokens   func() []string // Options.Tokens, or Options.Token alone
	sessions sessions
	logins   *secret.Limiter
	failed   func(limited bool) // Options.OnTokenFailure, or a no-op
	login    *template.Template
	page     []byte
	static   map[string]staticFile
	sims     chan struct{} // a slot per simulation running
}

// staticFile is an embedded file, ready to serve.
type staticFile struct {
	data  []byte
	ctype string
	etag  string
}

var _ http.Handler = (*Handler)(nil)

// New returns the dashboard's handler, to be served on the admin listener,
// never on the public one. The error matches ErrInvalidOption.
func New(opts Options) (*Handler, error) {
	tokens, err := secret.TokenSource(opts.Token, opts.Tokens, ErrInvalidOption)
	if err != nil {
		return nil, err
	}
	h := &Handler{
		opts:   opts,
		now:    opts.Now,
		log:    opts.Logger,
		tokens: tokens,
		logins: secret.NewLimiter(LoginAttempts, maxLoginAddresses),
		sims:   make(chan struct{}, maxSimulations),
		static: map[string]staticFile{},
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.failed = opts.OnTokenFailure; h.failed == nil {
		h.failed = func(bool) {}
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.sessions.key = make([]byte, 32)
	if _, err := rand.Read(h.sessions.key); err != nil {
		return nil, fmt.Errorf("dashboard: session key: %w", err)
	}
	if h.page, err = files.ReadFile("page/index.html"); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err) // the embedded files are part of the build
	}
	if h.login, err = template.ParseFS(files, "page/login.html"); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	err = fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		h.static[strings.TrimPrefix(p, "static/")] = staticFile{data: data, ctype: contentType(p), etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return h, nil
}

// contentType returns the Content-Type of an embedded file by its
// extension (not from the system's MIME tables, which vary).
func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return contentHTML
	case ".svg":
		return "image/svg+xml"
	}
	return "text/plain; charset=utf-8"
}

// securityHeaders sets the headers every response carries.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	now := h.now()
	switch p := r.URL.Path; {
	case p == PathRoot || p == PathPage || p == pathPageDir:
		if h.allow(w, r, http.MethodGet) {
			h.servePage(w, r, now)
		}
	case strings.HasPrefix(p, PathStatic):
		if h.allow(w, r, http.MethodGet) {
			h.serveStatic(w, r, strings.TrimPrefix(p, PathStatic))
		}
	case p == PathLogin:
		if h.allow(w, r, http.MethodPost) {
			h.serveLogin(w, r, now)
		}
	case p == PathLogout:
		if h.allow(w, r, http.MethodPost) {
			http.SetCookie(w, clearCookie(r))
			w.Header().Set("Cache-Control", noStore)
			http.Redirect(w, r, PathPage, http.StatusSeeOther)
		}
	case p == PathTop, p == PathTraffic, p == PathRules, p == PathHealth, p == PathSimulate:
		h.serveData(w, r, now)
	case h.opts.Next != nil:
		h.opts.Next.ServeHTTP(w, r)
	default:
		writeError(w, http.StatusNotFound, "", "no such path: "+p)
	}
}

// allow reports whether r's method is method (GET also allows HEAD); if
// not, it answers 405.
func (h *Handler) allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	allow := method
	if method == http.MethodGet {
		allow = "GET, HEAD"
	}
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "", "method "+r.Method+" is not allowed on "+r.URL.Path+"; use "+allow)
	return false
}

// servePage answers the page with a session, else the login form (200).
func (h *Handler) servePage(w http.ResponseWriter, r *http.Request, now time.Time) {
	switch v, retry := h.access(r, now); v {
	case secret.Limited:
		h.writeLimited(w, retry)
		return
	case secret.Accepted:
	default:
		h.writeLogin(w, http.StatusOK, "")
		return
	}
	w.Header().Set("Content-Type", contentHTML)
	w.Header().Set("Cache-Control", noStore)
	_, _ = w.Write(h.page)
}

// writeLogin answers the login form with status and a message.
func (h *Handler) writeLogin(w http.ResponseWriter, status int, msg string) {
	var b bytes.Buffer
	if err := h.login.Execute(&b, struct{ Message string }{msg}); err != nil {
		writeError(w, http.StatusInternalServerError, "", "the login form failed to render")
		return
	}
	w.Header().Set("Content-Type", contentHTML)
	w.Header().Set("Cache-Control", noStore)
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// writeLimited answers an address with no attempt at the token left: 429,
// Retry-After and the login form saying when to try again.
func (h *Handler) writeLimited(w http.ResponseWriter, retry time.Duration) {
	secs := secret.RetrySeconds(retry)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	h.writeLogin(w, http.StatusTooManyRequests, fmt.Sprintf("Too many attempts from this address: try again in %d s.", secs))
}

// serveLogin checks the token of the login form: right, it sets the session
// cookie and sends the browser to the page; wrong, 401 and the form again,
// saying no more.
func (h *Handler) serveLogin(w http.ResponseWriter, r *http.Request, now time.Time) {
	addr := clientKey(r)
	if ok, retry := h.logins.Spend(addr, now); !ok {
		h.failed(true)
		h.log.Warn("dashboard login limited", "client", addr, "retry_after_s", secret.RetrySeconds(retry))
		h.writeLimited(w, retry)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		h.writeLogin(w, http.StatusBadRequest, "The form could not be read.")
		return
	}
	tok := r.PostForm.Get("token")
	if !h.tokenMatches(tok) {
		h.failed(false)
		h.log.Warn("dashboard login failed", "client", addr)
		h.writeLogin(w, http.StatusUnauthorized, "Not accepted.")
		return
	}
	http.SetCookie(w, h.sessions.cookie(r, now, tok))
	w.Header().Set("Cache-Control", noStore)
	http.Redirect(w, r, PathPage, http.StatusSeeOther)
}

// serveStatic answers an embedded file. They carry no data (the same
// files in every build), so they need no session: the login form uses
// the style sheet.
func (h *Handler) serveStatic(w http.ResponseWriter, r *http.Request, name string) {
	f, ok := h.static[name]
	if !ok {
		writeError(w, http.StatusNotFound, "", "no such file: "+r.URL.Path)
		return
	}
	w.Header().Set("Content-Type", f.ctype)
	w.Header().Set("Cache-Control", noCache)
	w.Header().Set("ETag", f.etag)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.data))
}

// serveData answers the JSON endpoints, which need the session cookie or
// the bearer token.
func (h *Handler) serveData(w http.ResponseWriter, r *http.Request, now time.Time) {
	switch v, retry := h.access(r, now); v {
	case secret.Limited:
		secs := secret.RetrySeconds(retry)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		writeError(w, http.StatusTooManyRequests, "", fmt.Sprintf("too many attempts at the token from this address; retry in %d s", secs))
		return
	case secret.Accepted:
	default:
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeError(w, http.StatusUnauthorized, "", "log in on the dashboard, or send Authorization: Bearer TOKEN")
		return
	}
	p := r.URL.Path
	if p == PathSimulate {
		if h.allow(w, r, http.MethodPost) {
			h.simulate(w, r)
		}
		return
	}
	if !h.allow(w, r, http.MethodGet) {
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "", "the query string is not valid")
		return
	}
	switch p {
	case PathTop:
		h.top(w, q, now)
	case PathTraffic:
		h.traffic(w, q, now)
	case PathRules:
		if onlyParams(w, q) {
			h.rules(w, now)
		}
	case PathHealth:
		if onlyParams(w, q) {
			h.health(w, now)
		}
	}
}

// onlyParams reports whether q holds only the parameters allowed; if not,
// it answers 400 naming the first other one (or a repeated one).
func onlyParams(w http.ResponseWriter, q url.Values, allowed ...string) bool {
	for k, vs := range q {
		if !slices.Contains(allowed, k) {
			writeError(w, http.StatusBadRequest, k, k+": is not a parameter here")
			return false
		}
		if len(vs) > 1 {
			writeError(w, http.StatusBadRequest, k, k+": is given more than once")
			return false
		}
	}
	return true
}

// notAvailable answers 404 for a panel without a data source.
func notAvailable(w http.ResponseWriter, what string) {
	writeError(w, http.StatusNotFound, "", what+" is not available here")
}

// writeJSON answers 200 with v as JSON, never cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "", "the answer could not be encoded")
		return
	}
	w.Header().Set("Content-Type", contentJSON)
	w.Header().Set("Cache-Control", noStore)
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError answers status with {"error": msg, "field": field}, the shape
// of every error of the rate limiter's HTTP API.
func writeError(w http.ResponseWriter, status int, field, msg string) {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
		Field string `json:"field"`
	}{msg, field})
	w.Header().Set("Content-Type", contentJSON)
	w.Header().Set("Cache-Control", noStore)
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeFieldError answers 400 for a field error.
func writeFieldError(w http.ResponseWriter, err error) {
	var fe *fieldError
	if errors.As(err, &fe) {
		writeError(w, http.StatusBadRequest, fe.field, fe.Error())
		return
	}
	writeError(w, http.StatusBadRequest, "", err.Error())
}

// readBody reads at most limit bytes of r's body, answering 400 when it is
// longer.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusBadRequest, "", fmt.Sprintf("the body is larger than %d bytes", limit))
		} else {
			writeError(w, http.StatusBadRequest, "", "the body could not be read")
		}
		return nil, false
	}
	return b, true
}
