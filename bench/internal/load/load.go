// Package load is the suite's HTTP load client: a fixed number of
// goroutines, each sending its next request as soon as the previous one is
// answered, over a keep-alive connection of its own, for a fixed time.
// Every peer is driven by the same client with the same settings, in
// alternating short rounds, so that a change in background load biases
// none of them.
//
// The client is a lean HTTP/1.1 client over net.Conn rather than
// net/http's, so that on a machine whose cores it shares with the servers
// it costs less than they do: each request is rendered once, sent with
// one Write and its answer parsed from a bufio.Reader, with no allocation
// per request.
package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/proc"
)

// MaxPerGoroutine bounds the requests one goroutine sends in one round,
// whatever the round's length.
const MaxPerGoroutine = 5_000_000

// DefaultTimeout is a new Client's Timeout.
const DefaultTimeout = 10 * time.Second

const (
	// maxBody is how much of an answer's body is kept for Target.OK; the
	// rest is read and discarded.
	maxBody = 1 << 20
	// readBuf is the size of each connection's read buffer, and so the
	// longest status, header, chunk-size or trailer line accepted.
	readBuf = 16 << 10
)

// Target is one peer's endpoint and the requests to send it.
type Target struct {
	Name string
	Base string // "http://127.0.0.1:PORT": a loopback address, no path
	// Also lists more servers of the same kind (bases as Base): the
	// connections are spread over Base and them, round-robin, for a
	// target that is several servers (cluster members).
	Also   []string
	Method string   // GET or POST
	Paths  []string // GET: request i goes to Base+Paths[i%len]; POST: Paths[0]
	Bodies [][]byte // POST: request i sends Bodies[i%len]
	// ChecksPerRequest is how many limit checks one request makes (1, or
	// the size of a batch).
	ChecksPerRequest int
	// CPU returns the CPU seconds used so far by the processes serving
	// this target (nil: not measured).
	CPU func() (float64, error)
	// OK reports whether an answer (status, body) is a success; nil
	// means status 200 only. The body (its first MiB) is kept only when
	// OK is set; otherwise it is read and discarded.
	OK func(status int, body []byte) bool
}

// Result accumulates what rounds against one target measured.
type Result struct {
	Requests  int64
	Elapsed   time.Duration
	Lat       []time.Duration // one per completed request, sorted by Finish
	ServerCPU float64         // seconds, from Target.CPU
	ClientCPU float64         // seconds of this process, during the rounds
	Err       error           // the first failure; the target's numbers are void
}

// ReqPerSec returns the requests per second over all rounds.
func (r *Result) ReqPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// Finish sorts the latencies.
func (r *Result) Finish() { slices.Sort(r.Lat) }

// Quantile returns the q-quantile latency of sorted latencies.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * q)
	return sorted[i]
}

// Client sends one Target's requests over HTTP/1.1, one keep-alive
// connection per goroutine of Run, kept open between rounds until Close.
// A connection the server closes (Connection: close, an HTTP/1.0 answer,
// a body ended by the close, or a kept-alive connection found closed
// before any byte of the next answer) is dialed again.
type Client struct {
	// Timeout bounds each dial and each request: its write and the
	// reading of its whole answer.
	Timeout time.Duration

	t     *Target
	reqs  [][]byte // every request, rendered once
	conns []conn   // one per goroutine
}

// conn is one goroutine's connection and buffers.
type conn struct {
	addr   string   // host:port to dial
	nc     net.Conn // nil: not connected
	br     *bufio.Reader
	body   []byte // the body given to Target.OK, reused
	reused bool   // nc has carried an answer already
}

// NewClient checks t and renders its requests for conns goroutines. It
// dials nothing: each goroutine connects on its first request.
func NewClient(t *Target, conns int) (*Client, error) {
	if conns <= 0 {
		return nil, fmt.Errorf("%d connections", conns)
	}
	var addrs []string
	var u *url.URL // Base's: its host goes in the Host headers
	for i, base := range append([]string{t.Base}, t.Also...) {
		ub, err := url.Parse(base)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			u = ub
		}
		if ub.Scheme != "http" || ub.Host == "" || ub.User != nil || ub.Path != "" || ub.RawQuery != "" || ub.Fragment != "" {
			return nil, fmt.Errorf("base %q: want http://HOST:PORT", base)
		}
		if ip := net.ParseIP(ub.Hostname()); ub.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("base %q: not a loopback address", base)
		}
		port := ub.Port()
		if port == "" {
			port = "80"
		}
		addrs = append(addrs, net.JoinHostPort(ub.Hostname(), port))
	}
	c := &Client{Timeout: DefaultTimeout, t: t, conns: make([]conn, conns)}
	for i := range c.conns {
		c.conns[i].addr = addrs[i%len(addrs)]
	}
	switch t.Method {
	case "GET":
		if len(t.Paths) == 0 {
			return nil, errors.New("GET without paths")
		}
		for _, p := range t.Paths {
			if err := checkPath(p); err != nil {
				return nil, err
			}
			c.reqs = append(c.reqs, fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", p, u.Host))
		}
	case "POST":
		if len(t.Paths) == 0 || len(t.Bodies) == 0 {
			return nil, errors.New("POST without a path or bodies")
		}
		if err := checkPath(t.Paths[0]); err != nil {
			return nil, err
		}
		for _, b := range t.Bodies {
			r := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", t.Paths[0], u.Host, len(b))
			c.reqs = append(c.reqs, append(r, b...))
		}
	default:
		return nil, fmt.Errorf("method %q", t.Method)
	}
	for i := range c.conns {
		c.conns[i].br = bufio.NewReaderSize(nil, readBuf)
	}
	return c, nil
}

// checkPath accepts an origin-form request target: "/" then visible
// ASCII.
func checkPath(p string) error {
	if p == "" || p[0] != '/' {
		return fmt.Errorf("path %q does not start with /", p)
	}
	for i := range len(p) {
		if p[i] <= ' ' || p[i] >= 0x7f {
			return fmt.Errorf("path %q: byte %#x", p, p[i])
		}
	}
	return nil
}

// Close closes the client's connections. It must not be called during a
// Run.
func (c *Client) Close() error {
	var errs []error
	for i := range c.conns {
		errs = append(errs, c.conns[i].close())
	}
	return errors.Join(errs...)
}

func (cn *conn) close() error {
	if cn.nc == nil {
		return nil
	}
	err := cn.nc.Close()
	cn.nc, cn.reused = nil, false
	return err
}

// Run sends requests to c's target for d (or until ctx ends), from one
// goroutine per connection of c, adding what it measured to into; it does
// nothing if into.Err is set. The target's CPU is read before and after.
// A failed request stops the round and sets into.Err. Latencies are kept
// only if record is set (not during a warm-up).
func Run(ctx context.Context, c *Client, d time.Duration, into *Result, record bool) {
	if into.Err != nil {
		return // a failed client may be nil
	}
	Drive(ctx, c.t.Name, c.t.CPU, len(c.conns), d, into, record, func(g, i int, t0 time.Time) error {
		return c.do(ctx, &c.conns[g], i, t0)
	})
}

// Drive is a round of any load client: it calls call(g, i, t0) from
// workers goroutines (g), each with its own request numbers (i: g,
// g+workers, …), for d or until ctx ends, and adds to into what it
// measured: requests, latencies (if record), elapsed time, the client's
// CPU and the target's (cpu, if not nil, read before and after; name
// names the target in errors). It does nothing if into.Err is set; the
// first failed call stops the round and sets into.Err.
func Drive(ctx context.Context, name string, cpu func() (float64, error), workers int, d time.Duration, into *Result, record bool, call func(g, i int, t0 time.Time) error) {
	if into.Err != nil {
		return
	}
	var stop atomic.Bool
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		stop.Store(true)
	}
	lat := make([][]time.Duration, workers)
	counts := make([]int64, workers)
	var wg sync.WaitGroup

	var cpu0 float64
	if cpu != nil {
		c, err := cpu()
		if err != nil {
			into.Err = fmt.Errorf("%s: server CPU: %w", name, err)
			return
		}
		cpu0 = c
	}
	self0 := proc.SelfCPUSeconds()
	start := time.Now()
	deadline := start.Add(d)
	for g := range workers {
		wg.Go(func() {
			var mine []time.Duration
			if record {
				mine = make([]time.Duration, 0, 1<<12)
			}
			n := int64(0)
			for i := g; n < MaxPerGoroutine && !stop.Load() && ctx.Err() == nil; i += workers {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				if err := call(g, i, t0); err != nil {
					fail(err)
					break
				}
				if record {
					mine = append(mine, time.Since(t0))
				}
				n++
			}
			lat[g] = mine
			counts[g] = n
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	self1 := proc.SelfCPUSeconds()
	if firstErr != nil {
		into.Err = fmt.Errorf("%s: %w", name, firstErr)
		return
	}
	if err := ctx.Err(); err != nil {
		into.Err = fmt.Errorf("%s: %w", name, err)
		return
	}
	if cpu != nil {
		c, err := cpu()
		if err != nil {
			into.Err = fmt.Errorf("%s: server CPU: %w", name, err)
			return
		}
		into.ServerCPU += c - cpu0
	}
	into.ClientCPU += self1 - self0
	into.Elapsed += elapsed
	for g := range workers {
		into.Requests += counts[g]
		into.Lat = append(into.Lat, lat[g]...)
	}
}

// do sends request number i over cn, started at now, reads the whole
// answer and checks it. After a failure cn is closed.
func (c *Client) do(ctx context.Context, cn *conn, i int, now time.Time) error {
	status, body, err := c.roundTrip(ctx, cn, c.reqs[i%len(c.reqs)], now)
	if err == nil {
		if c.t.OK == nil {
			if status != 200 {
				err = fmt.Errorf("status %d", status)
			}
		} else if !c.t.OK(status, body) {
			err = fmt.Errorf("status %d, body %.300s", status, body)
		}
	}
	if err != nil {
		_ = cn.close()
		path := c.t.Paths[0]
		if c.t.Method == "GET" {
			path = c.t.Paths[i%len(c.t.Paths)]
		}
		return fmt.Errorf("%s %s%s: %w", c.t.Method, c.t.Base, path, err)
	}
	return nil
}

// roundTrip writes req on cn, connecting first if needed, and reads the
// answer. A kept-alive connection that the server turns out to have
// closed before the first byte of the answer is dialed again and the
// request sent once more, as net/http's Transport does.
func (c *Client) roundTrip(ctx context.Context, cn *conn, req []byte, now time.Time) (int, []byte, error) {
	for {
		if cn.nc == nil {
			d := net.Dialer{Timeout: c.Timeout}
			nc, err := d.DialContext(ctx, "tcp", cn.addr)
			if err != nil {
				return 0, nil, err
			}
			cn.nc = nc
			cn.br.Reset(nc)
		}
		if cn.br.Buffered() > 0 {
			return 0, nil, fmt.Errorf("%d unexpected bytes after the last answer", cn.br.Buffered())
		}
		if err := cn.nc.SetDeadline(now.Add(c.Timeout)); err != nil {
			return 0, nil, err
		}
		_, err := cn.nc.Write(req)
		if err != nil {
			err = fmt.Errorf("writing the request: %w", err)
		} else if _, err = cn.br.Peek(1); err != nil {
			err = fmt.Errorf("reading the status line: %w", err)
		}
		if err != nil {
			if cn.reused && closedByPeer(err) {
				_ = cn.close()
				now = time.Now()
				continue
			}
			return 0, nil, err
		}
		status, body, keep, err := cn.readAnswer(c.t.OK != nil)
		if err != nil {
			return 0, nil, err
		}
		cn.reused = true
		if !keep {
			_ = cn.close()
		}
		return status, body, nil
	}
}

// closedByPeer reports whether err says the other end closed the
// connection.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// readAnswer reads one HTTP/1.x answer: its status line, its headers and
// exactly its body as framed by Transfer-Encoding: chunked, Content-Length
// or the end of the connection. The body is kept in cn.body if keepBody,
// and discarded otherwise. keepConn is false if the connection cannot
// carry another request.
func (cn *conn) readAnswer(keepBody bool) (status int, body []byte, keepConn bool, err error) {
	line, err := cn.line("status line")
	if err != nil {
		return 0, nil, false, err
	}
	status, http10, ok := parseStatusLine(line)
	if !ok {
		return 0, nil, false, fmt.Errorf("malformed status line %q", line)
	}
	if status < 200 {
		return 0, nil, false, fmt.Errorf("unexpected interim answer %q", line)
	}
	length := int64(-1)
	var chunked, sawClose, sawKeepAlive bool
	for {
		line, err = cn.line("header")
		if err != nil {
			return 0, nil, false, err
		}
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || bytes.IndexByte(line[:colon], ' ') >= 0 || bytes.IndexByte(line[:colon], '\t') >= 0 {
			return 0, nil, false, fmt.Errorf("malformed header line %q", line)
		}
		name, value := line[:colon], trimSpace(line[colon+1:])
		switch {
		case equalFold(name, "content-length"):
			n, ok := parseUint(value, 10, 18)
			if !ok || (length >= 0 && n != length) {
				return 0, nil, false, fmt.Errorf("bad Content-Length in %q", line)
			}
			length = n
		case equalFold(name, "transfer-encoding"):
			if chunked || !equalFold(value, "chunked") {
				return 0, nil, false, fmt.Errorf("unsupported %q", line)
			}
			chunked = true
		case equalFold(name, "connection"):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				tok = trimSpace(tok)
				sawClose = sawClose || equalFold(tok, "close")
				sawKeepAlive = sawKeepAlive || equalFold(tok, "keep-alive")
			}
		}
	}
	keepConn = !sawClose && (!http10 || sawKeepAlive)
	cn.body = cn.body[:0]
	switch {
	case status == 204 || status == 304:
		// No body, whatever the headers say.
	case chunked && length >= 0:
		return 0, nil, false, errors.New("both Transfer-Encoding and Content-Length")
	case chunked:
		err = cn.readChunked(keepBody)
	case length >= 0:
		err = cn.readBody(length, keepBody)
	default:
		keepConn = false
		err = cn.readToEOF(keepBody)
	}
	if err != nil {
		return 0, nil, false, err
	}
	return status, cn.body, keepConn, nil
}

// line reads one CRLF- (or LF-) terminated line, without its terminator.
// The slice is valid until the next read.
func (cn *conn) line(what string) ([]byte, error) {
	line, err := cn.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading the %s: %w", what, err)
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// readChunked reads a chunked body, its chunk extensions and trailers
// ignored.
func (cn *conn) readChunked(keep bool) error {
	for {
		line, err := cn.line("chunk size")
		if err != nil {
			return err
		}
		sz := line
		if i := bytes.IndexByte(sz, ';'); i >= 0 {
			sz = sz[:i]
		}
		n, ok := parseUint(trimSpace(sz), 16, 15)
		if !ok {
			return fmt.Errorf("malformed chunk size line %q", line)
		}
		if n == 0 {
			break
		}
		if err := cn.readBody(n, keep); err != nil {
			return err
		}
		if line, err = cn.line("end of a chunk"); err != nil {
			return err
		}
		if len(line) != 0 {
			return fmt.Errorf("chunk longer than its size: %q", line)
		}
	}
	for {
		line, err := cn.line("trailer")
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
		if bytes.IndexByte(line, ':') <= 0 {
			return fmt.Errorf("malformed trailer line %q", line)
		}
	}
}

// readBody reads exactly n bytes of body, appending to cn.body those that
// fit under maxBody if keep is set, and discarding the others.
func (cn *conn) readBody(n int64, keep bool) error {
	if keep {
		k := int(min(n, int64(maxBody-len(cn.body))))
		cn.body = slices.Grow(cn.body, k)
		m, err := io.ReadFull(cn.br, cn.body[len(cn.body):len(cn.body)+k])
		cn.body = cn.body[:len(cn.body)+m]
		if err != nil {
			return shortBody(err)
		}
		n -= int64(k)
	}
	for n > 0 {
		m, err := cn.br.Discard(int(min(n, 1<<30)))
		n -= int64(m)
		if err != nil {
			return shortBody(err)
		}
	}
	return nil
}

func shortBody(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("short body: %w", err)
}

// readToEOF reads a body that the end of the connection ends.
func (cn *conn) readToEOF(keep bool) error {
	for {
		var err error
		if keep && len(cn.body) < maxBody {
			room := min(readBuf, maxBody-len(cn.body))
			cn.body = slices.Grow(cn.body, room)
			var m int
			m, err = cn.br.Read(cn.body[len(cn.body) : len(cn.body)+room])
			cn.body = cn.body[:len(cn.body)+m]
		} else {
			_, err = cn.br.Discard(readBuf)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading a body to the end of the connection: %w", err)
		}
	}
}

// parseStatusLine parses "HTTP/1.x SSS[ reason]".
func parseStatusLine(line []byte) (status int, http10, ok bool) {
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
		return 0, false, false
	}
	switch line[7] {
	case '0':
		http10 = true
	case '1':
	default:
		return 0, false, false
	}
	s, ok := parseUint(line[9:12], 10, 3)
	if !ok || s < 100 {
		return 0, false, false
	}
	return int(s), http10, true
}

// parseUint parses 1 to maxDigits digits in base 10 or 16.
func parseUint(b []byte, base int64, maxDigits int) (int64, bool) {
	if len(b) == 0 || len(b) > maxDigits {
		return 0, false
	}
	var n int64
	for _, ch := range b {
		var d int64
		switch {
		case '0' <= ch && ch <= '9':
			d = int64(ch - '0')
		case base == 16 && 'a' <= ch && ch <= 'f':
			d = int64(ch-'a') + 10
		case base == 16 && 'A' <= ch && ch <= 'F':
			d = int64(ch-'A') + 10
		default:
			return 0, false
		}
		n = n*base + d
	}
	return n, true
}

// trimSpace trims spaces and tabs.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// equalFold reports whether b equals the lower-case ASCII lower, ignoring
// ASCII case.
func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range len(b) {
		ch := b[i]
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		if ch != lower[i] {
			return false
		}
	}
	return true
}

// Plan is a side-by-side comparison: every target gets Rounds rounds of
// PerRound, the order rotating each round, after a warm-up of Warmup each.
type Plan struct {
	Conns    int
	Rounds   int
	PerRound time.Duration
	Warmup   time.Duration
}

// Compare runs p over targets and returns one Result per target, in order.
// A target that fails keeps its error and is skipped for the remaining
// rounds; the others go on.
func Compare(ctx context.Context, p Plan, targets []*Target) []*Result {
	clients := make([]*Client, len(targets))
	res := make([]*Result, len(targets))
	for i, t := range targets {
		res[i] = &Result{}
		c, err := NewClient(t, p.Conns)
		if err != nil {
			res[i].Err = fmt.Errorf("%s: %w", t.Name, err)
			continue
		}
		clients[i] = c
		defer c.Close()
	}
	for i := range targets {
		if res[i].Err != nil {
			continue
		}
		warm := &Result{}
		Run(ctx, clients[i], p.Warmup, warm, false)
		res[i].Err = warm.Err
	}
	for r := range p.Rounds {
		for k := range targets {
			i := (k + r) % len(targets)
			Run(ctx, clients[i], p.PerRound, res[i], true)
		}
	}
	for _, r := range res {
		r.Finish()
	}
	return res
}
