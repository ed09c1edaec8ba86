package grpcload

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/rls"
	"github.com/ratelimitd/ratelimitd/bench/internal/load"
)

// serve starts an RLS server on 127.0.0.1:0 with a limit of rpu per hour
// on the key user of the domain bench.
func serve(t *testing.T, rpu int) string {
	t.Helper()
	cfg, err := rls.Parse(rls.File{Name: "bench.yaml", Data: []byte("domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: year, requests_per_unit: " + strconv.Itoa(rpu) + "}\n")})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := actors.Start(context.Background(), actors.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Stop(context.Background()) })
	svc, err := rls.NewService(sys, rls.NewStore(cfg), rls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := rls.NewGRPCServer(svc)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

// TestRun: every call is counted and timed, the CPU read around the
// round; the last answer of a value shows the calls it counted.
func TestRun(t *testing.T) {
	t.Parallel()
	addr := serve(t, 1<<30)
	cpuReads := 0
	tg := &Target{Name: "rls", Addr: addr, Requests: Requests("bench", "user", []string{"a", "b", "c"}),
		CPU: func() (float64, error) { cpuReads++; return float64(cpuReads), nil }}
	c, err := NewClient(tg, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var res load.Result
	Run(context.Background(), c, 200*time.Millisecond, &res, true)
	if res.Err != nil || res.Requests == 0 || int64(len(res.Lat)) != res.Requests || res.Elapsed < 200*time.Millisecond || res.ServerCPU != 1 || cpuReads != 2 {
		t.Fatalf("got %d requests, %d latencies, %v, CPU %v after %d reads, err %v", res.Requests, len(res.Lat), res.Elapsed, res.ServerCPU, cpuReads, res.Err)
	}
	// One more call of each value: together they counted every call
	// exactly. Calls 0, 3, 6, … send "a", and each goroutine's calls (g,
	// g+4, g+8, …) go round the three values, so each value got a third
	// of the calls, give or take two thirds of one per goroutine, and its
	// own.
	total := int64(0)
	for i, v := range []string{"a", "b", "c"} {
		resp, err := c.Call(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		counted := int64(1<<30) - int64(resp.Statuses[0].LimitRemaining)
		if third := res.Requests / 3; counted < third-2 || counted > third+4 {
			t.Errorf("%s's count %d after %d requests over 3 values, want about a third", v, counted, res.Requests)
		}
		total += counted
	}
	if total != res.Requests+3 {
		t.Errorf("the values' counts add up to %d, want the %d requests and 3 more", total, res.Requests)
	}
}

// TestRunStopsOnAnUnexpectedAnswer: an OVER_LIMIT answer fails the round.
func TestRunStopsOnAnUnexpectedAnswer(t *testing.T) {
	t.Parallel()
	addr := serve(t, 5)
	c, err := NewClient(&Target{Name: "tight", Addr: addr, Requests: Requests("bench", "user", []string{"x"})}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var res load.Result
	Run(context.Background(), c, 5*time.Second, &res, false)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "OVER_LIMIT") || res.Requests != 0 {
		t.Errorf("got err %v and %d requests, want the round failed on OVER_LIMIT with nothing added", res.Err, res.Requests)
	}
	if _, err := NewClient(&Target{Name: "none", Addr: addr}, 1, 1); err == nil {
		t.Error("a target without requests: got no error")
	}
}

// TestCallErrors: a call the server refuses fails with its gRPC code and
// message, and the connection goes on serving; a server that closes the
// connection fails the calls on it rather than leaving them waiting.
func TestCallErrors(t *testing.T) {
	t.Parallel()
	addr := serve(t, 1<<30)
	c, err := NewClient(&Target{Name: "rls", Addr: addr, Requests: append(Requests("", "user", []string{"a"}), Requests("bench", "user", []string{"a"})...)}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Call(context.Background(), 0); err == nil || err.Error() != "gRPC status InvalidArgument: domain: must not be empty" {
		t.Errorf("an empty domain: got %v, want InvalidArgument naming the domain", err)
	}
	if resp, err := c.Call(context.Background(), 1); err != nil || resp.Statuses[0].LimitRemaining != 1<<30-1 {
		t.Errorf("the next call: got %v, %v", resp, err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			_, _ = io.ReadFull(nc, make([]byte, 24)) // the preface
			nc.Close()
		}
	}()
	c2, err := NewClient(&Target{Name: "gone", Addr: ln.Addr().String(), Requests: Requests("bench", "user", []string{"a"})}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Call(context.Background(), 0); err == nil {
		t.Error("a server that closed the connection: got no error")
	}
}
