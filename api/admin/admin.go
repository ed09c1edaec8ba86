package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/internal/httpwire"
	"github.com/ratelimitd/ratelimitd/api/internal/secret"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// Backend is what the admin API needs of the rate limiter.
// The daemon adapts an *actors.System to it. Its methods must be safe
// for concurrent use.
type Backend interface {
	// Reset deletes id's buckets under req's limit and returns how many.
	Reset(ctx context.Context, req table.Request) (int, error)
	// Buckets returns every bucket of id, under every limit.
	Buckets(ctx context.Context, id string) ([]table.Bucket, error)
	// Stats returns a snapshot of the rate limiter's counters.
	Stats() Stats
}

// Options configures NewHandler.
type Options struct {
	// Backend resets and inspects buckets. Required.
	Backend Backend
	// Rules is the rule store the rule endpoints read and change; nil
	// means there are no rules, and those endpoints answer 404.
	Rules *rules.Store
	// Token is the secret every request but GET /healthz must carry as
	// "Authorization: Bearer TOKEN". Required, unless Tokens is set: 1 to
	// 4096 visible ASCII characters (no spaces). Use at least 32 random
	// bytes, encoded.
	Token string
	// Tokens, when not nil, replaces Token: a request may carry any of the
	// tokens it returns, asked at each request, so that they can change
	// while the handler serves (a rotation adds the new token, moves the
	// callers to it, then drops the old one). It must be safe for
	// concurrent use.
	Tokens func() []string
	// OnRulesChanged, if set, is called with the new Set after each
	// successful PUT or DELETE of a rule, before the response is written
	// and in version order (changes through the admin handler are
	// serialized); for example to write the rules back to a file. It must
	// not block for long.
	OnRulesChanged func(*rules.Set)
	// Logger receives rule changes, resets and unexpected backend errors.
	// Nil discards them.
	Logger *slog.Logger
	// Metrics, if set, is served on /metrics (with the token), for a
	// daemon whose public listener serves something else (the proxy).
	Metrics http.Handler
	// Cluster, if set, is the status of the cluster this server is a
	// member of, served as JSON on GET /cluster (with the token); without
	// it /cluster is 404.
	Cluster func() any
	// AuthFailures is how many requests with a wrong token a client
	// address (an IPv4 address, or the /64 of an IPv6 one) may send at
	// once, then per minute; past it, a request of it that carries an
	// Authorization header is answered 429 with Retry-After, its token not
	// compared, until the address has an attempt again, and the lock-out
	// is logged (Warn). Requests with a right token count nothing, and
	// neither do requests without an Authorization header (401). Zero
	// means DefaultAuthFailures; negative, no limit (for callers that share
	// an address behind a proxy or NAT).
	AuthFailures int
	// Now is the clock of the limit of failed tokens; nil means time.Now.
	Now func() time.Time
	// Profiling serves the Go runtime's profiles, with the token: GET
	// /debug/pprof lists them, GET /debug/pprof/profile?seconds=N takes a
	// CPU profile of N seconds (default 30, at most 300), GET
	// /debug/pprof/trace?seconds=N an execution trace (default 1), GET
	// /debug/pprof/NAME (heap, goroutine, allocs, block, mutex,
	// threadcreate) writes one as it stands; all in the formats of
	// net/http/pprof, for go tool pprof and go tool trace. Off, those
	// paths are 404.
	Profiling bool
	// Done, if set, is closed when the server stops (http.Server's
	// RegisterOnShutdown): a CPU profile being taken then ends at once,
	// answered with what it collected, rather than holding the shutdown
	// up for as long as it was asked to run.
	Done <-chan struct{}
	// OnTokenFailure, if set, is told of every request refused for its
	// token: limited false for a wrong one (401), true for one refused
	// without being compared (429; see AuthFailures). A request without
	// an Authorization header is not an attempt: it is not told. It must
	// be safe for concurrent use and quick.
	OnTokenFailure func(limited bool)
}

// DefaultAuthFailures is Options.AuthFailures's default.
const DefaultAuthFailures = 10

// maxAuthClients bounds the client addresses the limit of failed tokens
// remembers (secret.Limiter).
const maxAuthClients = 4096

// Admin route paths.
const (
	pathRules   = "/rules"
	pathReset   = "/reset"
	pathBuckets = "/buckets"
	pathStats   = "/stats"
	pathHealthz = "/healthz"
	pathMetrics = "/metrics"
	pathCluster = "/cluster"
)

// maxRuleBytes is the largest PUT /rules/{name} body accepted.
const maxRuleBytes = 64 << 10

// admin serves the routes of NewHandler.
type admin struct {
	httpwire.Responder
	backend Backend
	rules   *rules.Store
	tokens  func() []string // Options.Tokens, or Options.Token alone
	changed func(*rules.Set)
	log     *slog.Logger
	metrics http.Handler // nil: no /metrics here
	cluster func() any   // nil: no /cluster here
	// profiling: the runtime's profiles are served (Options.Profiling).
	profiling bool
	done      <-chan struct{} // Options.Done; nil: never
	tracing   atomic.Bool     // an execution trace is being taken here
	// failures limits the requests with a wrong token per client address;
	// nil: no limit.
	failures *secret.Limiter
	now      func() time.Time
	failed   func(limited bool) // Options.OnTokenFailure, or a no-op
	mux      *http.ServeMux
	mu       sync.Mutex // serializes rule changes, so OnRulesChanged sees them in order
}

// NewHandler returns the HTTP handler of the admin API, to be served on a
// listener of its own, never on the public one (README.md lists its
// endpoints). Every request but GET /healthz must carry the token; one that
// does not is answered 401 with WWW-Authenticate: Bearer, before its path
// is even looked at. The error, which matches api.ErrInvalidOption, names
// the option at fault. The handler is safe for concurrent use.
func NewHandler(opts Options) (http.Handler, error) {
	if opts.Backend == nil {
		return nil, fmt.Errorf("%w: Backend is nil", api.ErrInvalidOption)
	}
	tokens, err := secret.TokenSource(opts.Token, opts.Tokens, api.ErrInvalidOption)
	if err != nil {
		return nil, err
	}
	a := &admin{
		Responder: httpwire.Responder{DenyStatus: http.StatusRequestEntityTooLarge},
		backend:   opts.Backend,
		rules:     opts.Rules,
		tokens:    tokens,
		changed:   opts.OnRulesChanged,
		log:       opts.Logger,
		metrics:   opts.Metrics,
		cluster:   opts.Cluster,
		profiling: opts.Profiling,
		done:      opts.Done,
		now:       opts.Now,
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.failed = opts.OnTokenFailure; a.failed == nil {
		a.failed = func(bool) {}
	}
	if n := opts.AuthFailures; n >= 0 {
		if n == 0 {
			n = DefaultAuthFailures
		}
		a.failures = secret.NewLimiter(int64(n), maxAuthClients)
	}
	a.mux = a.routes()
	return a, nil
}

// authorized reports whether r carries exactly one Authorization header
// with the Bearer scheme (any case) and a token. It is compared through
// its SHA-256 digest in constant time (secret.In), so neither its bytes
// nor its length leak through timing.
func (a *admin) authorized(r *http.Request) bool {
	vals := r.Header.Values(hdrAuthorization)
	if len(vals) != 1 {
		return false
	}
	scheme, cred, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return secret.In([]byte(strings.TrimLeft(cred, " ")), a.tokens())
}

// routes returns the mux of the admin API. Every route answers its other
// methods 405 with Allow, and an unknown path is 404, in JSON: the mux's
// own plain-text answers are never reached.
func (a *admin) routes() *http.ServeMux {
	mux := http.NewServeMux()
	a.route(mux, pathHealthz, false, nil,
		endpoint{http.MethodGet, func(w http.ResponseWriter, _ *http.Request) { httpwire.WriteHealthz(w) }},
		endpoint{http.MethodHead, func(w http.ResponseWriter, _ *http.Request) { httpwire.WriteHealthz(w) }})
	a.route(mux, pathRules, true, nil, endpoint{http.MethodGet, a.listRules})
	a.route(mux, pathRules+"/{name}", true, a.withRules,
		endpoint{http.MethodGet, a.getRule},
		endpoint{http.MethodPut, a.putRule},
		endpoint{http.MethodDelete, a.deleteRule})
	a.route(mux, pathReset, true, nil, endpoint{http.MethodPost, a.reset})
	a.route(mux, pathBuckets, true, nil, endpoint{http.MethodGet, a.buckets})
	a.route(mux, pathStats, true, nil, endpoint{http.MethodGet, a.stats})
	if a.metrics != nil {
		mux.Handle(pathMetrics, a.withToken(a.metrics.ServeHTTP)) // every method: promhttp's business
	}
	if a.cluster != nil {
		a.route(mux, pathCluster, true, nil, endpoint{http.MethodGet, func(w http.ResponseWriter, _ *http.Request) {
			a.writeJSON(w, http.StatusOK, a.cluster())
		}})
	}
	if a.profiling {
		a.route(mux, pathProfiles, true, nil, endpoint{http.MethodGet, a.profiles})
		a.route(mux, pathProfile, true, nil, endpoint{http.MethodGet, a.profile})
	}
	mux.Handle("/", a.withToken(a.NotFound))
	return mux
}

// endpoint is the handler of one method of a route.
type endpoint struct {
	method string
	h      http.HandlerFunc
}

// route serves the endpoints of path on mux, behind the token when
// private and behind guard when it is set, and answers the path's other
// methods 405 naming them. A GET pattern also matches HEAD: a route
// without a HEAD endpoint refuses it explicitly.
func (a *admin) route(mux *http.ServeMux, path string, private bool, guard func(http.HandlerFunc) http.HandlerFunc, eps ...endpoint) {
	wrap := func(h http.HandlerFunc) http.Handler {
		if guard != nil {
			h = guard(h)
		}
		if private {
			return a.withToken(h)
		}
		return h
	}
	methods := make([]string, len(eps))
	for i, ep := range eps {
		methods[i] = ep.method
		mux.Handle(ep.method+" "+path, wrap(ep.h))
	}
	allow := strings.Join(methods, ", ")
	notAllowed := wrap(func(w http.ResponseWriter, r *http.Request) { a.MethodNotAllowed(w, r, allow) })
	mux.Handle(path, notAllowed)
	if !slices.Contains(methods, http.MethodHead) {
		mux.Handle(http.MethodHead+" "+path, notAllowed)
	}
}

// hdrAuthorization is the canonical key of the Authorization header.
const hdrAuthorization = "Authorization"

// withToken serves h to requests that carry the token and answers 401 to
// the others, or 429 to a client address that sent a wrong one too often
// (Options.AuthFailures).
func (a *admin) withToken(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header[hdrAuthorization]) == 0 {
			a.unauthorized(w) // nothing to compare, nothing to count
			return
		}
		client := secret.ClientKey(r.RemoteAddr)
		v, retry := a.failures.Attempt(client, a.now(), func() bool { return a.authorized(r) })
		switch v {
		case secret.Accepted:
			h(w, r)
		case secret.Limited:
			a.failed(true)
			secs := secret.RetrySeconds(retry)
			w.Header()[httpwire.HdrRetryAfter] = []string{strconv.FormatInt(secs, 10)}
			a.WriteError(w, http.StatusTooManyRequests, "", fmt.Sprintf("too many requests with a wrong admin token from this address; retry in %d s", secs))
		case secret.LockedOut:
			a.log.Warn("admin: requests with a token refused for a while after too many wrong ones from one address", "client", client, "retry_after_s", secret.RetrySeconds(retry))
			fallthrough
		default:
			a.failed(false)
			a.unauthorized(w)
		}
	}
}

// unauthorized answers 401 to a request without the token.
func (a *admin) unauthorized(w http.ResponseWriter) {
	w.Header()["Www-Authenticate"] = []string{"Bearer"}
	a.WriteError(w, http.StatusUnauthorized, "", "this endpoint needs the admin token: send Authorization: Bearer TOKEN")
}

// withRules serves h when there is a rules store, and answers 404 without.
func (a *admin) withRules(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.rules == nil {
			a.noRules(w)
			return
		}
		h(w, r)
	}
}

// ServeHTTP routes r by its decoded path: the rest of a /rules/ path is
// the rule's name, slashes and dots included, and a path the mux would
// clean by a redirect is a 404 (behind the token) instead.
func (a *admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	routed := *r.URL
	routed.RawPath = ""
	if name, ok := strings.CutPrefix(p, pathRules+"/"); ok && name != "" {
		routed.RawPath = pathRules + "/" + nameSegment(name)
	}
	if esc := routed.EscapedPath(); httpwire.CleanPath(esc) != esc {
		a.withToken(a.NotFound)(w, r)
		return
	}
	r2 := *r
	r2.URL = &routed
	a.mux.ServeHTTP(w, &r2)
}

// nameSegment escapes a rule name as one path segment: its slashes, and
// the dots of a name that is "." or "..", which a path would clean away.
func nameSegment(name string) string {
	seg := url.PathEscape(name)
	if seg == "." || seg == ".." {
		seg = strings.ReplaceAll(seg, ".", "%2E")
	}
	return seg
}

// writeJSON answers status with v as JSON.
func (a *admin) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: every value sent is plain data
		a.log.Error("admin: encoding the answer", "err", err)
		a.WriteError(w, http.StatusInternalServerError, "", "the answer could not be encoded")
		return
	}
	h := w.Header()
	h[httpwire.HdrContentType] = []string{httpwire.CTJSON}
	h[httpwire.HdrCacheControl] = []string{httpwire.NoStore}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// noRules answers 404 for a rule endpoint of a server without rules.
func (a *admin) noRules(w http.ResponseWriter) {
	a.WriteError(w, http.StatusNotFound, "", "rules are not enabled on this server: it was started without a rules store")
}

// rulesAnswer is the body of GET /rules.
type rulesAnswer struct {
	Version uint64       `json:"version"`
	Rules   []rules.Rule `json:"rules"`
}

// ruleAnswer is the body of GET and PUT /rules/{name}.
type ruleAnswer struct {
	Version uint64     `json:"version"`
	Rule    rules.Rule `json:"rule"`
}

// versionAnswer is the body of DELETE /rules/{name}.
type versionAnswer struct {
	Version uint64 `json:"version"`
}

// listRules serves GET /rules.
func (a *admin) listRules(w http.ResponseWriter, _ *http.Request) {
	if a.rules == nil {
		a.noRules(w)
		return
	}
	set := a.rules.Current()
	rs := set.Rules()
	if rs == nil {
		rs = []rules.Rule{}
	}
	a.writeJSON(w, http.StatusOK, rulesAnswer{Version: set.Version(), Rules: rs})
}

// getRule serves GET /rules/{name}.
func (a *admin) getRule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	set := a.rules.Current()
	rule, ok := set.Get(name)
	if !ok {
		a.ruleNotFound(w, name)
		return
	}
	a.writeJSON(w, http.StatusOK, ruleAnswer{Version: set.Version(), Rule: rule})
}

func (a *admin) ruleNotFound(w http.ResponseWriter, name string) {
	a.WriteError(w, http.StatusNotFound, "name", "name: no rule is named "+strconv.Quote(httpwire.EchoName(name)))
}

// putRule serves PUT /rules/{name}.
func (a *admin) putRule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	rule, err := readRule(w, r, name)
	if err != nil {
		a.BadRequest(w, err)
		return
	}
	set, err := a.change(func() (*rules.Set, error) { return a.rules.Put(rule) })
	if err != nil {
		a.BadRequest(w, ruleFieldErr(err))
		return
	}
	rule, _ = set.Get(rule.Name) // in canonical form
	a.log.InfoContext(r.Context(), "admin: rule put", "rule", rule.Name, "version", set.Version())
	a.writeJSON(w, http.StatusOK, ruleAnswer{Version: set.Version(), Rule: rule})
}

// deleteRule serves DELETE /rules/{name}.
func (a *admin) deleteRule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	set, err := a.change(func() (*rules.Set, error) { return a.rules.Delete(name) })
	switch {
	case errors.Is(err, rules.ErrNotFound):
		a.ruleNotFound(w, name)
		return
	case err != nil: // cannot happen: Delete fails only for a missing rule
		a.BadRequest(w, ruleFieldErr(err))
		return
	}
	a.log.InfoContext(r.Context(), "admin: rule deleted", "rule", name, "version", set.Version())
	a.writeJSON(w, http.StatusOK, versionAnswer{Version: set.Version()})
}

// change makes one change to the rules and, on success, tells
// OnRulesChanged, under a lock so that it hears of changes in order.
func (a *admin) change(f func() (*rules.Set, error)) (*rules.Set, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	set, err := f()
	if err == nil && a.changed != nil {
		a.changed(set)
	}
	return set, err
}

// readRule reads the body of PUT /rules/{name}: one rule in the JSON form
// of rules.Rule, whose "name" may be left out and must otherwise be name.
// The rule must also be one the table can take. Any error is a
// *table.FieldError.
func readRule(w http.ResponseWriter, r *http.Request, name string) (rules.Rule, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRuleBytes))
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			return rules.Rule{}, httpwire.FieldErr("body", "must be at most "+strconv.Itoa(maxRuleBytes)+" bytes")
		}
		return rules.Rule{}, httpwire.BodyErr(err, httpwire.MsgObject)
	}
	members, err := jsonMembers(body)
	if err != nil {
		return rules.Rule{}, err
	}
	if raw, ok := members["name"]; ok && string(raw) != "null" {
		given, err := httpwire.JSONString(raw, "name")
		if err != nil {
			return rules.Rule{}, err
		}
		if given != name {
			return rules.Rule{}, httpwire.FieldErr("name", "must be the name in the path, "+strconv.Quote(httpwire.EchoName(name))+", or be left out")
		}
	} else {
		members["name"], _ = json.Marshal(name)
		if body, err = json.Marshal(members); err != nil { // cannot happen
			return rules.Rule{}, httpwire.FieldErr("body", httpwire.MsgObject)
		}
	}
	var rule rules.Rule
	if err := json.Unmarshal(body, &rule); err != nil {
		return rules.Rule{}, ruleFieldErr(err)
	}
	if err := rule.Policy.Validate(); err != nil {
		return rules.Rule{}, err
	}
	return rule, nil
}

// jsonMembers returns the members of body, which must be one JSON object
// with no member given twice.
func jsonMembers(body []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil, httpwire.BodyErr(err, httpwire.MsgObject)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, httpwire.FieldErr("body", httpwire.MsgObject)
	}
	members := make(map[string]json.RawMessage)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, httpwire.BodyErr(err, httpwire.MsgTruncated)
		}
		key, _ := tok.(string)
		if key == "" {
			return nil, httpwire.FieldErr("body", httpwire.MsgNoMemberName)
		}
		if _, dup := members[key]; dup {
			return nil, httpwire.FieldErr(httpwire.EchoName(key), httpwire.MsgRepeated)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, httpwire.BodyErr(err, httpwire.MsgTruncated)
		}
		members[key] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, httpwire.BodyErr(err, httpwire.MsgTruncated)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, httpwire.BodyErr(err, httpwire.MsgTrailing)
	}
	return members, nil
}

// ruleFieldErr turns an error of package rules into a *table.FieldError
// naming the same field ("body" when none applies).
func ruleFieldErr(err error) error {
	var re *rules.Error
	if !errors.As(err, &re) {
		return httpwire.FieldErr("body", "is not a valid rule: "+err.Error())
	}
	if re.Field == "" {
		return httpwire.FieldErr("body", re.Message)
	}
	return httpwire.FieldErr(re.Field, re.Message)
}

// reset serves POST /reset.
func (a *admin) reset(w http.ResponseWriter, r *http.Request) {
	var one [1]byte
	if n, _ := io.ReadFull(io.LimitReader(r.Body, 1), one[:]); n > 0 {
		a.BadRequest(w, httpwire.FieldErr("body", "must be empty: send the parameters in the query"))
		return
	}
	p, err := httpwire.ParseQuery(r.URL.RawQuery, httpwire.ModeReset)
	if err != nil {
		a.BadRequest(w, err)
		return
	}
	var set *rules.Set
	if a.rules != nil {
		set = a.rules.Current()
	}
	req, rule, err := httpwire.Resolve(&p, set)
	if err != nil {
		a.BadRequest(w, err)
		return
	}
	n, err := a.backend.Reset(r.Context(), req)
	if err != nil {
		httpwire.LogFailure(r.Context(), a.log, "admin reset", a.AnswerCheckError(w, err), err)
		return
	}
	a.log.InfoContext(r.Context(), "admin: reset", "id", req.ID, "rule", rule.Name, "deleted", n)
	a.writeJSON(w, http.StatusOK, struct {
		Deleted int `json:"deleted"`
	}{n})
}

// bucketJSON is one bucket in the body of GET /buckets.
type bucketJSON struct {
	Rule       string `json:"rule"` // "" for an ad-hoc limit
	Algorithm  string `json:"algorithm"`
	ScaleMs    int64  `json:"scale_ms"`
	Limit      int64  `json:"limit"`
	Burst      int64  `json:"burst"`
	Window     int64  `json:"window"`
	Count      int64  `json:"count"`
	Previous   int64  `json:"previous"`
	FullAt     string `json:"full_at,omitempty"`
	CreatedAt  string `json:"created_at"`
	ModifiedAt string `json:"modified_at"`
	Expired    bool   `json:"expired"`
}

// buckets serves GET /buckets.
func (a *admin) buckets(w http.ResponseWriter, r *http.Request) {
	p, err := httpwire.ParseQuery(r.URL.RawQuery, httpwire.ModeBuckets)
	if err != nil {
		a.BadRequest(w, err)
		return
	}
	bs, err := a.backend.Buckets(r.Context(), p.Req.ID)
	if err != nil {
		httpwire.LogFailure(r.Context(), a.log, "admin buckets", a.AnswerCheckError(w, err), err)
		return
	}
	out := make([]bucketJSON, len(bs))
	for i, b := range bs {
		out[i] = bucketJSON{
			Rule:       b.Namespace,
			Algorithm:  b.Algorithm.String(),
			ScaleMs:    b.Scale.Milliseconds(),
			Limit:      b.Limit,
			Burst:      b.Burst,
			Window:     b.Window,
			Count:      b.Count,
			Previous:   b.Previous,
			CreatedAt:  formatTime(b.CreatedAt),
			ModifiedAt: formatTime(b.ModifiedAt),
			Expired:    b.Expired,
		}
		if !b.FullAt.IsZero() {
			out[i].FullAt = formatTime(b.FullAt)
		}
	}
	a.writeJSON(w, http.StatusOK, struct {
		ID      string       `json:"id"`
		Buckets []bucketJSON `json:"buckets"`
	}{p.Req.ID, out})
}

// formatTime formats t in UTC, RFC 3339 with as many fractional digits as
// it needs.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Stats is a snapshot of the rate limiter's counters, the body of GET
// /stats.
type Stats struct {
	Shards         int   `json:"shards"`          // shard owners
	Buckets        int64 `json:"buckets"`         // live buckets in all tables
	Restarts       int64 `json:"restarts"`        // owner restarts after a crash
	TornTails      int64 `json:"torn_tails"`      // torn journal tails cut at recovery
	JournalErrors  int64 `json:"journal_errors"`  // batches the journal failed to take or flush
	FailedClosed   int64 `json:"failed_closed"`   // of those, batches refused
	FailedOpen     int64 `json:"failed_open"`     // of those, batches answered from memory
	Snapshots      int64 `json:"snapshots"`       // journal snapshots written
	SnapshotErrors int64 `json:"snapshot_errors"` // journal snapshots that failed
	Evictions      int64 `json:"evictions"`       // live buckets evicted from a full table
	Rejections     int64 `json:"rejections"`      // checks refused because their table was full
}

// stats serves GET /stats.
func (a *admin) stats(w http.ResponseWriter, _ *http.Request) {
	a.writeJSON(w, http.StatusOK, a.backend.Stats())
}
