package grpcload

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
)

// HTTP/2 (RFC 9113) as far as a gRPC client of unary calls needs it,
// framed here and header blocks by x/net's hpack: x/net's Framer makes a
// new frame for every HEADERS it reads (it reuses DATA frames only), and
// this client is to take as little of the shared cores as it can.
const (
	h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	settingEnablePush        = 0x2
	settingInitialWindowSize = 0x4

	frameHeaderLen = 9
	defaultWindow  = 65535
	// recvWindow is the window this client grants, per call and for the
	// connection: answers are small, so it is given back in large steps.
	recvWindow = 1 << 30
	// maxFrameLen is the largest frame the client accepts (the protocol's
	// default SETTINGS_MAX_FRAME_SIZE, which it does not raise).
	maxFrameLen = 16384
)

// errConnClosed fails the calls of a connection that Close closed.
var errConnClosed = errors.New("grpcload: connection closed")

// h2conn is one HTTP/2 connection carrying unary gRPC calls: callers
// write a call's frames, pre-rendered, under a lock; one reader goroutine
// reads the answers and hands each to its call.
type h2conn struct {
	nc net.Conn

	wmu    sync.Mutex // serializes writes and stream ids
	wbuf   []byte
	nextID uint32

	mu         sync.Mutex
	cond       *sync.Cond // signalled when sendWindow grows or the connection fails
	sendWindow int64      // the server's connection window for our DATA
	calls      map[uint32]*call
	err        error // set once the connection failed

	done chan struct{} // closed when the reader has stopped
}

// call is one unary call in flight, reused by its goroutine.
type call struct {
	ch      chan struct{} // receives when the call is answered or failed
	data    []byte        // the DATA received: gRPC's length prefix and the message
	status  string        // the :status of the answer's headers
	grpc    string        // grpc-status of the trailers
	grpcMsg string        // grpc-message of the trailers
	err     error
}

func newCall() *call { return &call{ch: make(chan struct{}, 1)} }

// dial opens an HTTP/2 connection (prior knowledge, no TLS) to addr and
// starts its reader.
func dial(addr string) (*h2conn, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	cn := &h2conn{nc: nc, nextID: 1, sendWindow: defaultWindow, calls: map[uint32]*call{}, done: make(chan struct{})}
	cn.cond = sync.NewCond(&cn.mu)
	b := []byte(h2Preface)
	b = appendFrameHeader(b, 12, frameSettings, 0, 0)
	b = binary.BigEndian.AppendUint16(b, settingEnablePush)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, settingInitialWindowSize)
	b = binary.BigEndian.AppendUint32(b, recvWindow)
	b = appendFrameHeader(b, 4, frameWindowUpdate, 0, 0)
	b = binary.BigEndian.AppendUint32(b, recvWindow-defaultWindow)
	if _, err := nc.Write(b); err != nil {
		nc.Close()
		return nil, err
	}
	go cn.read()
	return cn, nil
}

// close closes the connection and waits for its reader; the calls in
// flight fail.
func (cn *h2conn) close() error {
	err := cn.nc.Close()
	<-cn.done
	return err
}

// fail records err as the connection's failure, fails every call in
// flight with it, and closes the connection.
func (cn *h2conn) fail(err error) {
	cn.mu.Lock()
	if cn.err == nil {
		cn.err = err
	}
	calls := cn.calls
	cn.calls = map[uint32]*call{}
	cn.cond.Broadcast()
	cn.mu.Unlock()
	for _, cl := range calls {
		cl.err = err
		cl.ch <- struct{}{}
	}
	cn.nc.Close()
}

// appendFrameHeader appends the 9-byte header of a frame.
func appendFrameHeader(b []byte, length int, typ, flags byte, stream uint32) []byte {
	return append(b, byte(length>>16), byte(length>>8), byte(length), typ, flags,
		byte(stream>>24), byte(stream>>16), byte(stream>>8), byte(stream))
}

// rendered is one request as it goes on the wire, with its stream id
// still to fill in: a HEADERS frame and a DATA frame ending the stream.
type rendered struct {
	frames  []byte
	dataAt  int // where the DATA frame starts
	dataLen int // its payload's length (for flow control)
}

// render pre-renders the call of path with the marshalled message msg to
// authority. The header block uses no dynamic table (its fields are
// never indexed), so one rendering serves every connection and call.
func render(authority, path string, msg []byte) rendered {
	var block []byte
	enc := hpack.NewEncoder(byteWriter{&block})
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", authority},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1], Sensitive: true}) // writes to memory
	}
	payload := append([]byte{0}, binary.BigEndian.AppendUint32(nil, uint32(len(msg)))...)
	payload = append(payload, msg...)
	b := appendFrameHeader(nil, len(block), frameHeaders, flagEndHeaders, 0)
	b = append(b, block...)
	r := rendered{dataAt: len(b), dataLen: len(payload)}
	b = appendFrameHeader(b, len(payload), frameData, flagEndStream, 0)
	r.frames = append(b, payload...)
	return r
}

// byteWriter appends what is written to *b.
type byteWriter struct{ b *[]byte }

func (w byteWriter) Write(p []byte) (int, error) {
	*w.b = append(*w.b, p...)
	return len(p), nil
}

// do sends r as a new call on cn and waits for its answer until ctx ends
// (which fails the connection: a call left unanswered would hold its
// stream). cl is reset first; on return it holds the answer.
func (cn *h2conn) do(ctx context.Context, cl *call, r *rendered) error {
	cl.data, cl.status, cl.grpc, cl.grpcMsg, cl.err = cl.data[:0], "", "", "", nil
	cn.mu.Lock()
	for cn.err == nil && cn.sendWindow < int64(r.dataLen) {
		cn.cond.Wait()
	}
	if err := cn.err; err != nil {
		cn.mu.Unlock()
		return err
	}
	cn.sendWindow -= int64(r.dataLen)
	cn.mu.Unlock()

	cn.wmu.Lock()
	id := cn.nextID
	cn.nextID += 2
	cn.mu.Lock()
	err := cn.err
	if err == nil {
		cn.calls[id] = cl
	}
	cn.mu.Unlock()
	if err != nil {
		cn.wmu.Unlock()
		return err
	}
	b := append(cn.wbuf[:0], r.frames...)
	binary.BigEndian.PutUint32(b[5:], id)
	binary.BigEndian.PutUint32(b[r.dataAt+5:], id)
	_, err = cn.nc.Write(b)
	cn.wbuf = b
	cn.wmu.Unlock()
	if err != nil {
		cn.fail(err)
	}
	select {
	case <-cl.ch:
	case <-ctx.Done():
		cn.fail(fmt.Errorf("stream %d: %w", id, ctx.Err()))
		<-cl.ch
	}
	if cl.err != nil {
		cn.mu.Lock()
		failed := cn.err != nil
		cn.mu.Unlock()
		if failed {
			<-cn.done // the reader touches no call once it has stopped
		}
	}
	return cl.err
}

// read reads frames until the connection fails, handing answers to their
// calls and answering SETTINGS and PING.
func (cn *h2conn) read() {
	defer close(cn.done)
	br := bufio.NewReaderSize(cn.nc, 64<<10)
	dec := hpack.NewDecoder(4096, nil)
	var cur *call // the call whose header fields are being decoded
	dec.SetEmitFunc(func(f hpack.HeaderField) {
		if cur == nil {
			return
		}
		switch f.Name {
		case ":status":
			cur.status = f.Value
		case "grpc-status":
			cur.grpc = f.Value
		case "grpc-message":
			cur.grpcMsg = f.Value
		}
	})
	var hdr [frameHeaderLen]byte
	payload := make([]byte, maxFrameLen)
	var recvd int64  // DATA received since the last WINDOW_UPDATE
	var block []byte // a header block continued in CONTINUATION frames
	var blockStream uint32
	var blockEnd bool
	err := func() error {
		for {
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				return err
			}
			n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
			typ, flags := hdr[3], hdr[4]
			stream := binary.BigEndian.Uint32(hdr[5:]) &^ (1 << 31)
			if n > maxFrameLen {
				return fmt.Errorf("a frame of %d bytes, more than %d", n, maxFrameLen)
			}
			p := payload[:n]
			if _, err := io.ReadFull(br, p); err != nil {
				return err
			}
			if block != nil && typ != frameContinuation {
				return errors.New("a header block not continued")
			}
			switch typ {
			case frameData:
				recvd += int64(n)
				if flags&flagPadded != 0 {
					if n < 1 || int(p[0]) >= n {
						return errors.New("bad DATA padding")
					}
					p = p[1 : n-int(p[0])]
				}
				if cl := cn.lookup(stream); cl != nil {
					cl.data = append(cl.data, p...)
				}
				if flags&flagEndStream != 0 {
					cn.finish(stream, nil)
				}
				if recvd >= recvWindow/2 {
					if err := cn.write(appendWindowUpdate(nil, 0, uint32(recvd))); err != nil {
						return err
					}
					recvd = 0
				}
			case frameHeaders:
				if flags&flagPadded != 0 {
					if n < 1 || int(p[0]) >= n {
						return errors.New("bad HEADERS padding")
					}
					p = p[1 : n-int(p[0])]
				}
				if flags&flagPriority != 0 {
					if len(p) < 5 {
						return errors.New("short HEADERS priority")
					}
					p = p[5:]
				}
				if flags&flagEndHeaders == 0 {
					block, blockStream, blockEnd = append([]byte(nil), p...), stream, flags&flagEndStream != 0
					continue
				}
				if err := cn.headers(dec, &cur, stream, p, flags&flagEndStream != 0); err != nil {
					return err
				}
			case frameContinuation:
				if block == nil || stream != blockStream {
					return errors.New("an unexpected CONTINUATION")
				}
				block = append(block, p...)
				if flags&flagEndHeaders == 0 {
					continue
				}
				b := block
				block = nil
				if err := cn.headers(dec, &cur, blockStream, b, blockEnd); err != nil {
					return err
				}
			case frameRSTStream:
				code := uint32(0)
				if len(p) >= 4 {
					code = binary.BigEndian.Uint32(p)
				}
				cn.finish(stream, fmt.Errorf("stream %d reset by the server, code %d", stream, code))
			case frameSettings:
				if flags&flagAck != 0 {
					continue
				}
				for q := p; len(q) >= 6; q = q[6:] {
					if binary.BigEndian.Uint16(q) == settingInitialWindowSize && binary.BigEndian.Uint32(q[2:]) < 1<<10 {
						// Every request fits in a call's window of 1 KiB; the
						// servers announce far more.
						return fmt.Errorf("the server's call window of %d bytes is too small", binary.BigEndian.Uint32(q[2:]))
					}
				}
				if err := cn.write(appendFrameHeader(nil, 0, frameSettings, flagAck, 0)); err != nil {
					return err
				}
			case framePing:
				if flags&flagAck == 0 {
					if err := cn.write(append(appendFrameHeader(nil, len(p), framePing, flagAck, 0), p...)); err != nil {
						return err
					}
				}
			case frameWindowUpdate:
				if stream == 0 && len(p) >= 4 {
					cn.mu.Lock()
					cn.sendWindow += int64(binary.BigEndian.Uint32(p) &^ (1 << 31))
					cn.cond.Broadcast()
					cn.mu.Unlock()
				}
			case frameGoAway:
				code := uint32(0)
				if len(p) >= 8 {
					code = binary.BigEndian.Uint32(p[4:])
				}
				return fmt.Errorf("GOAWAY from the server, code %d", code)
			}
		}
	}()
	cn.mu.Lock()
	closed := cn.err == nil && errors.Is(err, net.ErrClosed)
	cn.mu.Unlock()
	if closed {
		err = errConnClosed
	}
	cn.fail(err)
}

// headers decodes a complete header block of stream into its call, and
// ends the call if the block ends the stream (the trailers).
func (cn *h2conn) headers(dec *hpack.Decoder, cur **call, stream uint32, block []byte, end bool) error {
	*cur = cn.lookup(stream)
	_, err := dec.Write(block) // the block must be decoded whoever it is for: the table is shared
	*cur = nil
	if err != nil {
		return fmt.Errorf("stream %d: headers: %w", stream, err)
	}
	if err := dec.Close(); err != nil {
		return fmt.Errorf("stream %d: headers: %w", stream, err)
	}
	if end {
		cn.finish(stream, nil)
	}
	return nil
}

// lookup returns the call of stream, or nil.
func (cn *h2conn) lookup(stream uint32) *call {
	cn.mu.Lock()
	cl := cn.calls[stream]
	cn.mu.Unlock()
	return cl
}

// finish ends the call of stream with err.
func (cn *h2conn) finish(stream uint32, err error) {
	cn.mu.Lock()
	cl := cn.calls[stream]
	delete(cn.calls, stream)
	cn.mu.Unlock()
	if cl != nil {
		cl.err = err
		cl.ch <- struct{}{}
	}
}

// write writes b (control frames) between the calls' writes.
func (cn *h2conn) write(b []byte) error {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	_, err := cn.nc.Write(b)
	return err
}

func appendWindowUpdate(b []byte, stream, inc uint32) []byte {
	return binary.BigEndian.AppendUint32(appendFrameHeader(b, 4, frameWindowUpdate, 0, stream), inc)
}

// message returns the answer's message after checking the call's HTTP
// status, gRPC status and length prefix.
func (cl *call) message() ([]byte, error) {
	switch {
	case cl.status != "200":
		return nil, fmt.Errorf("HTTP status %q", cl.status)
	case cl.grpc != "0":
		return nil, fmt.Errorf("gRPC status %s: %s", grpcCodeName(cl.grpc), cl.grpcMsg)
	case len(cl.data) < 5 || cl.data[0] != 0 || int(binary.BigEndian.Uint32(cl.data[1:])) != len(cl.data)-5:
		return nil, fmt.Errorf("a malformed answer of %d bytes", len(cl.data))
	}
	return cl.data[5:], nil
}

// grpcCodeName names a grpc-status value, as the gRPC client's errors do.
func grpcCodeName(s string) string {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return strconv.Quote(s)
	}
	return codes.Code(n).String()
}
