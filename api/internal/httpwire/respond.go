package httpwire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// CheckOptions validates what the options of every HTTP transport hold: a
// Checker, and a DenyStatus (see DenyStatusOption), which it returns.
func CheckOptions(c api.Checker, denyStatus int) (int, error) {
	if c == nil {
		return 0, fmt.Errorf("%w: Checker is nil", api.ErrInvalidOption)
	}
	return DenyStatusOption(denyStatus)
}

// DenyStatusOption validates a DenyStatus option; 0 means 413.
func DenyStatusOption(s int) (int, error) {
	switch s {
	case 0:
		return http.StatusRequestEntityTooLarge, nil
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		return s, nil
	}
	return 0, fmt.Errorf("%w: DenyStatus must be 413 or 429, got %d", api.ErrInvalidOption, s)
}

// WriteHealthz answers GET /healthz.
func WriteHealthz(w http.ResponseWriter) {
	hdr := w.Header()
	hdr[HdrContentType] = []string{CTJSON}
	hdr[HdrCacheControl] = []string{NoStore}
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

// IsGetOrHead reports whether r is a GET or a HEAD.
func IsGetOrHead(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead
}

// MethodNotAllowed answers 405, allow listing the methods the path takes.
func (rs *Responder) MethodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header()[HdrAllow] = []string{allow}
	rs.WriteError(w, http.StatusMethodNotAllowed, "", "method "+r.Method+" is not allowed on "+r.URL.Path+"; use "+allow)
}

// NotFound answers 404 for a path no route serves.
func (rs *Responder) NotFound(w http.ResponseWriter, r *http.Request) {
	rs.WriteError(w, http.StatusNotFound, "", "no such path: "+r.URL.Path)
}

// ReadParams reads the parameters of a GET (query) or POST (JSON body)
// request for m. Only modeCheck may return a batch, in the memory of batch
// if it is large enough.
func (rs *Responder) ReadParams(w http.ResponseWriter, r *http.Request, m Mode, batch []Params) (Body, error) {
	if r.Method == http.MethodGet {
		p, err := ParseQuery(r.URL.RawQuery, m)
		return Body{One: p}, err
	}
	if r.URL.RawQuery != "" {
		return Body{}, FieldErr("query", msgQueryPost)
	}
	return rs.readJSON(w, r, m, batch)
}

// BadRequest answers 400 for an error that matches table.ErrInvalid,
// naming the field of a batch element (a *table.IndexError) as
// "checks[I].FIELD".
func (rs *Responder) BadRequest(w http.ResponseWriter, err error) {
	var ie *table.IndexError
	var fe *table.FieldError
	switch {
	case errors.As(err, &ie) && errors.As(ie.Err, &fe):
		field := ie.Field(fe.Field)
		rs.WriteError(w, http.StatusBadRequest, field, field+": "+fe.Message)
		return
	case errors.As(err, &fe):
		rs.writeFieldError(w, fe)
		return
	}
	rs.WriteError(w, http.StatusBadRequest, "", err.Error())
}

// LogFailure logs a Checker error of op that was answered as res, unless
// it is a 400 or an expected, passing condition (the client went away or
// timed out, or the limiter is stopping).
func LogFailure(ctx context.Context, log *slog.Logger, op string, res api.Result, err error) {
	if res != api.ResultError {
		return
	}
	switch api.Classify(err) {
	case api.ClassCanceled, api.ClassStopped:
	case api.ClassUnavailable:
		log.WarnContext(ctx, op+": shard owner unavailable", "err", err)
	default:
		log.ErrorContext(ctx, op+": rate limiter failed", "err", err)
	}
}

// Messages of the 503 of a Checker error, by class.
var classMsg = [...]string{
	api.ClassFailed:      "the rate limiter failed; retry",
	api.ClassCanceled:    "the check was canceled or timed out; retry",
	api.ClassStopped:     "the rate limiter is shutting down; retry",
	api.ClassUnavailable: "the rate limiter is temporarily unavailable; retry",
}

// AnswerCheckError writes the response for a Checker error, 400 for bad
// input and 503 for anything else, and returns the result to record.
func (rs *Responder) AnswerCheckError(w http.ResponseWriter, err error) api.Result {
	c := api.Classify(err)
	if c == api.ClassInvalid {
		rs.BadRequest(w, err)
		return api.ResultInvalid
	}
	rs.WriteError(w, http.StatusServiceUnavailable, "", classMsg[c])
	return api.ResultError
}

// CleanPath returns the canonical form of an URL path, as http.ServeMux
// computes it: rooted, without "." and ".." elements or repeated slashes,
// keeping a trailing slash. A path already clean is returned as is,
// without allocating.
func CleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		if len(p) == len(np)+1 && strings.HasPrefix(p, np) {
			return p
		}
		return np + "/"
	}
	return np
}

// KeyFuncs returns key and user, the functions a transport keys requests
// by, with their defaults: RemoteHost, and BasicUser.
func KeyFuncs(key, user func(*http.Request) string) (func(*http.Request) string, func(*http.Request) string) {
	if key == nil {
		key = RemoteHost
	}
	if user == nil {
		user = BasicUser
	}
	return key, user
}

// RemoteHost is the default key: the host part of r.RemoteAddr.
func RemoteHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// BasicUser is the default UserFunc: the HTTP Basic user name, or "".
func BasicUser(r *http.Request) string {
	u, _, _ := r.BasicAuth()
	return u
}

// RuleID returns the id request r spends under rule: what the rule's Key
// names (a header, a query parameter, the user), or the client's key when
// the rule keys by address, or when the request lacks a usable value for
// the rule's key (it has none, or one over table.MaxIDLen bytes or not
// valid UTF-8): the client then spends its own budget rather than none.
func RuleID(r *http.Request, rule *rules.Rule, clientKey, user func(*http.Request) string) string {
	var id string
	switch {
	case rule.Key == "" || rule.Key == rules.KeyIP:
	case rule.Key == rules.KeyUser:
		id = user(r)
	case strings.HasPrefix(rule.Key, rules.KeyHeader):
		id = r.Header.Get(rule.Key[len(rules.KeyHeader):])
	case strings.HasPrefix(rule.Key, rules.KeyQuery):
		id = r.URL.Query().Get(rule.Key[len(rules.KeyQuery):])
	}
	if id == "" || len(id) > table.MaxIDLen || !utf8.ValidString(id) {
		id = clientKey(r)
	}
	return id
}
