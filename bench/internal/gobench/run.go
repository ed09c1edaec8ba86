package gobench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Invocation is one `go test -bench` run of one package.
type Invocation struct {
	// Pkg is the package, relative to the module root: "./table/".
	Pkg string
	// Bench is the -bench regular expression.
	Bench string
	// Benchtime is -benchtime: "1s", "100x".
	Benchtime string
	// Count is -count (at least 1).
	Count int
	// Short passes -short.
	Short bool
	// Env holds KEY=VALUE pairs added to the child's environment.
	Env []string
	// Timeout is go test's -timeout; the child is killed a minute after
	// it. 0 means 10 minutes.
	Timeout time.Duration
	// Families are the families the output holds, for Summarize.
	Families []Family
}

func (inv Invocation) timeout() time.Duration {
	if inv.Timeout <= 0 {
		return 10 * time.Minute
	}
	return inv.Timeout
}

// Args returns go's arguments: test -run '^$' -bench … PKG.
func (inv Invocation) Args() []string {
	args := []string{"test", "-run", "^$", "-bench", inv.Bench, "-benchmem", "-benchtime", inv.Benchtime, "-count", strconv.Itoa(max(inv.Count, 1))}
	if inv.Short {
		args = append(args, "-short")
	}
	return append(args, "-timeout", inv.timeout().String(), inv.Pkg)
}

// CommandLine returns the command as a shell line, run in the module root.
func (inv Invocation) CommandLine() string {
	var parts []string
	for _, e := range inv.Env {
		k, v, _ := strings.Cut(e, "=")
		parts = append(parts, k+"="+shellQuote(v))
	}
	parts = append(parts, "go")
	for _, a := range inv.Args() {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./=:,+@%-]+$`)

func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Outcome is what one invocation gave.
type Outcome struct {
	Invocation
	// Command is Invocation.CommandLine().
	Command string
	// Wall is the child's wall time, the build of the test binary included.
	Wall time.Duration
	// Output is the parsed output.
	Output Output
	// Summaries are the output's results by family.
	Summaries []Summary
	// Err is why the invocation failed (go test's exit status, a timeout,
	// a benchmark's --- FAIL), with the end of its output; "" if it did not.
	Err string
}

// maxOutput bounds the output kept from one child.
const maxOutput = 8 << 20

// Exec runs inv with the go command goBin in dir (the module root) and
// parses its output; procs is the GOMAXPROCS the benchmarks run with (the
// child inherits ours), for Parse. onLine, if not nil, sees every line of
// the child's output (stdout and stderr, as one stream) as it comes.
//
// The child runs in its own process group with SIGKILL as its parent-death
// signal; ctx ending, or the invocation's timeout plus a minute passing,
// kills the whole group (the test binary included). An Outcome is always
// returned; its Err says what went wrong.
func Exec(ctx context.Context, goBin, dir string, procs int, inv Invocation, onLine func(string)) Outcome {
	o := Outcome{Invocation: inv, Command: inv.CommandLine()}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, inv.timeout()+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, inv.Args()...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), inv.Env...) // Environ sets PWD to dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 10 * time.Second
	pr, pw, err := os.Pipe()
	if err != nil {
		o.Err = err.Error()
		return o
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		o.Err = fmt.Sprintf("start %s: %v", goBin, err)
		return o
	}
	pw.Close()
	var buf bytes.Buffer
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer pr.Close()
		br := bufio.NewReader(pr)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				if buf.Len() < maxOutput {
					buf.WriteString(line)
				}
				if onLine != nil {
					onLine(strings.TrimRight(line, "\r\n"))
				}
			}
			if err != nil {
				return
			}
		}
	}()
	waitErr := cmd.Wait()
	o.Wall = time.Since(start)
	// The pipe closes when the last holder of its write end (the test
	// binary, if orphaned and still running) exits or is killed.
	select {
	case <-readDone:
	case <-time.After(15 * time.Second):
		pr.Close()
		<-readDone
	}
	o.Output, err = Parse(bytes.NewReader(buf.Bytes()), procs)
	if err != nil && waitErr == nil {
		waitErr = err
	}
	o.Summaries = Summarize(o.Output.Results, inv.Families)
	var problems []string
	switch {
	case parent.Err() != nil:
		problems = append(problems, fmt.Sprintf("killed after %s: %v", o.Wall.Round(time.Second), context.Cause(parent)))
	case ctx.Err() != nil:
		problems = append(problems, fmt.Sprintf("killed after %s (its timeout is %s)", o.Wall.Round(time.Second), inv.timeout()))
	case waitErr != nil:
		problems = append(problems, waitErr.Error())
	}
	if len(o.Output.Failed) > 0 {
		problems = append(problems, "--- FAIL: "+strings.Join(o.Output.Failed, ", "))
	}
	if len(problems) == 0 && len(o.Output.Results) == 0 {
		problems = append(problems, "no benchmark result in the output")
	}
	if len(problems) > 0 {
		o.Err = strings.Join(problems, "; ") + "; the output ended with:\n" + tail(buf.String(), 15)
	}
	return o
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
