package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrGoingAway is what Stream.Recv returns when the member is stopping:
// it still answers what it received, and takes nothing more on the
// stream; its caller closes its side once it has its answers.
var ErrGoingAway = errors.New("peer: member stopping")

// errEmpty refuses an empty message, which means goodbye on a stream.
var errEmpty = errors.New("peer: empty stream message")

// StreamHandler serves one stream a member opened: it reads the member's
// messages with Recv and answers with Send, until Recv reports io.EOF
// (the member closed its side, and the handler should return nil) or
// another error. Its return ends the stream; an error reaches the member
// as ErrRemote.
type StreamHandler func(st *ServerStream) error

// ServerStream is the server's side of a stream. Recv is for the
// handler's goroutine only; Send may be called from any goroutine.
type ServerStream struct {
	ss  grpc.ServerStream
	mu  sync.Mutex // serializes Send and the goodbye
	buf []byte
}

// Context returns the stream's context, done when the stream ends.
func (st *ServerStream) Context() context.Context { return st.ss.Context() }

// Recv returns the next message, valid until the next Recv; io.EOF when
// the member closed its side.
func (st *ServerStream) Recv() ([]byte, error) {
	st.buf = st.buf[:0]
	if err := st.ss.RecvMsg(&st.buf); err != nil {
		return nil, err
	}
	return st.buf, nil
}

// Send sends msg, which must not be empty and must not change afterwards
// (the transport writes it later, without a copy).
func (st *ServerStream) Send(msg []byte) error {
	if len(msg) == 0 {
		return errEmpty
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.ss.SendMsg(&msg)
}

// goodbye tells the member that this server is stopping.
func (st *ServerStream) goodbye() {
	st.mu.Lock()
	defer st.mu.Unlock()
	var empty []byte
	_ = st.ss.SendMsg(&empty)
}

// HandleStream serves the streams of method with h. It must be called
// before Serve.
func (s *Server) HandleStream(method string, h StreamHandler) {
	s.desc.Streams = append(s.desc.Streams, grpc.StreamDesc{
		StreamName:    method,
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(_ any, ss grpc.ServerStream) error {
			// The headers at once: the member's Open returns when they come,
			// and what it sends from then on is never replayed.
			if err := ss.SendHeader(nil); err != nil {
				return err
			}
			st := &ServerStream{ss: ss}
			if !s.track(st) {
				st.goodbye()
			}
			defer s.untrack(st)
			if err := h(st); err != nil {
				return status.Error(codes.Aborted, err.Error())
			}
			return nil
		},
	})
}

// track adds st to the open streams, and reports false if the server is
// stopping already.
func (s *Server) track(st *ServerStream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open[st] = struct{}{}
	return !s.stopping
}

func (s *Server) untrack(st *ServerStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open, st)
}

// sayGoodbye marks the server stopping and tells every open stream.
func (s *Server) sayGoodbye() {
	s.mu.Lock()
	s.stopping = true
	open := make([]*ServerStream, 0, len(s.open))
	for st := range s.open {
		open = append(open, st)
	}
	s.mu.Unlock()
	for _, st := range open {
		st.goodbye()
	}
}

// Stream is a member's stream, opened by Open: Send and Recv carry
// messages both ways. Send, CloseSend and Close may be called from any
// goroutine; Recv from one goroutine at a time.
type Stream struct {
	cs     grpc.ClientStream
	cancel context.CancelFunc
	what   string
	mu     sync.Mutex // serializes Send and CloseSend
	buf    []byte
}

// Open opens a stream of method on the member, within ctx; the stream
// lives until Close (or until it breaks), whatever ctx does afterwards.
// An error matches ErrUnreachable, ErrRemote or ctx.Err().
func (c *Client) Open(ctx context.Context, method string) (*Stream, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	s := &Stream{cancel: cancel, what: method + " on " + c.addr}
	cs, err := c.conn.NewStream(sctx, &grpc.StreamDesc{StreamName: method, ServerStreams: true, ClientStreams: true}, "/"+serviceName+"/"+method)
	if err == nil {
		var md map[string][]string
		if md, err = cs.Header(); err == nil && md == nil {
			// The stream failed before its headers: RecvMsg has its status.
			var b []byte
			if err = cs.RecvMsg(&b); err == nil {
				err = io.ErrUnexpectedEOF
			}
		}
	}
	if !stop() && err == nil {
		err = ctx.Err() // ctx ended as the stream opened: it is cancelled
	}
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("peer: open %s: %w", s.what, ctx.Err())
		}
		return nil, s.fault(err)
	}
	s.cs = cs
	return s, nil
}

// fault maps a stream's error.
func (s *Stream) fault(err error) error {
	st, _ := status.FromError(err)
	switch {
	case err == io.EOF:
		return fmt.Errorf("%w: stream %s ended", ErrUnreachable, s.what)
	case st.Code() == codes.Aborted, st.Code() == codes.Unimplemented:
		return fmt.Errorf("%w: stream %s: %s", ErrRemote, s.what, st.Message())
	}
	return fmt.Errorf("%w: stream %s: %s: %s", ErrUnreachable, s.what, st.Code(), st.Message())
}

// Send sends msg, which must not be empty and must not change afterwards
// (the transport writes it later, without a copy). An error (matching
// ErrUnreachable) means msg was not sent: the stream is broken.
func (s *Stream) Send(msg []byte) error {
	if len(msg) == 0 {
		return errEmpty
	}
	s.mu.Lock()
	err := s.cs.SendMsg(&msg)
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: stream %s: %v", ErrUnreachable, s.what, err)
	}
	return nil
}

// Recv returns the next message, valid until the next Recv. An error
// matches ErrGoingAway (the member is stopping: the stream still carries
// the answers of what was sent), ErrUnreachable or ErrRemote (the stream
// is over).
func (s *Stream) Recv() ([]byte, error) {
	s.buf = s.buf[:0]
	if err := s.cs.RecvMsg(&s.buf); err != nil {
		return nil, s.fault(err)
	}
	if len(s.buf) == 0 {
		return nil, fmt.Errorf("%w: stream %s", ErrGoingAway, s.what)
	}
	return s.buf, nil
}

// CloseSend closes the sending side: the member's handler sees io.EOF
// after what was sent.
func (s *Stream) CloseSend() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.cs.CloseSend()
}

// Close ends the stream at once: what was sent may or may not have been
// handled. It is idempotent.
func (s *Stream) Close() { s.cancel() }
