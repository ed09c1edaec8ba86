package proc

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := "1234 (my (weird) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 4 0 100 0 0"
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 4.0; got != want { // (250 + 150) ticks / 100
		t.Errorf("parseStatCPU = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "1234 cmd S 1", "1 (x) S 1 2 3"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q): no error", bad)
		}
	}
}

func TestCPUSecondsOfSelf(t *testing.T) {
	end := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(end) { // burn some CPU
	}
	got, err := CPUSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got <= 0 || got > SelfCPUSeconds()+0.05 {
		t.Errorf("CPUSeconds(self) = %v, SelfCPUSeconds = %v", got, SelfCPUSeconds())
	}
}

func TestLineWriter(t *testing.T) {
	w := newLineWriter(true)
	for _, chunk := range []string{"starting\ntime=x level=INFO msg=liste", "ning addr=127.0.0.1:4321 x=1\n", "tail without newline"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case addr := <-w.addr:
		if addr != "127.0.0.1:4321" {
			t.Errorf("addr = %q, want 127.0.0.1:4321", addr)
		}
	default:
		t.Fatal("no address found")
	}
	if tail := w.tail(); !strings.HasPrefix(tail, "starting\n") || !strings.HasSuffix(tail, "tail without newline") {
		t.Errorf("tail = %q", tail)
	}
	for i := range 100 {
		_, _ = w.Write([]byte("line " + string(rune('a'+i%26)) + "\n"))
	}
	if n := strings.Count(w.tail(), "\n") + 1; n > maxTail+1 {
		t.Errorf("tail holds %d lines, want at most %d", n, maxTail+1)
	}
}

func TestStartStop(t *testing.T) {
	ctx := context.Background()
	// A child that announces an address, then waits; its own child (sleep)
	// must go with it: Stop signals the whole process group.
	p, addr, err := Start(ctx, Options{
		Name: "sh", Path: "/bin/sh", WaitAddr: true, StartTimeout: 10 * time.Second,
		Args: []string{"-c", `echo "level=INFO msg=listening addr=127.0.0.1:5555" >&2; sleep 30 & wait`},
	})
	if err != nil {
		t.Fatal(err)
	}
	if addr != "127.0.0.1:5555" {
		t.Errorf("addr = %q", addr)
	}
	if _, err := CPUSeconds(p.PID()); err != nil {
		t.Errorf("CPUSeconds(child): %v", err)
	}
	t0 := time.Now()
	if err := p.Stop(5 * time.Second); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if !p.Exited() {
		t.Error("child still running after Stop")
	}
	if took := time.Since(t0); took > 4*time.Second {
		t.Errorf("Stop took %v", took)
	}
	if err := p.Stop(time.Second); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestStartFailsWithoutAddress(t *testing.T) {
	_, _, err := Start(context.Background(), Options{Name: "quitter", Path: "/bin/sh", WaitAddr: true, Args: []string{"-c", "echo oops >&2; exit 3"}})
	if err == nil || !strings.Contains(err.Error(), "oops") {
		t.Errorf("Start of a child that exits: %v, want an error showing its output", err)
	}
	_, _, err = Start(context.Background(), Options{Name: "silent", Path: "/bin/sh", WaitAddr: true, StartTimeout: 200 * time.Millisecond, Args: []string{"-c", "sleep 30"}})
	if err == nil || !strings.Contains(err.Error(), "did not log") {
		t.Errorf("Start of a silent child: %v, want a timeout", err)
	}
}

func TestGroupStopsEveryChild(t *testing.T) {
	var g Group
	var ps []*Process
	for range 3 {
		p, _, err := Start(context.Background(), Options{Name: "sleeper", Path: "/bin/sleep", Args: []string{"30"}})
		if err != nil {
			t.Fatal(err)
		}
		g.Add(p)
		ps = append(ps, p)
	}
	if err := g.StopAll(5 * time.Second); err != nil {
		t.Errorf("StopAll: %v", err)
	}
	for i, p := range ps {
		if !p.Exited() {
			t.Errorf("child %d still running", i)
		}
	}
}

func TestFreePort(t *testing.T) {
	p, err := FreePort()
	if err != nil || p <= 0 || p > 65535 {
		t.Errorf("FreePort = %d, %v", p, err)
	}
}
