package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// Errors of a call. Match them with errors.Is.
var (
	// ErrUnreachable: the member could not be reached, or the connection
	// broke or timed out before its reply; the call may or may not have run.
	ErrUnreachable = errors.New("peer: member unreachable")
	// ErrRemote: the member's Handler returned an error (its text follows).
	ErrRemote = errors.New("peer: member failed the call")
)

// MaxMessage is the largest request or reply, in bytes.
const MaxMessage = 16 << 20

// windowSize is the HTTP/2 flow-control window of a call and of a
// connection, both ways.
const windowSize = MaxMessage

// MaxBackoff bounds the wait between two attempts to reconnect to a member.
const MaxBackoff = time.Second

// serviceName names the gRPC service of the members.
const serviceName = "ratelimitd.cluster.Member"

// Handler answers one call of its method: req is the caller's request,
// owned by the Handler. A returned error reaches the caller as ErrRemote.
type Handler func(ctx context.Context, req []byte) ([]byte, error)

// raw is the codec of the calls: a message is a *[]byte, sent as is.
type raw struct{}

func (raw) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("peer: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

func (raw) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("peer: cannot unmarshal into %T", v)
	}
	// The one copy (gRPC frees data's buffers when this returns), into
	// *b's room if it has enough.
	n := data.Len()
	if n == 0 {
		*b = (*b)[:0]
		return nil
	}
	if cap(*b) < n {
		*b = make([]byte, n)
	}
	*b = (*b)[:n]
	data.CopyTo(*b)
	return nil
}

func (raw) Name() string { return "ratelimitd-raw" }

// Server serves the calls of its Handlers (and the streams of its
// StreamHandlers) on a listener.
type Server struct {
	g        *grpc.Server
	desc     grpc.ServiceDesc
	register sync.Once

	mu       sync.Mutex
	open     map[*ServerStream]struct{}
	stopping bool
}

// NewServer returns a Server dispatching each method named in handlers to
// its Handler. With tc (which CheckTLS accepts) it serves TLS 1.3 only and
// requires of every member a client certificate that tc's ClientCAs
// verify; a nil tc serves plain HTTP/2.
func NewServer(handlers map[string]Handler, tc *tls.Config) *Server {
	desc := grpc.ServiceDesc{ServiceName: serviceName, HandlerType: (*any)(nil)}
	for name, h := range handlers {
		desc.Methods = append(desc.Methods, grpc.MethodDesc{
			MethodName: name,
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var req []byte
				if err := dec(&req); err != nil {
					return nil, err
				}
				rep, err := h(ctx, req)
				if cerr := ctx.Err(); cerr != nil {
					// The caller's deadline (or cancellation) came first: it has
					// given up, or is about to, whatever the handler did.
					return nil, status.FromContextError(cerr).Err()
				}
				if err != nil {
					return nil, status.Error(codes.Aborted, err.Error())
				}
				return &rep, nil
			},
		})
	}
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(raw{}),
		// Calls run on goroutines kept for them, whose stacks have grown
		// already, rather than on a new one each.
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		// Fixed windows, large enough for MaxMessage: no bandwidth probes
		// (a ping for every message received) and fewer window updates.
		grpc.InitialWindowSize(windowSize),
		grpc.InitialConnWindowSize(windowSize),
		grpc.MaxRecvMsgSize(MaxMessage),
		grpc.MaxSendMsgSize(MaxMessage),
	}
	if tc != nil {
		opts = append(opts, grpc.Creds(serverCreds(tc)))
	}
	g := grpc.NewServer(opts...)
	return &Server{g: g, desc: desc, open: map[*ServerStream]struct{}{}}
}

// Serve serves ln until Stop; it returns nil after Stop.
func (s *Server) Serve(ln net.Listener) error {
	s.register.Do(func() { s.g.RegisterService(&s.desc, struct{}{}) })
	if err := s.g.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("peer: serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// Stop stops the server: it lets the calls in progress finish until ctx
// ends, and tells every stream's member it is stopping (ErrGoingAway),
// so that the member closes its side once answered; then it closes every
// connection. It is idempotent.
func (s *Server) Stop(ctx context.Context) {
	s.sayGoodbye()
	done := make(chan struct{})
	go func() {
		s.g.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.g.Stop()
		<-done
	}
}

// Client calls one member. It is safe for concurrent use.
type Client struct {
	addr string
	conn *grpc.ClientConn
}

// Dial returns a Client of the member at addr (host:port). It does not
// wait for a connection: the first call makes one. With tc (which
// CheckTLS accepts) it speaks TLS 1.3 or later, presents tc's client
// certificate, and trusts the member only if its certificate chains to
// tc's RootCAs (unless tc verifies chains itself) and names addr's host;
// a nil tc dials plain HTTP/2.
func Dial(addr string, tc *tls.Config) (*Client, error) {
	creds := insecure.NewCredentials()
	if tc != nil {
		var err error
		if creds, err = clientCreds(tc, addr); err != nil {
			return nil, err
		}
	}
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(
			grpc.ForceCodecV2(raw{}),
			grpc.MaxCallRecvMsgSize(MaxMessage),
			grpc.MaxCallSendMsgSize(MaxMessage),
		),
		grpc.WithInitialWindowSize(windowSize),
		grpc.WithInitialConnWindowSize(windowSize),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: MaxBackoff},
			MinConnectTimeout: time.Second,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("peer: dial %s: %w", addr, err)
	}
	return &Client{addr: addr, conn: conn}, nil
}

// Addr returns the member's address.
func (c *Client) Addr() string { return c.addr }

// Call calls method on the member with req and returns its reply. An
// error matches ErrUnreachable, ErrRemote or ctx.Err().
func (c *Client) Call(ctx context.Context, method string, req []byte) ([]byte, error) {
	var rep []byte
	err := c.conn.Invoke(ctx, "/"+serviceName+"/"+method, &req, &rep)
	if err == nil {
		return rep, nil
	}
	st, _ := status.FromError(err)
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("peer: call %s on %s: %w", method, c.addr, ctx.Err())
	case st.Code() == codes.DeadlineExceeded && hasDeadline(ctx):
		// The member ran out of the caller's deadline (gRPC sends it along)
		// and said so a moment before the caller's own timer fired.
		return nil, fmt.Errorf("peer: call %s on %s: %w", method, c.addr, context.DeadlineExceeded)
	case st.Code() == codes.Aborted:
		return nil, fmt.Errorf("%w: %s on %s: %s", ErrRemote, method, c.addr, st.Message())
	case st.Code() == codes.Unimplemented:
		return nil, fmt.Errorf("%w: %s on %s: %s", ErrRemote, method, c.addr, strings.TrimSpace(st.Message()))
	}
	return nil, fmt.Errorf("%w: %s on %s: %s: %s", ErrUnreachable, method, c.addr, st.Code(), st.Message())
}

// hasDeadline reports whether ctx has a deadline.
func hasDeadline(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok
}

// Close closes the connection; calls in progress fail.
func (c *Client) Close() error { return c.conn.Close() }
