// Package proc starts the peers' server processes and takes them down: each
// child runs in its own process group with a parent-death signal, so that
// nothing outlives the suite, and its CPU time is read from /proc.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options says how to start a child.
type Options struct {
	Name string   // for messages
	Path string   // the executable
	Args []string // its arguments
	Dir  string   // its working directory; empty: ours
	Env  []string // added to our environment
	// WaitAddr makes Start wait for a stderr line holding "listening" and
	// "addr=HOST:PORT" (ratelimitd's log line; the suite's own servers
	// print the same) and return that address.
	WaitAddr bool
	// StartTimeout bounds the wait for the address; 0 means 30s.
	StartTimeout time.Duration
}

// Process is a running child.
type Process struct {
	name string
	cmd  *exec.Cmd
	out  *lineWriter
	done chan struct{} // closed when the child has exited
	err  error         // Wait's answer, set before done is closed

	stopOnce sync.Once
}

var addrRE = regexp.MustCompile(`addr="?([0-9.]+:[0-9]+)`)

// Start starts a child in its own process group, with SIGKILL as its
// parent-death signal; ctx ending kills the whole group.
func Start(ctx context.Context, o Options) (*Process, string, error) {
	if o.StartTimeout == 0 {
		o.StartTimeout = 30 * time.Second
	}
	cmd := exec.CommandContext(ctx, o.Path, o.Args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), o.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return killGroup(cmd, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	p := &Process{name: o.Name, cmd: cmd, done: make(chan struct{})}
	p.out = newLineWriter(o.WaitAddr)
	cmd.Stdout = p.out
	cmd.Stderr = p.out
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("%s: start %s: %w", o.Name, o.Path, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if !o.WaitAddr {
		return p, "", nil
	}
	t := time.NewTimer(o.StartTimeout)
	defer t.Stop()
	select {
	case addr := <-p.out.addr:
		return p, addr, nil
	case <-p.done:
		return nil, "", fmt.Errorf("%s exited before listening (%v); its last output:\n%s", o.Name, p.err, p.Tail())
	case <-t.C:
		_ = p.Stop(time.Second)
		return nil, "", fmt.Errorf("%s did not log its listening address within %v; its last output:\n%s", o.Name, o.StartTimeout, p.Tail())
	case <-ctx.Done():
		_ = p.Stop(time.Second)
		return nil, "", ctx.Err()
	}
}

// PID returns the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Name returns the name given at Start.
func (p *Process) Name() string { return p.name }

// Exited reports whether the child has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Tail returns the last lines the child wrote.
func (p *Process) Tail() string { return p.out.tail() }

// Stop sends SIGTERM to the child's process group, waits up to grace for
// it to exit, then sends SIGKILL. It returns an error if the child had to
// be killed or exited with a failure; it is safe to call more than once.
func (p *Process) Stop(grace time.Duration) error {
	var err error
	p.stopOnce.Do(func() {
		if p.Exited() {
			if p.err != nil {
				err = fmt.Errorf("%s had exited: %w; last output:\n%s", p.name, p.err, p.Tail())
			}
			return
		}
		_ = killGroup(p.cmd, syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
			var ee *exec.ExitError
			if p.err != nil && !(errors.As(p.err, &ee) && ee.ExitCode() == -1 && isSignal(ee, syscall.SIGTERM)) {
				err = fmt.Errorf("%s: exit after SIGTERM: %w", p.name, p.err)
			}
		case <-t.C:
			_ = killGroup(p.cmd, syscall.SIGKILL)
			<-p.done
			err = fmt.Errorf("%s did not exit within %v of SIGTERM: killed", p.name, grace)
		}
	})
	return err
}

func isSignal(ee *exec.ExitError, sig syscall.Signal) bool {
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// killGroup signals the process group the child leads.
func killGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd.Process == nil {
		return nil
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// Group holds the children of a run so that they are all stopped at the end.
type Group struct {
	mu    sync.Mutex
	procs []*Process
}

// Add registers p to be stopped by StopAll.
func (g *Group) Add(p *Process) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.procs = append(g.procs, p)
}

// StopAll stops every child not yet stopped, the last started first.
func (g *Group) StopAll(grace time.Duration) error {
	g.mu.Lock()
	procs := g.procs
	g.procs = nil
	g.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].Stop(grace); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// lineWriter keeps the last lines a child wrote and spots its listening
// address.
type lineWriter struct {
	mu      sync.Mutex
	partial []byte
	lines   []string // ring of the last maxTail lines
	next    int
	addr    chan string // gets the address once, if wanted
	want    bool
}

const maxTail = 40

func newLineWriter(wantAddr bool) *lineWriter {
	return &lineWriter{addr: make(chan string, 1), want: wantAddr}
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) > 64<<10 { // a child that never ends a line
		w.line(string(w.partial))
		w.partial = w.partial[:0]
	}
	return len(b), nil
}

func (w *lineWriter) line(s string) {
	if len(w.lines) < maxTail {
		w.lines = append(w.lines, s)
	} else {
		w.lines[w.next] = s
		w.next = (w.next + 1) % maxTail
	}
	if w.want && strings.Contains(s, "listening") {
		if m := addrRE.FindStringSubmatch(s); m != nil {
			w.want = false
			w.addr <- m[1]
		}
	}
}

func (w *lineWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := append(append([]string(nil), w.lines[w.next:]...), w.lines[:w.next]...)
	if len(w.partial) > 0 {
		out = append(out, string(w.partial))
	}
	return strings.Join(out, "\n")
}

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const ClockTicks = 100

// CPUSeconds returns the user plus system CPU time process pid has used,
// from /proc/<pid>/stat (utime + stime, 10 ms resolution).
func CPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line; the command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no ')' in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command", len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("proc stat: %w", err)
	}
	return float64(ut+st) / ClockTicks, nil
}

// SelfCPUSeconds returns the user plus system CPU time of this process
// (getrusage RUSAGE_SELF, microsecond resolution).
func SelfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return tv(ru.Utime) + tv(ru.Stime)
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for
// a server that cannot be told to pick one itself.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
