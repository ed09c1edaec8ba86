//go:build !linux

package resp

import "net"

// rawIO is Linux's (rawio_linux.go); elsewhere a connection reads and
// writes through net.Conn.
type rawIO struct{}

func newRawIO(net.Conn) *rawIO { return nil }

func (*rawIO) read([]byte) (int, error)  { panic("resp: no raw I/O on this system") }
func (*rawIO) write([]byte) (int, error) { panic("resp: no raw I/O on this system") }
