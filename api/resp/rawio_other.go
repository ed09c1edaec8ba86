//go:build !linux

package resp

import (
	"io"
	"net"
)

// socketIO is Linux's raw I/O there (rawio_linux.go); elsewhere a
// connection reads and writes its socket through net.Conn.
func socketIO(nc net.Conn) io.ReadWriter { return nc }
