//go:build !linux

package resp

import (
	"errors"
	"net"
)

// Elsewhere than on Linux there are no event loops: every connection is
// served on a goroutine of its own, and the loop's methods are never
// called.

type loop struct{}

var errNoLoop = errors.New("resp: no event loops on this system")

func (s *Server) startLoops(int) []*loop          { return nil }
func defaultLoops() int                           { return 0 }
func detach(net.Conn) int                         { return -1 }
func (s *Server) handOver(*frameConn)             {}
func (lp *loop) wake()                            {}
func (lp *loop) ask()                             {}
func (c *frameConn) readNow([]byte) (int, error)  { return 0, errNoLoop }
func (c *frameConn) writeNow([]byte) (int, error) { return 0, errNoLoop }
func (c *frameConn) shutdown(int)                 {}

func (lp *loop) ended() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

const shutWrite, shutBoth = 1, 2
