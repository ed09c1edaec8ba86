package resp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/api/internal/secret"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// Errors returned by New, Serve and Shutdown. Match them with errors.Is.
var (
	// ErrInvalidOption is matched by every error New returns.
	ErrInvalidOption = errors.New("resp: invalid option")
	// ErrServerClosed is returned by Serve once Shutdown or Close has been
	// called, and by a second call to Serve.
	ErrServerClosed = errors.New("resp: server closed")
)

// Checker decides the checks of the server's commands. *actors.System is
// one. Its methods must be safe for concurrent use.
type Checker interface {
	// Check counts req against its limit and returns the decision.
	Check(ctx context.Context, req table.Request) (table.Decision, error)
	// Refund gives back up to req.Hits (≥ 1) hits to req's bucket and
	// returns the decision a peek gets afterwards.
	Refund(ctx context.Context, req table.Request) (table.Decision, error)
}

// EachChecker is a Checker that decides a batch of independent checks in
// one pass: each request on its own, as Check would, in order, with
// decs[i] the decision of reqs[i] (len(decs) == len(reqs)).
// *actors.System is one. Its error, if any, is about the requests it names
// as *table.IndexError (alone or in an errors.Join), which are answered
// with their error, the others with their decisions; any other error is
// about every request of the batch. The server gives it the checks of each
// pipelined read; a Checker without it gets them one Check at a time, in
// order.
type EachChecker interface {
	CheckEach(ctx context.Context, reqs []table.Request, decs []table.Decision) error
}

// IDResetter is a Checker that deletes every bucket of an id in a
// namespace, under each limit of it, and returns how many of them could
// still change a decision (a token bucket not yet full again): DEL and
// UNLINK need it. *actors.System is one.
type IDResetter interface {
	ResetID(ctx context.Context, namespace, id string) (int, error)
}

// Defaults of the Options limits.
const (
	DefaultMaxConns     = 10000
	DefaultMaxArgs      = 32
	DefaultMaxBulk      = 4096
	DefaultMaxInline    = 16 << 10
	DefaultReadTimeout  = 10 * time.Second
	DefaultIdleTimeout  = 5 * time.Minute
	DefaultWriteTimeout = 10 * time.Second
	// DefaultAuthFailures is Options.AuthFailures's default.
	DefaultAuthFailures = 10
)

// maxAuthClients bounds the client addresses the limit of failed AUTHs
// remembers (the one closest to its full budget goes first).
const maxAuthClients = 4096

// Options configures New. Only Checker is required; zero limits mean the
// documented defaults.
type Options struct {
	// Checker decides the checks; required. One that is an IDResetter also
	// serves DEL and UNLINK.
	Checker Checker
	// Rules holds the named rules of RL.RULE and RL.REFUNDRULE. Nil means
	// none: those commands are answered "ERR rule: no rules are
	// configured". Changes are seen by the very next command.
	Rules *rules.Store
	// Password, when not empty, must be given with AUTH before any command
	// but AUTH, HELLO and QUIT.
	Password string
	// AuthFailures is how many failed AUTHs a client address (an IPv4
	// address, or an IPv6 /64) may make at once, and then per minute;
	// past it, an AUTH from it is answered "ERR too many failed AUTH
	// attempts from this address; retry in N s" without its password
	// being compared. Successful AUTHs count nothing, so a pool that
	// opens many connections at once is never limited. 0 means
	// DefaultAuthFailures; negative, no limit (for clients that share an
	// address, behind a proxy or NAT, where one client's failures would
	// refuse the others).
	AuthFailures int
	// Passwords, when not nil, replaces Password: AUTH accepts any of the
	// passwords it returns, asked at each AUTH, so that they can change
	// while the server runs (a rotation adds the new password, moves the
	// clients to it, then drops the old one; a connection that is
	// authenticated stays so). It must be safe for concurrent use and
	// return at least one non-empty password.
	Passwords func() []string

	// MaxConns caps the open connections; one over it is answered
	// "ERR max number of clients reached" and closed. 0 means
	// DefaultMaxConns.
	MaxConns int
	// MaxArgs caps the arguments of a command, its name included; 0 means
	// DefaultMaxArgs.
	MaxArgs int
	// MaxBulk caps the length in bytes of one argument (a bulk string); 0
	// means DefaultMaxBulk.
	MaxBulk int
	// MaxInline caps the length in bytes of an inline command's line; 0
	// means DefaultMaxInline.
	MaxInline int
	// ReadTimeout bounds the time from the first byte of a command to its
	// last; 0 means DefaultReadTimeout.
	ReadTimeout time.Duration
	// IdleTimeout closes a connection that sends nothing between commands
	// for this long; 0 means DefaultIdleTimeout, a negative value never.
	IdleTimeout time.Duration
	// WriteTimeout bounds the writing of one batch of replies; 0 means
	// DefaultWriteTimeout.
	WriteTimeout time.Duration

	// TLSConfig, when set, makes every connection TLS only: the handshake
	// is bounded by ReadTimeout, and a connection over MaxConns gets its
	// refusal over TLS too, within refuseTimeout. Its GetCertificate and
	// GetConfigForClient, if set, are called on every handshake.
	TLSConfig *tls.Config

	// Stopped and Unavailable are the errors by which the Checker says it is
	// stopping or that a shard is unavailable (actors.ErrStopped,
	// actors.ErrUnavailable), matched with errors.Is to word the reply; nil
	// matches nothing.
	Stopped, Unavailable error
	// Observer is told about every command and connection; nil tells no one.
	Observer Observer
	// Logger receives unexpected Checker errors and accept errors; nil
	// discards them.
	Logger *slog.Logger
	// Now is the clock of INFO's uptime and of the limit of failed AUTHs;
	// nil means time.Now.
	Now func() time.Time
	// Version is the ratelimitd version INFO reports.
	Version string

	// ConnGoroutines serves each connection on a goroutine of its own.
	// Otherwise, on Linux, plain TCP connections are served by event
	// loops, one per processor, each deciding the checks of its
	// connections itself: fewer system calls and no scheduler round per
	// request, but a check that waits stalls its loop's other
	// connections. Set it when the Checker's checks may wait on the
	// network (a cluster member forwards checks to their owners). TLS
	// connections are always served on goroutines.
	ConnGoroutines bool
}

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Checker == nil:
		return o, fmt.Errorf("%w: Checker is nil", ErrInvalidOption)
	case o.MaxConns < 0, o.MaxArgs < 0, o.MaxBulk < 0, o.MaxInline < 0:
		return o, fmt.Errorf("%w: a limit is negative", ErrInvalidOption)
	case o.ReadTimeout < 0, o.WriteTimeout < 0:
		return o, fmt.Errorf("%w: a read or write timeout is negative", ErrInvalidOption)
	case o.Password != "" && o.Passwords != nil:
		return o, fmt.Errorf("%w: both Password and Passwords are set", ErrInvalidOption)
	case o.MaxArgs != 0 && o.MaxArgs < minArgs:
		return o, fmt.Errorf("%w: MaxArgs %d is less than %d, the arguments of RL.REFUND", ErrInvalidOption, o.MaxArgs, minArgs)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.MaxConns, DefaultMaxConns)
	def(&o.MaxArgs, DefaultMaxArgs)
	def(&o.MaxBulk, DefaultMaxBulk)
	def(&o.MaxInline, DefaultMaxInline)
	def(&o.AuthFailures, DefaultAuthFailures)
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defDur(&o.ReadTimeout, DefaultReadTimeout)
	defDur(&o.IdleTimeout, DefaultIdleTimeout)
	defDur(&o.WriteTimeout, DefaultWriteTimeout)
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// minArgs is the most arguments a command of ours takes: RL.REFUND with
// every option.
const minArgs = 12

// Server is a RESP2 server answering CL.THROTTLE, the RL.* commands and
// what Redis clients send on connect. It is safe for concurrent use.
type Server struct {
	opts    Options
	checker Checker
	each    EachChecker // checker, if it is one
	// resetter is checker, if it is one.
	resetter IDResetter
	obs      Observer
	log      *slog.Logger
	// passwords returns the passwords AUTH accepts: Options.Passwords, or
	// Options.Password alone; nil when no AUTH is asked.
	passwords func() []string
	// authFailures limits the failed AUTHs per client address; nil when
	// no AUTH is asked, or with no limit.
	authFailures *secret.Limiter
	started      time.Time

	// ctx is the context of the checks, canceled when Shutdown gives up
	// waiting or Close is called.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	ln       net.Listener // the listener being served, nil before Serve
	conns    map[*frameConn]struct{}
	serving  bool
	closing  chan struct{} // closed when Shutdown or Close begins
	isClosed bool
	drained  chan struct{} // closed once closing and no connection is left
	served   chan struct{} // closed when Serve returns

	// loops are the event loops, started by Serve (none with
	// ConnGoroutines); nextLoop picks the next connection's, under mu.
	loops    []*loop
	nextLoop uint64
	nLoops   int // how many loops Serve starts; 0: defaultLoops (tests set it)

	nextID   atomic.Uint64
	stats    stats
	refusing chan struct{} // a slot per TLS refusal under way
}

// stats are the counters of INFO.
type stats struct {
	connsReceived atomic.Int64
	connsRejected atomic.Int64
	connsOpen     atomic.Int64
	commands      atomic.Int64
	checks        atomic.Int64
	denied        atomic.Int64
}

// New returns a Server configured by opts. Serve starts it.
func New(opts Options) (*Server, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:      o,
		checker:   o.Checker,
		obs:       o.Observer,
		log:       o.Logger,
		passwords: o.Passwords,
		started:   o.Now(),
		conns:     make(map[*frameConn]struct{}),
		closing:   make(chan struct{}),
		drained:   make(chan struct{}),
		served:    make(chan struct{}),

		refusing: make(chan struct{}, maxTLSRefusals),
	}
	if o.Password != "" {
		s.passwords = secret.Fixed(o.Password)
	}
	if s.passwords != nil && o.AuthFailures > 0 {
		s.authFailures = secret.NewLimiter(int64(o.AuthFailures), maxAuthClients)
	}
	s.each, _ = o.Checker.(EachChecker)
	s.resetter, _ = o.Checker.(IDResetter)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Serve accepts connections on ln and serves them until Shutdown or Close;
// it then returns ErrServerClosed, and closes ln. Any other error is ln's.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.serving || s.isClosing() {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.serving, s.ln = true, ln
	if !s.opts.ConnGoroutines && s.opts.TLSConfig == nil {
		n := s.nLoops
		if n == 0 {
			n = defaultLoops()
		}
		s.loops = s.startLoops(n)
	}
	s.mu.Unlock()
	defer close(s.served)

	l := &listener{Listener: ln, srv: s}
	for {
		c, err := l.accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			_ = ln.Close()
			s.closeConns() // ln was closed under us, or failed for good
			return err
		}
		if c.lp == nil {
			go s.serveConn(c)
		}
	}
}

// Addr returns the address being served, or nil before Serve.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown stops accepting connections and closes each open one as soon as
// the commands it has read are answered (a connection waiting for a
// command is closed at once), then returns. If ctx ends first, the rest
// are closed as by Close and ctx.Err() is returned. Shutdown is
// idempotent; it waits for Serve to return.
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginClose()
	s.mu.Lock()
	for c := range s.conns {
		c.drain()
	}
	s.mu.Unlock()
	var err error
	select {
	case <-s.drained:
	case <-ctx.Done():
		err = ctx.Err()
		s.closeAll()
	}
	s.waitServed()
	return err
}

// Close closes the listener and every connection at once, canceling the
// checks in progress, and waits for Serve to return. It is idempotent.
func (s *Server) Close() error {
	s.beginClose()
	s.closeAll()
	s.waitServed()
	return nil
}

// beginClose closes the listener and marks the server closing.
func (s *Server) beginClose() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosed {
		return
	}
	s.isClosed = true
	close(s.closing)
	if s.ln != nil {
		_ = s.ln.Close()
	}
	for _, lp := range s.loops {
		lp.wake() // to end once its connections are gone
	}
	s.checkDrained()
}

// closeAll closes every connection and cancels the checks in progress:
// the connections first, so that no reply to a canceled check gets out.
func (s *Server) closeAll() {
	s.closeConns()
	s.cancel()
	<-s.drained
}

// closeConns closes every connection.
func (s *Server) closeConns() {
	s.mu.Lock()
	conns := make([]*frameConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// waitServed waits for Serve to return, if it was called, and for its
// event loops to end (each ends once the server is closing and its last
// connection is closed).
func (s *Server) waitServed() {
	s.mu.Lock()
	serving := s.serving
	loops := s.loops
	s.mu.Unlock()
	if serving {
		<-s.served
	}
	for _, lp := range loops {
		<-lp.ended()
	}
	s.cancel()
}

func (s *Server) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// checkDrained closes drained once the server is closing and holds no
// connection. s.mu is held.
func (s *Server) checkDrained() {
	if s.isClosed && len(s.conns) == 0 {
		select {
		case <-s.drained:
		default:
			close(s.drained)
		}
	}
}

// admit wraps an accepted connection, or refuses it over the cap (nil).
func (s *Server) admit(nc net.Conn) *frameConn {
	s.stats.connsReceived.Add(1)
	s.mu.Lock()
	if s.isClosed {
		s.mu.Unlock()
		_ = nc.Close()
		return nil
	}
	if len(s.conns) >= s.opts.MaxConns {
		s.mu.Unlock()
		s.stats.connsRejected.Add(1)
		s.obs.Conn(ConnRejected)
		if s.opts.TLSConfig != nil {
			s.refuseTLS(nc)
			return nil
		}
		_ = nc.SetWriteDeadline(time.Now().Add(refuseTimeout))
		_, _ = nc.Write([]byte(errMaxClients))
		_ = nc.Close()
		return nil
	}
	if s.opts.TLSConfig != nil {
		nc = tls.Server(nc, s.opts.TLSConfig)
	}
	c := newFrameConn(nc, s, len(s.loops) > 0)
	if c.fd >= 0 {
		s.handOver(c)
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.stats.connsOpen.Add(1)
	s.obs.Conn(ConnOpened)
	return c
}

// The refusal of a connection over the cap.
const (
	errMaxClients = "-ERR max number of clients reached\r\n"
	// refuseTimeout bounds the writing of a refusal, its TLS handshake included.
	refuseTimeout = time.Second
	// maxTLSRefusals bounds the refusals whose handshakes are under way at
	// once; past it a connection over the cap is closed without a reply.
	maxTLSRefusals = 16
)

// refuseTLS answers a connection over the cap with errMaxClients over TLS,
// off the accept loop (a handshake waits for the client), then closes it.
func (s *Server) refuseTLS(nc net.Conn) {
	select {
	case s.refusing <- struct{}{}:
	default:
		_ = nc.Close()
		return
	}
	go func() {
		defer func() { <-s.refusing }()
		tc := tls.Server(nc, s.opts.TLSConfig)
		_ = tc.SetDeadline(time.Now().Add(refuseTimeout))
		_, _ = tc.Write([]byte(errMaxClients))
		_ = tc.Close()
	}()
}

// forget removes a closed connection.
func (s *Server) forget(c *frameConn) {
	s.mu.Lock()
	_, ok := s.conns[c]
	delete(s.conns, c)
	s.checkDrained()
	s.mu.Unlock()
	if ok {
		s.stats.connsOpen.Add(-1)
		s.obs.Conn(ConnClosed)
	}
}
