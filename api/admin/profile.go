package admin

import (
	"bytes"
	"net/http"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/api/internal/httpwire"
)

// The Go runtime's profiles and execution traces (Options.Profiling), in
// the formats `go tool pprof` and `go tool trace` read. They are written
// by runtime/pprof and runtime/trace here rather than served by
// net/http/pprof, whose import registers its handlers on
// http.DefaultServeMux in every program that links it: a program that
// embeds this package and serves the default mux somewhere public would
// publish them without knowing.

// Profile route paths: the list, and one profile by name ("profile" is
// the CPU's and "trace" the execution trace, as for net/http/pprof and go
// tool pprof and trace).
const (
	pathProfiles = "/debug/pprof"
	pathProfile  = pathProfiles + "/{name}"
	cpuProfile   = "profile"
	execTrace    = "trace"
)

// The length of a CPU profile or an execution trace, in whole seconds
// (query parameter seconds): a trace is a few megabytes a second of a
// busy server, so its default is short.
const (
	defaultCPUSeconds   = 30
	defaultTraceSeconds = 1
	maxSeconds          = 300
)

// Query parameter rules, named in 400 answers.
const (
	ruleSeconds = "must be a whole number of seconds from 1 to 300"
	ruleDebug   = "must be 0 (gzipped protocol buffer, for go tool pprof), 1 or 2 (text)"
	ruleGC      = "must be 0 or 1"
)

// writeSlack is how much longer than the profile itself the answer of a
// CPU profile or a trace may take to be written: the server's write
// timeout would cut most of them off otherwise.
const writeSlack = 10 * time.Second

// profileList is the body of GET /debug/pprof.
type profileList struct {
	Profiles []profileEntry `json:"profiles"`
}

type profileEntry struct {
	Name string `json:"name"`
	// Count is how many entries the profile holds now (goroutines,
	// threads, allocation sites...); absent for the CPU profile and the
	// trace, which are taken on request.
	Count *int   `json:"count,omitempty"`
	Path  string `json:"path"`
}

// profiles lists the profiles GET /debug/pprof/{name} serves.
func (a *admin) profiles(w http.ResponseWriter, _ *http.Request) {
	ps := pprof.Profiles()
	slices.SortFunc(ps, func(x, y *pprof.Profile) int { return strings.Compare(x.Name(), y.Name()) })
	list := profileList{Profiles: []profileEntry{
		{Name: cpuProfile, Path: pathProfiles + "/" + cpuProfile + "?seconds=" + strconv.Itoa(defaultCPUSeconds)},
		{Name: execTrace, Path: pathProfiles + "/" + execTrace + "?seconds=" + strconv.Itoa(defaultTraceSeconds)},
	}}
	for _, p := range ps {
		n := p.Count()
		list.Profiles = append(list.Profiles, profileEntry{Name: p.Name(), Count: &n, Path: pathProfiles + "/" + p.Name()})
	}
	a.writeJSON(w, http.StatusOK, list)
}

// profile serves one profile: the CPU's, taken for ?seconds=N from now,
// or a runtime profile (heap, goroutine, allocs, block, mutex,
// threadcreate...) as it stands, ?debug=1 or 2 for text, ?gc=1 to collect
// garbage before a heap profile.
func (a *admin) profile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	switch name {
	case cpuProfile:
		a.cpuProfile(w, r)
		return
	case execTrace:
		a.execTrace(w, r)
		return
	}
	p := pprof.Lookup(name)
	if p == nil {
		a.WriteError(w, http.StatusNotFound, "", "no profile "+strconv.Quote(name)+": GET "+pathProfiles+" lists them")
		return
	}
	q := r.URL.Query()
	debug, ok := queryInt(q.Get("debug"), 0, 0, 2)
	if !ok {
		a.WriteError(w, http.StatusBadRequest, "debug", ruleDebug)
		return
	}
	gc, ok := queryInt(q.Get("gc"), 0, 0, 1)
	if !ok {
		a.WriteError(w, http.StatusBadRequest, "gc", ruleGC)
		return
	}
	if gc == 1 && name == "heap" {
		runtime.GC()
	}
	var b bytes.Buffer
	if err := p.WriteTo(&b, debug); err != nil {
		a.log.Error("admin: writing a profile", "profile", name, "err", err)
		a.WriteError(w, http.StatusInternalServerError, "", "the profile could not be written")
		return
	}
	writeProfile(w, name, debug, b.Bytes())
}

// cpuProfile takes a CPU profile for ?seconds=N (default 30) and answers
// it; the request's end (the client gone) ends it early, unanswered, and
// the server's (Options.Done) answered with what it holds. One at a
// time: the runtime has one CPU profiler.
func (a *admin) cpuProfile(w http.ResponseWriter, r *http.Request) {
	d, ok := a.duration(w, r, defaultCPUSeconds)
	if !ok {
		return
	}
	var b bytes.Buffer
	if err := pprof.StartCPUProfile(&b); err != nil {
		a.WriteError(w, http.StatusConflict, "", "a CPU profile is being taken already; ask again when it ends")
		return
	}
	if !a.wait(r, d) {
		pprof.StopCPUProfile()
		return // nobody to answer
	}
	pprof.StopCPUProfile()
	writeProfile(w, cpuProfile, 0, b.Bytes())
}

// execTrace records an execution trace (runtime/trace, for go tool
// trace) for ?seconds=N (default 1), written to the client as it is
// recorded, since a long one is large; it ends like a CPU profile. One at
// a time: the runtime has one tracer.
func (a *admin) execTrace(w http.ResponseWriter, r *http.Request) {
	d, ok := a.duration(w, r, defaultTraceSeconds)
	if !ok {
		return
	}
	// Another request's trace, or the program's own (checked before the
	// status is sent: trace.Start's error comes after it).
	busy := !a.tracing.CompareAndSwap(false, true)
	if !busy {
		defer a.tracing.Store(false)
		busy = trace.IsEnabled()
	}
	if busy {
		a.WriteError(w, http.StatusConflict, "", "an execution trace is being taken already; ask again when it ends")
		return
	}
	setProfileHeaders(w.Header(), execTrace+".out", 0)
	w.WriteHeader(http.StatusOK)
	if err := trace.Start(w); err != nil {
		// Taken in between by the program itself: the status is sent, the
		// answer ends empty.
		a.log.Warn("admin: starting an execution trace", "err", err)
		return
	}
	a.wait(r, d)
	trace.Stop() // waits for the last of the trace to be written
}

// duration reads the length of a CPU profile or a trace (?seconds=N,
// default def) and moves the write deadline past it, or answers 400.
func (a *admin) duration(w http.ResponseWriter, r *http.Request, def int) (time.Duration, bool) {
	secs, ok := queryInt(r.URL.Query().Get("seconds"), def, 1, maxSeconds)
	if !ok {
		a.WriteError(w, http.StatusBadRequest, "seconds", ruleSeconds)
		return 0, false
	}
	d := time.Duration(secs) * time.Second
	// The server's write timeout runs from the request's start; a profile
	// needs it to run from its own end. An error: the writer cannot move
	// its deadline (a test's recorder), and none is in the way.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d + writeSlack))
	return d, true
}

// wait waits d, or until the server stops (Options.Done): true; or until
// the request ends, the client gone: false.
func (a *admin) wait(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-a.done: // a nil channel: never
	case <-r.Context().Done():
		return false
	}
	return true
}

// writeProfile answers 200 with a profile: a file to save for debug 0,
// text otherwise.
func writeProfile(w http.ResponseWriter, name string, debug int, b []byte) {
	setProfileHeaders(w.Header(), name+".pb.gz", debug)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// setProfileHeaders sets the headers of a profile's answer: a file to
// save, named file, for debug 0; text otherwise.
func setProfileHeaders(h http.Header, file string, debug int) {
	h[httpwire.HdrCacheControl] = []string{httpwire.NoStore}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	if debug == 0 {
		h[httpwire.HdrContentType] = []string{"application/octet-stream"}
		h["Content-Disposition"] = []string{`attachment; filename="` + file + `"`}
	} else {
		h[httpwire.HdrContentType] = []string{"text/plain; charset=utf-8"}
	}
}

// queryInt parses the value of a query parameter: def when it is absent,
// else a decimal integer from lo to hi.
func queryInt(s string, def, lo, hi int) (int, bool) {
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, false
	}
	return n, true
}
