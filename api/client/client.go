package client

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FailurePolicy says what Check, CheckAll and Wait do when the service
// cannot answer (see ErrUnavailable).
type FailurePolicy int

const (
	// FailClosed denies: Check and CheckAll return an error matching
	// ErrUnavailable, and Wait keeps retrying, with a capped exponential
	// backoff (or the server's Retry-After), until the hit is admitted or
	// its context ends, so work waiting on it is delayed but never lost.
	FailClosed FailurePolicy = iota
	// FailOpen allows: Check and CheckAll return decisions with Allowed
	// and Degraded set, and Wait returns nil at once. Each outage is logged
	// once, through Options.Logger, when it starts and when it ends.
	FailOpen
)

// String returns "fail_closed" or "fail_open".
func (p FailurePolicy) String() string {
	switch p {
	case FailClosed:
		return "fail_closed"
	case FailOpen:
		return "fail_open"
	}
	return "FailurePolicy(" + strconv.Itoa(int(p)) + ")"
}

// Clock is the time source of Wait: Now reads it, and Sleep waits on it.
// Tests inject a manual clock; nil in Options means the system clock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep returns after d has passed, or with ctx.Err() as soon as ctx
	// ends, whichever comes first. A d ≤ 0 returns at once.
	Sleep(ctx context.Context, d time.Duration) error
}

// systemClock is the Clock of the time package.
type systemClock struct{}

var _ Clock = systemClock{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Defaults of Options.
const (
	defaultTimeout             = 2 * time.Second
	defaultMaxIdleConnsPerHost = 64
)

// Options configures New. Only BaseURL is required; every zero field means
// the default it documents.
type Options struct {
	// BaseURL is where the service listens, such as
	// "http://127.0.0.1:8080": an http or https URL with a host, and
	// optionally a path prefix (for a service behind a proxy), but no
	// query or fragment. Required.
	BaseURL string
	// Timeout bounds each request, from dialing to the end of the answer;
	// 0 means 2s. It must not be negative.
	Timeout time.Duration
	// MaxIdleConnsPerHost is the number of keep-alive connections kept
	// open to the service; 0 means 64. Callers
	// beyond it still get connections, which are closed after use. It must
	// not be negative.
	MaxIdleConnsPerHost int
	// Failure is what Check, CheckAll and Wait do when the service cannot
	// answer; the zero value is FailClosed.
	Failure FailurePolicy
	// HTTPClient, if set, sends every request instead of a client built
	// from Timeout and MaxIdleConnsPerHost: its own Timeout and Transport
	// then apply, and Close leaves its connections alone (they are its
	// owner's). Timeout still bounds the requests of Wait (see Wait). The
	// client built otherwise honours HTTP_PROXY, HTTPS_PROXY and NO_PROXY
	// as net/http does, and does not follow redirects.
	HTTPClient *http.Client
	// Clock is the time source of Wait; nil means the system clock.
	Clock Clock
	// Logger receives a warning when the service becomes unavailable and a
	// note when it answers again, once per outage; nil discards them.
	Logger *slog.Logger
}

// Client is a client of a remote ratelimitd (see the package
// documentation). It is safe for concurrent use; make one per service and
// share it.
type Client struct {
	hc        *http.Client
	transport *http.Transport // the transport New built; nil with Options.HTTPClient
	timeout   time.Duration
	failure   FailurePolicy
	clock     Clock
	log       *slog.Logger

	checkURL  string // BaseURL + "/check_rate?"
	refundURL string // BaseURL + "/refund?"
	batchURL  string // BaseURL + "/check_rate"

	bufs sync.Pool // of *[]byte: request URLs and response bodies

	closed atomic.Bool

	// down is set while the service is unavailable, from the first failure
	// to the next answer, so that each outage is logged once. It is read
	// on every call and changed, with downSince, only under outage.
	down      atomic.Bool
	outage    sync.Mutex
	downSince time.Time // when the outage began, on the Clock
}

// New returns a Client of the service at opts.BaseURL. It checks opts but
// does not contact the service; the first call does. An error matches
// ErrInvalidOption.
func New(opts Options) (*Client, error) {
	base, err := parseBaseURL(opts.BaseURL)
	if err != nil {
		return nil, err
	}
	switch {
	case opts.Timeout < 0:
		return nil, fmt.Errorf("%w: Timeout %v is negative", ErrInvalidOption, opts.Timeout)
	case opts.MaxIdleConnsPerHost < 0:
		return nil, fmt.Errorf("%w: MaxIdleConnsPerHost %d is negative", ErrInvalidOption, opts.MaxIdleConnsPerHost)
	case opts.Failure != FailClosed && opts.Failure != FailOpen:
		return nil, fmt.Errorf("%w: Failure %v is not FailClosed or FailOpen", ErrInvalidOption, opts.Failure)
	}
	c := &Client{
		hc:        opts.HTTPClient,
		timeout:   opts.Timeout,
		failure:   opts.Failure,
		clock:     opts.Clock,
		log:       opts.Logger,
		checkURL:  base + pathCheckRate + "?",
		refundURL: base + pathRefund + "?",
		batchURL:  base + pathCheckRate,
	}
	if c.timeout == 0 {
		c.timeout = defaultTimeout
	}
	if c.clock == nil {
		c.clock = systemClock{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.hc == nil {
		idle := opts.MaxIdleConnsPerHost
		if idle == 0 {
			idle = defaultMaxIdleConnsPerHost
		}
		c.transport = newTransport(c.timeout, idle)
		c.hc = &http.Client{
			Transport: c.transport,
			Timeout:   c.timeout,
			// The service never redirects; a redirect is somebody else
			// answering, reported as an unexpected status.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return c, nil
}

// parseBaseURL validates a BaseURL and returns it without a trailing '/'.
func parseBaseURL(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%w: BaseURL is required", ErrInvalidOption)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: BaseURL: %w", ErrInvalidOption, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%w: BaseURL %q: the scheme must be http or https", ErrInvalidOption, s)
	case u.Host == "":
		return "", fmt.Errorf("%w: BaseURL %q has no host", ErrInvalidOption, s)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", fmt.Errorf("%w: BaseURL %q must not have a query or fragment", ErrInvalidOption, s)
	}
	return strings.TrimRight(s, "/"), nil
}

// newTransport returns the keep-alive transport of a Client: a pool of
// idle connections to the one host, dials bounded by timeout.
func newTransport(timeout time.Duration, idle int) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          idle,
		MaxIdleConnsPerHost:   idle,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ExpectContinueTimeout: time.Second,
	}
}

// Close closes the client's idle connections; a call in flight finishes,
// and closes its connection when it does. Every later call returns
// ErrClosed. Close is idempotent and always returns nil. A connection pool
// of Options.HTTPClient is left alone.
func (c *Client) Close() error {
	c.closed.Store(true)
	c.closeIdle()
	return nil
}

// closeIdle closes the idle connections of the transport New built.
func (c *Client) closeIdle() {
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
}

// done is called at the end of every request: a request that ends after
// Close closes the connection it has just put back in the pool.
func (c *Client) done() {
	if c.closed.Load() {
		c.closeIdle()
	}
}

// maxBuf is the largest buffer put back in the pool.
const maxBuf = 64 << 10

func (c *Client) getBuf() *[]byte {
	if p, ok := c.bufs.Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 0, 512)
	return &b
}

func (c *Client) putBuf(p *[]byte) {
	if cap(*p) > maxBuf {
		return
	}
	*p = (*p)[:0]
	c.bufs.Put(p)
}

// unavailable records that the service did not answer (err), logging the
// start of an outage.
func (c *Client) unavailable(ctx context.Context, err error) {
	if c.down.Load() {
		return
	}
	c.outage.Lock()
	defer c.outage.Unlock()
	if c.down.Load() {
		return
	}
	c.down.Store(true)
	c.downSince = c.clock.Now()
	msg := "ratelimitd unavailable; failing closed"
	if c.failure == FailOpen {
		msg = "ratelimitd unavailable; failing open"
	}
	c.log.WarnContext(ctx, msg, "err", err)
}

// answered records that the service answered, logging the end of an
// outage.
func (c *Client) answered(ctx context.Context) {
	if !c.down.Load() {
		return
	}
	c.outage.Lock()
	defer c.outage.Unlock()
	if !c.down.Load() {
		return
	}
	c.down.Store(false)
	c.log.InfoContext(ctx, "ratelimitd available again", "outage", c.clock.Now().Sub(c.downSince))
}
