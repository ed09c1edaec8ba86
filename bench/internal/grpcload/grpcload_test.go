package grpcload

import (
	"context"
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
	resp, err := c.Call(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	// Calls 0, 3, 6, … send "a": about a third of them, and this one.
	if counted := int64(1<<30) - int64(resp.Statuses[0].LimitRemaining); counted < res.Requests/3 || counted > res.Requests/3+2 {
		t.Errorf("a's count %d after %d requests over 3 values, want about a third", counted, res.Requests)
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
