// Package sockio reads and writes a plain TCP connection's socket by the
// raw read(2) and write(2) of its non-blocking descriptor, inside the
// runtime poller's wait (syscall.RawConn, which keeps the connection's
// deadlines): the same calls net.Conn makes, without entering and leaving
// the scheduler's syscall state around each. The descriptor is
// non-blocking, so neither call ever waits (EAGAIN goes back to the
// poller); a write holds its thread only while the kernel copies what the
// socket's buffer takes.
//
// What it saves: with threads in system calls most of the time, the
// runtime's monitor thread keeps waking to watch them, and the kernel
// switches tasks more. Measured with redis-benchmark (50 connections,
// pipelines of 1) against the Redis protocol server reading through
// net.Conn: the monitor's share of the server's CPU samples fell from
// 8.0% to 0.9%, the kernel's task switches from 11.7% to 5.4%; +14%
// requests/s and −10% server CPU per request (medians of 4 alternating
// runs). For the daemon's HTTP connections, GET /check_rate from 64
// keep-alive connections, two daemons (with and without it) side by side
// in alternating rounds: −7.9% and −8.8% server CPU per request, +5.0% and
// +5.4% requests/s (medians; two runs, each 6 rounds of 3 s per daemon,
// the sides swapped in the second).
//
// Open gives the raw I/O of a connection, Wrap a net.Conn that uses it.
// Both fall back to the connection itself where raw I/O does not apply:
// a connection that is not a *net.TCPConn (TLS, a pipe, a Unix socket)
// and every system but Linux.
//
// Unacked tells how many bytes sent on a TCP connection its peer has not
// acknowledged (SIOCOUTQ, Linux only): a server that closes a connection
// while input is unread resets it, and the peer then loses what it has
// not yet received, unless every byte is acknowledged already.
package sockio
