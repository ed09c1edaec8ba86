package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/proc"
)

// serveEnv makes the test binary serve the bare handler (see TestMain).
const serveEnv = "LOAD_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "bare" {
		serveBare()
		return
	}
	os.Exit(m.Run())
}

// bareBody is serve.Bare's answer.
const bareBody = `{"allowed":true,"id":"user-0","count":1,"limit":1000000000000,"remaining":999999999999,"reset_ms":1000,"retry_after_ms":0}`

// serveBare serves bareBody on a loopback port, logging the line
// proc.Start waits for, until it is killed.
func serveBare() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "level=INFO msg=listening addr=%s\n", ln.Addr())
	err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Content-Type"] = []string{"application/json"}
		_, _ = io.WriteString(w, bareBody)
	}))
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// countingServer is a net/http test server counting the connections it
// accepted.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// runRounds runs rounds rounds of d against t over conns connections,
// closing the client after.
func runRounds(t *testing.T, tg *Target, conns, rounds int, d time.Duration) *Result {
	t.Helper()
	c, err := NewClient(tg, conns)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := &Result{}
	for range rounds {
		Run(context.Background(), c, d, r, true)
	}
	return r
}

func TestCompare(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	get := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.RequestURI()]++
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	defer get.Close()
	post := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || !strings.HasPrefix(string(b), "body") || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer post.Close()
	cpuCalls := 0
	targets := []*Target{
		{Name: "get", Base: get.URL, Method: http.MethodGet, Paths: []string{"/a", "/b"}, ChecksPerRequest: 1,
			CPU: func() (float64, error) { cpuCalls++; return float64(cpuCalls), nil }},
		{Name: "post", Base: post.URL, Method: http.MethodPost, Paths: []string{"/p"}, Bodies: [][]byte{[]byte("body1"), []byte("body2")}, ChecksPerRequest: 10},
		{Name: "invalid", Base: "http://example.com", Method: http.MethodGet, Paths: []string{"/"}},
	}
	res := Compare(context.Background(), Plan{Conns: 4, Rounds: 2, PerRound: 50 * time.Millisecond, Warmup: 10 * time.Millisecond}, targets)
	for i, r := range res[:2] {
		if r.Err != nil {
			t.Fatalf("target %d: %v", i, r.Err)
		}
		if r.Requests == 0 || int64(len(r.Lat)) != r.Requests {
			t.Errorf("target %d: %d requests, %d latencies", i, r.Requests, len(r.Lat))
		}
		// Each round runs until its end: the rounds' lengths add up.
		if r.Elapsed < 100*time.Millisecond {
			t.Errorf("target %d: elapsed %v, want at least 2 × 50ms", i, r.Elapsed)
		}
		if !slices.IsSorted(r.Lat) {
			t.Errorf("target %d: latencies not sorted", i)
		}
	}
	if err := res[2].Err; err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("invalid target: Err = %v, want not a loopback address", err)
	}
	// CPU is read before and after each of 3 runs (warm-up included), each
	// read one more than the last: 1 per measured round.
	if got := res[0].ServerCPU; got != 2 {
		t.Errorf("server CPU = %v, want 2 (1 per round)", got)
	}
	if seen["/a"] == 0 || seen["/b"] == 0 {
		t.Errorf("paths requested: %v, want both", seen)
	}
}

// TestContentLength: answers framed by Content-Length, over kept-alive
// connections, every request counted, the body kept or discarded.
func TestContentLength(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			var mu sync.Mutex
			seen := map[string]int64{}
			srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen[r.URL.RequestURI()]++
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, bareBody)
			})
			tg := &Target{Name: "cl", Base: srv.URL, Method: http.MethodGet, Paths: []string{"/a?x=1", "/b", "/c"}}
			if keep {
				tg.OK = func(status int, body []byte) bool { return status == 200 && string(body) == bareBody }
			}
			r := runRounds(t, tg, 2, 2, 50*time.Millisecond)
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			var total int64
			for _, n := range seen {
				total += n
			}
			if r.Requests == 0 || total != r.Requests || int64(len(r.Lat)) != r.Requests {
				t.Errorf("client %d requests, %d latencies; server received %d", r.Requests, len(r.Lat), total)
			}
			if len(seen) != 3 || seen["/a?x=1"] == 0 {
				t.Errorf("paths requested: %v, want the 3", seen)
			}
			if got := conns.Load(); got != 2 {
				t.Errorf("%d connections over 2 rounds, want 2 (kept alive)", got)
			}
		})
	}
}

// TestChunked: chunked answers (with a trailer), assembled exactly or
// discarded, and the connection kept.
func TestChunked(t *testing.T) {
	parts := []string{"first,", strings.Repeat("x", 3*readBuf+7), ",last"}
	want := strings.Join(parts, "")
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			var requests atomic.Int64
			srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				w.Header().Set("Trailer", "X-Sum")
				for _, p := range parts {
					_, _ = io.WriteString(w, p)
					w.(http.Flusher).Flush()
				}
				w.Header().Set("X-Sum", "1")
			})
			tg := &Target{Name: "chunked", Base: srv.URL, Method: http.MethodGet, Paths: []string{"/"}}
			var bad atomic.Value
			if keep {
				tg.OK = func(status int, body []byte) bool {
					if string(body) != want {
						bad.Store(fmt.Sprintf("%d bytes: %.40q…", len(body), body))
						return false
					}
					return status == 200
				}
			}
			r := runRounds(t, tg, 2, 2, 50*time.Millisecond)
			if r.Err != nil {
				t.Fatalf("%v (body %v)", r.Err, bad.Load())
			}
			if r.Requests == 0 || requests.Load() != r.Requests {
				t.Errorf("client %d requests, server received %d", r.Requests, requests.Load())
			}
			if got := conns.Load(); got != 2 {
				t.Errorf("%d connections, want 2 (kept alive)", got)
			}
		})
	}
}

// TestLongBody: Target.OK sees the first MiB of a longer body, the rest
// is read and discarded, and the connection carries the next request.
func TestLongBody(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			var requests atomic.Int64
			srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				if !chunked {
					w.Header().Set("Content-Length", strconv.Itoa(maxBody+100))
				}
				_, _ = io.WriteString(w, strings.Repeat("a", maxBody-50))
				w.(http.Flusher).Flush()
				_, _ = io.WriteString(w, strings.Repeat("b", 150))
			})
			want := strings.Repeat("a", maxBody-50) + strings.Repeat("b", 50)
			c, err := NewClient(&Target{Name: "long", Base: srv.URL, Method: http.MethodGet, Paths: []string{"/"},
				OK: func(status int, body []byte) bool { return status == 200 && string(body) == want }}, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for i := range 3 {
				if err := c.do(context.Background(), &c.conns[0], i, time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			if requests.Load() != 3 || conns.Load() != 1 {
				t.Errorf("server received %d requests over %d connections, want 3 over 1", requests.Load(), conns.Load())
			}
		})
	}
}

// TestConnectionClose: a server closing each connection after its answer
// gets one connection per request.
func TestConnectionClose(t *testing.T) {
	var requests atomic.Int64
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "ok")
	})
	r := runRounds(t, &Target{Name: "close", Base: srv.URL, Method: http.MethodGet, Paths: []string{"/"}}, 2, 2, 50*time.Millisecond)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.Requests == 0 || requests.Load() != r.Requests || conns.Load() != r.Requests {
		t.Errorf("client %d requests; server received %d over %d connections", r.Requests, requests.Load(), conns.Load())
	}
}

// TestPost: the server sees exactly the method, path, headers and bodies,
// each body in turn.
func TestPost(t *testing.T) {
	bodies := [][]byte{[]byte(`{"n":1}`), []byte(`[` + strings.Repeat(`{"id":"user-1"},`, 500) + `{}]`)}
	var counts [2]atomic.Int64
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		i := slices.IndexFunc(bodies, func(x []byte) bool { return string(x) == string(b) })
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range r.Header {
				if !yield(k) {
					return
				}
			}
		})
		host := r.Context().Value(http.LocalAddrContextKey).(net.Addr).String()
		switch {
		case err != nil, i < 0, r.Method != http.MethodPost, r.RequestURI != "/check_rate", r.Proto != "HTTP/1.1", r.Host != host,
			!slices.Equal(keys, []string{"Content-Length", "Content-Type"}),
			r.Header.Get("Content-Type") != "application/json", r.Header.Get("Content-Length") != strconv.Itoa(len(b)):
			t.Errorf("unexpected request: %s %s %s host %q headers %v, %d bytes (%v)", r.Method, r.RequestURI, r.Proto, r.Host, r.Header, len(b), err)
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		counts[i].Add(1)
		_, _ = io.WriteString(w, "ok")
	})
	r := runRounds(t, &Target{Name: "post", Base: srv.URL, Method: http.MethodPost, Paths: []string{"/check_rate"}, Bodies: bodies}, 1, 1, 100*time.Millisecond)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	// One goroutine sends bodies 0, 1, 0, 1, …
	n := r.Requests
	if n < 2 || counts[0].Load() != (n+1)/2 || counts[1].Load() != n/2 {
		t.Errorf("client %d requests; server received %d of body 0 and %d of body 1", n, counts[0].Load(), counts[1].Load())
	}
}

func TestRunStopsOnFailure(t *testing.T) {
	var requests atomic.Int64
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "nope", http.StatusInternalServerError)
	})
	r := runRounds(t, &Target{Name: "failing", Base: srv.URL, Method: http.MethodGet, Paths: []string{"/x"}}, 2, 1, time.Minute)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "failing: GET "+srv.URL+"/x: status 500") {
		t.Errorf("Err = %v, want a 500", r.Err)
	}
	if requests.Load() == 0 || r.Requests != 0 {
		t.Errorf("server received %d, client counted %d, want > 0 and 0", requests.Load(), r.Requests)
	}
	// A target with OK sees the body, and its verdict counts.
	ok, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"error":"x"}`) })
	r = runRounds(t, &Target{Name: "body", Base: ok.URL, Method: http.MethodGet, Paths: []string{"/"},
		OK: func(status int, body []byte) bool { return !strings.Contains(string(body), "error") }}, 1, 1, time.Minute)
	if r.Err == nil || !strings.Contains(r.Err.Error(), `status 200, body {"error":"x"}`) {
		t.Errorf("Err = %v, want the body", r.Err)
	}
	// A round is not run once the target has failed.
	c, err := NewClient(&Target{Name: "body", Base: ok.URL, Method: http.MethodGet, Paths: []string{"/"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := r.Err
	Run(context.Background(), c, time.Minute, r, true)
	if r.Err != before || r.Requests != 0 {
		t.Errorf("a failed result was run again: %v, %d requests", r.Err, r.Requests)
	}
	// Nor once ctx has ended.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r = &Result{}
	Run(ctx, c, time.Minute, r, true)
	if !errors.Is(r.Err, context.Canceled) {
		t.Errorf("Err = %v after ctx ended, want context.Canceled", r.Err)
	}
}

// rawServer answers each request it reads on a TCP connection with fixed
// bytes.
type rawServer struct {
	ln       net.Listener
	requests atomic.Int64
	conns    atomic.Int64
	first    chan []byte // the first request's bytes

	mu   sync.Mutex
	open []net.Conn
	wg   sync.WaitGroup
}

// newRawServer answers each request with answer, then closes the
// connection if closeAfter. An empty answer is none.
func newRawServer(t *testing.T, answer string, closeAfter bool) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, first: make(chan []byte, 1)}
	s.wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.mu.Lock()
			s.open = append(s.open, nc)
			s.mu.Unlock()
			s.wg.Go(func() {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for {
					req, err := readRequest(br)
					if err != nil {
						return
					}
					if s.requests.Add(1) == 1 {
						s.first <- req
					}
					if _, err := io.WriteString(nc, answer); err != nil || closeAfter {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for _, nc := range s.open {
			_ = nc.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) base() string { return "http://" + s.ln.Addr().String() }

// readRequest reads one request's head and its Content-Length body.
func readRequest(br *bufio.Reader) ([]byte, error) {
	var raw []byte
	length := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		raw = append(raw, line...)
		if line == "\r\n" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			if length, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
				return nil, err
			}
		}
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, err
	}
	return append(raw, body...), nil
}

// TestRequestBytes: the requests are exactly these bytes.
func TestRequestBytes(t *testing.T) {
	for _, tc := range []struct {
		tg   Target
		want string
	}{
		{Target{Method: http.MethodGet, Paths: []string{"/check_rate?id=user-7&scale=1000&limit=5"}},
			"GET /check_rate?id=user-7&scale=1000&limit=5 HTTP/1.1\r\nHost: HOST\r\n\r\n"},
		{Target{Method: http.MethodPost, Paths: []string{"/v1/GetRateLimits"}, Bodies: [][]byte{[]byte(`{"a":1}`)}},
			"POST /v1/GetRateLimits HTTP/1.1\r\nHost: HOST\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}"},
	} {
		s := newRawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false)
		tg := tc.tg
		tg.Name, tg.Base = tg.Method, s.base()
		c, err := NewClient(&tg, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.do(context.Background(), &c.conns[0], 0, time.Now()); err != nil {
			t.Fatal(err)
		}
		want := strings.Replace(tc.want, "HOST", s.ln.Addr().String(), 1)
		if got := string(<-s.first); got != want {
			t.Errorf("%s: sent %q, want %q", tg.Method, got, want)
		}
	}
}

// TestRawAnswers: answers net/http's server does not give, well formed
// (counted exactly) or not (an error, without waiting for the timeout).
func TestRawAnswers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		answer     string
		closeAfter bool
		body       string // the body, for a well-formed answer
		needsOK    bool   // a success only by Target.OK (not a 200)
		perRequest bool   // one connection per request
		err        string // a well-formed answer if empty; else alternatives separated by |
	}{
		{name: "content-length", answer: "HTTP/1.1 200 OK\r\ncontent-LENGTH:  2 \r\n\r\nok", body: "ok"},
		{name: "chunked with extensions and trailers",
			answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\nA;ext=1\r\n0123456789\r\n1f \r\n" + strings.Repeat("z", 31) + "\r\n0\r\nX-Trailer: y\r\n\r\n",
			body:   "0123456789" + strings.Repeat("z", 31)},
		{name: "bare LF", answer: "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", body: "ok"},
		{name: "no content", answer: "HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", body: "", needsOK: true},
		{name: "HTTP/1.0 keep-alive", answer: "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok", body: "ok"},
		{name: "HTTP/1.0 body to the close", answer: "HTTP/1.0 200 OK\r\n\r\n" + strings.Repeat("y", 2*readBuf), closeAfter: true, body: strings.Repeat("y", 2*readBuf), perRequest: true},
		// These two servers keep the connection open: the client must not
		// send another request on it.
		{name: "connection close among tokens", answer: "HTTP/1.1 200 OK\r\nConnection: foo, close\r\nContent-Length: 2\r\n\r\nok", body: "ok", perRequest: true},
		{name: "HTTP/1.0 without keep-alive", answer: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", body: "ok", perRequest: true},
		{name: "closed when idle, unannounced", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", closeAfter: true, body: "ok", perRequest: true},

		{name: "bad status code", answer: "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", err: "malformed status line"},
		{name: "not HTTP", answer: "SSH-2.0-OpenSSH_9.2\r\n", err: "malformed status line"},
		{name: "HTTP/2 status line", answer: "HTTP/2 200 OK\r\n\r\n", err: "malformed status line"},
		{name: "interim answer", answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", err: "unexpected interim answer"},
		{name: "header without colon", answer: "HTTP/1.1 200 OK\r\nContent-Length 2\r\n\r\nok", err: "malformed header line"},
		{name: "folded header", answer: "HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 2\r\n\r\nok", err: "malformed header line"},
		{name: "header too long", answer: "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", readBuf) + "\r\nContent-Length: 2\r\n\r\nok", err: "buffer full"},
		{name: "bad content-length", answer: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", err: "bad Content-Length"},
		{name: "two content-lengths", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", err: "bad Content-Length"},
		{name: "chunked and content-length", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n", err: "both Transfer-Encoding and Content-Length"},
		{name: "gzip", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", err: "unsupported"},
		{name: "bad chunk size", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", err: "malformed chunk size"},
		{name: "chunk longer than its size", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n0\r\n\r\n", err: "chunk longer than its size"},
		{name: "bad trailer", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nnot a trailer\r\n\r\n", err: "malformed trailer line"},
		{name: "bytes after the answer", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA", err: "unexpected bytes after the last answer|malformed status line"},
		{name: "short body", answer: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", closeAfter: true, err: "short body: unexpected EOF"},
		{name: "short chunk", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", closeAfter: true, err: "short body: unexpected EOF"},
		{name: "no last chunk", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n", closeAfter: true, err: "reading the chunk size: unexpected EOF"},
		{name: "short headers", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", closeAfter: true, err: "reading the header: unexpected EOF"},
		{name: "closed without an answer", answer: "", closeAfter: true, err: "reading the status line: EOF"},
	} {
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/keep=%v", tc.name, keep), func(t *testing.T) {
				if tc.needsOK && !keep {
					t.Skip("not a 200")
				}
				s := newRawServer(t, tc.answer, tc.closeAfter)
				tg := &Target{Name: "raw", Base: s.base(), Method: http.MethodGet, Paths: []string{"/"}}
				var got atomic.Value
				if keep {
					tg.OK = func(status int, body []byte) bool {
						got.Store(string(body))
						return tc.err != "" || string(body) == tc.body
					}
				}
				if tc.err != "" {
					// The first answer fails the round, long before its end.
					r := runRounds(t, tg, 2, 1, time.Minute)
					if r.Err == nil || !slices.ContainsFunc(strings.Split(tc.err, "|"), func(e string) bool { return strings.Contains(r.Err.Error(), e) }) {
						t.Fatalf("Err = %v, want %q", r.Err, tc.err)
					}
					return
				}
				r := runRounds(t, tg, 2, 2, 50*time.Millisecond)
				if r.Err != nil {
					t.Fatalf("%v (body %.60q)", r.Err, got.Load())
				}
				if r.Requests == 0 || s.requests.Load() != r.Requests {
					t.Errorf("client %d requests, server received %d", r.Requests, s.requests.Load())
				}
				if want := map[bool]int64{false: 2, true: r.Requests}[tc.perRequest]; s.conns.Load() != want {
					t.Errorf("%d connections for %d requests, want %d", s.conns.Load(), r.Requests, want)
				}
			})
		}
	}
}

// TestTimeout: a server that never answers fails the round after the
// client's timeout instead of hanging it.
func TestTimeout(t *testing.T) {
	s := newRawServer(t, "", false)
	c, err := NewClient(&Target{Name: "stuck", Base: s.base(), Method: http.MethodGet, Paths: []string{"/"}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Timeout = 50 * time.Millisecond
	var r Result
	Run(context.Background(), c, time.Minute, &r, true)
	if !errors.Is(r.Err, os.ErrDeadlineExceeded) {
		t.Errorf("Err = %v, want a deadline exceeded", r.Err)
	}
}

func TestNewClientErrors(t *testing.T) {
	ok := Target{Base: "http://127.0.0.1:1", Method: http.MethodGet, Paths: []string{"/"}}
	for _, tc := range []struct {
		change func(*Target)
		conns  int
		err    string
	}{
		{func(*Target) {}, 0, "0 connections"},
		{func(t *Target) { t.Base = "https://127.0.0.1:1" }, 1, "want http://HOST:PORT"},
		{func(t *Target) { t.Base = "http://127.0.0.1:1/prefix" }, 1, "want http://HOST:PORT"},
		{func(t *Target) { t.Base = "http://192.0.2.1:80" }, 1, "not a loopback address"},
		{func(t *Target) { t.Base = "http://example.com" }, 1, "not a loopback address"},
		{func(t *Target) { t.Method = "PUT" }, 1, `method "PUT"`},
		{func(t *Target) { t.Paths = nil }, 1, "GET without paths"},
		{func(t *Target) { t.Paths = []string{"/a b"} }, 1, "byte 0x20"},
		{func(t *Target) { t.Paths = []string{"a"} }, 1, "does not start with /"},
		{func(t *Target) { t.Method = http.MethodPost }, 1, "POST without a path or bodies"},
	} {
		tg := ok
		tc.change(&tg)
		if _, err := NewClient(&tg, tc.conns); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v, %d conns: err %v, want %q", tg, tc.conns, err, tc.err)
		}
	}
	for _, base := range []string{"http://127.0.0.1:1", "http://[::1]:1", "http://localhost:1", "http://127.0.0.2"} {
		tg := ok
		tg.Base = base
		if _, err := NewClient(&tg, 1); err != nil {
			t.Errorf("%s: %v", base, err)
		}
	}
}

func TestQuantile(t *testing.T) {
	lat := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for q, want := range map[float64]time.Duration{0: 1, 0.5: 5, 0.99: 9, 1: 10} {
		if got := Quantile(lat, q); got != want {
			t.Errorf("Quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("Quantile(nil) != 0")
	}
}

// The benchmarks drive the bare handler in a child process (so that the
// CPU and the allocations measured are the client's alone) from 4 ×
// GOMAXPROCS goroutines, one connection each, with a GET as the bare and
// GET peers send and a 5 KB POST as the batches do. They report the
// client's and the server's CPU per request (getrusage and /proc).

const benchParallelism = 4

var benchBody = []byte(`[` + strings.Repeat(`{"id":"user-123","scale":3600000,"limit":1000000000000},`, 90) + `{}]`)

// startBare starts the bare server in a child process and returns its
// base URL and a reader of its CPU seconds.
func startBare(b *testing.B) (string, func() float64) {
	b.Helper()
	p, addr, err := proc.Start(context.Background(), proc.Options{Name: "bare", Path: os.Args[0], Env: []string{serveEnv + "=bare"}, WaitAddr: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := p.Stop(5 * time.Second); err != nil {
			b.Error(err)
		}
	})
	return "http://" + addr, func() float64 {
		s, err := proc.CPUSeconds(p.PID())
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
}

// measure times f, reporting the allocations and the CPU per request.
func measure(b *testing.B, serverCPU func() float64, f func()) {
	b.ReportAllocs()
	s0, c0 := serverCPU(), proc.SelfCPUSeconds()
	b.ResetTimer()
	f()
	b.StopTimer()
	c1, s1 := proc.SelfCPUSeconds(), serverCPU()
	b.ReportMetric((c1-c0)*1e9/float64(b.N), "client-cpu-ns/op")
	b.ReportMetric((s1-s0)*1e9/float64(b.N), "server-cpu-ns/op")
}

func benchTargets(base string) []*Target {
	return []*Target{
		{Name: "GET", Base: base, Method: http.MethodGet, Paths: []string{"/"}},
		{Name: "POST", Base: base, Method: http.MethodPost, Paths: []string{"/"}, Bodies: [][]byte{benchBody}},
	}
}

func BenchmarkClient(b *testing.B) {
	base, serverCPU := startBare(b)
	for _, tg := range benchTargets(base) {
		b.Run(tg.Name, func(b *testing.B) {
			n := benchParallelism * runtime.GOMAXPROCS(0)
			c, err := NewClient(tg, n)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			for g := range n {
				if err := c.do(ctx, &c.conns[g], g, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			b.SetParallelism(benchParallelism)
			measure(b, serverCPU, func() {
				b.RunParallel(func(pb *testing.PB) {
					g := int(next.Add(1) - 1)
					if g >= n {
						b.Error("more goroutines than connections")
						return
					}
					cn := &c.conns[g]
					for i := g; pb.Next(); i += n {
						if err := c.do(ctx, cn, i, time.Now()); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}

// BenchmarkNetHTTPClient is the baseline: what the package did before,
// with net/http's Client and Transport.
func BenchmarkNetHTTPClient(b *testing.B) {
	base, serverCPU := startBare(b)
	for _, tg := range benchTargets(base) {
		b.Run(tg.Name, func(b *testing.B) {
			n := benchParallelism * runtime.GOMAXPROCS(0)
			tr := &http.Transport{MaxIdleConns: n, MaxIdleConnsPerHost: n, MaxConnsPerHost: n, IdleConnTimeout: 5 * time.Minute, DisableCompression: true}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			do := func() error {
				var body io.Reader
				if tg.Method == http.MethodPost {
					body = bytes.NewReader(tg.Bodies[0])
				}
				req, err := http.NewRequest(tg.Method, tg.Base+tg.Paths[0], body)
				if err != nil {
					return err
				}
				if body != nil {
					req.Header["Content-Type"] = []string{"application/json"}
				}
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				if _, err := io.Copy(io.Discard, resp.Body); err != nil {
					return err
				}
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("status %s", resp.Status)
				}
				return nil
			}
			if err := do(); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(benchParallelism)
			measure(b, serverCPU, func() {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := do(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}

// TestAlsoSpreadsTheConnections: a target of several servers has its
// connections spread over them, round-robin.
func TestAlsoSpreadsTheConnections(t *testing.T) {
	var served [3]atomic.Int64
	var srvs [3]*httptest.Server
	for i := range srvs {
		srvs[i], _ = countingServer(t, func(w http.ResponseWriter, _ *http.Request) {
			served[i].Add(1)
			_, _ = io.WriteString(w, "ok")
		})
	}
	tg := &Target{Name: "three", Base: srvs[0].URL, Also: []string{srvs[1].URL, srvs[2].URL}, Method: http.MethodGet, Paths: []string{"/"}, ChecksPerRequest: 1}
	if r := runRounds(t, tg, 6, 1, 50*time.Millisecond); r.Err != nil || r.Requests == 0 {
		t.Fatalf("%d requests, %v", r.Requests, r.Err)
	}
	for i := range served {
		if served[i].Load() == 0 {
			t.Errorf("server %d got no request (%d, %d, %d)", i, served[0].Load(), served[1].Load(), served[2].Load())
		}
	}
	if _, err := NewClient(&Target{Base: srvs[0].URL, Also: []string{"http://example.com"}, Method: http.MethodGet, Paths: []string{"/"}}, 1); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("a non-loopback Also: %v, want not a loopback address", err)
	}
}
