package sockio

import (
	"io"
	"net"
)

// Conn is a TCP connection whose Read and Write go through its Socket;
// every other method, CloseWrite, ReadFrom and the deadlines included, is
// the *net.TCPConn's own. The deadlines bound the raw reads and writes as
// they bound the connection's.
type Conn struct {
	*net.TCPConn
	s *Socket
}

// Wrap returns nc reading and writing through its Socket (a *Conn) when
// Open gives one, else nc itself.
func Wrap(nc net.Conn) net.Conn {
	s, ok := Open(nc)
	if !ok {
		return nc
	}
	return &Conn{TCPConn: nc.(*net.TCPConn), s: s}
}

// Read implements io.Reader by Socket.Read.
func (c *Conn) Read(b []byte) (int, error) { return c.s.Read(b) }

// Write implements io.Writer by Socket.Write.
func (c *Conn) Write(b []byte) (int, error) { return c.s.Write(b) }

// Socket returns the raw I/O c reads and writes through.
func (c *Conn) Socket() *Socket { return c.s }

var _ io.ReadWriter = (*Socket)(nil)
