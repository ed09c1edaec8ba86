package resp_test

import (
	"context"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api/resp"
	"github.com/ratelimitd/ratelimitd/table"
)

// constChecker allows every check, allocating nothing and keeping nothing.
type constChecker struct{}

func (constChecker) Check(_ context.Context, req table.Request) (table.Decision, error) {
	return table.Decision{Allowed: true, Count: 1, Limit: req.Limit, Remaining: req.Limit - 1, ResetAfter: time.Second}, nil
}

func (constChecker) Refund(_ context.Context, req table.Request) (table.Decision, error) {
	return table.Decision{Allowed: true, Limit: req.Limit, Remaining: req.Limit, ResetAfter: time.Second}, nil
}

// TestServingAllocates counts the heap allocations of the whole process
// while a connection pipelines commands, 100 per write, its replies read
// into one buffer: serving a command allocates nothing but what the check
// itself needs (the copy of its id that a Checker may keep).
// Not parallel: the count is the whole process's.
func TestServingAllocates(t *testing.T) {
	_, addr := startServer(t, resp.Options{Checker: constChecker{}})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = nc.Close() }()
	_ = nc.SetDeadline(time.Now().Add(time.Minute))
	for _, tc := range []struct {
		name string
		cmd  string
		max  float64 // allocations per command
	}{
		{"PING", frame("PING"), 0.02},
		{"CL.THROTTLE", frame("CL.THROTTLE", "user:1", "99", "100", "60", "1"), 1.02},
	} {
		batch := []byte(strings.Repeat(tc.cmd, 100))
		// The replies' length, from a first round.
		if _, err := nc.Write(batch); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64<<10)
		n := 0
		for {
			m, err := nc.Read(buf[n:])
			if err != nil {
				t.Fatal(err)
			}
			n += m
			if strings.Count(string(buf[:n]), firstLine(tc.name)) == 100 {
				break
			}
		}
		replies := buf[:n]
		const rounds = 100
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range rounds {
			if _, err := nc.Write(batch); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(nc, replies); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		per := float64(after.Mallocs-before.Mallocs) / (rounds * 100)
		t.Logf("%s: %.4f allocations per command", tc.name, per)
		if per > tc.max {
			t.Errorf("%s: %.4f allocations per command, want at most %.2f", tc.name, per, tc.max)
		}
	}
}

// firstLine is how each reply to the command named begins.
func firstLine(name string) string {
	if name == "PING" {
		return "+PONG\r\n"
	}
	return "*5\r\n"
}
