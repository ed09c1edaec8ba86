//go:build !linux

package sockio

import (
	"net"
	"time"
)

// Socket is Linux's raw I/O of a TCP connection (socket_linux.go).
// Elsewhere there is none: Open always fails, and a connection reads and
// writes its socket through net.Conn.
type Socket struct{}

// Open returns false: raw I/O is Linux's alone.
func Open(net.Conn) (*Socket, bool) { return nil, false }

// Read is never called: Open makes no Socket here.
func (*Socket) Read([]byte) (int, error) { return 0, net.ErrClosed }

// Write is never called: Open makes no Socket here.
func (*Socket) Write([]byte) (int, error) { return 0, net.ErrClosed }

// WriteWithin is never called: Open makes no Socket here.
func (*Socket) WriteWithin([]byte, time.Duration) (int, error) { return 0, net.ErrClosed }

// Unacked returns false: it is told on Linux alone.
func Unacked(net.Conn) (int, bool) { return 0, false }
