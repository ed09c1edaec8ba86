// Package load is the suite's HTTP load client: a fixed number of
// goroutines, each sending its next request as soon as the previous one is
// answered, over at most that many keep-alive connections, for a fixed
// time. Every peer is driven by the same client with the same settings, in
// alternating short rounds, so that a change in background load biases
// none of them.
package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/proc"
)

// MaxPerGoroutine bounds the requests one goroutine sends in one round,
// whatever the round's length.
const MaxPerGoroutine = 5_000_000

// Target is one peer's endpoint and the requests to send it.
type Target struct {
	Name   string
	Base   string   // "http://127.0.0.1:PORT"
	Method string   // GET or POST
	Paths  []string // GET: request i goes to Base+Paths[i%len]; POST: Paths[0]
	Bodies [][]byte // POST: request i sends Bodies[i%len]
	// ChecksPerRequest is how many limit checks one request makes (1, or
	// the size of a batch).
	ChecksPerRequest int
	// CPU returns the CPU seconds used so far by the processes serving
	// this target (nil: not measured).
	CPU func() (float64, error)
	// OK reports whether an answer (status, body) is a success; nil
	// means status 200 only. The body is read only when OK is set.
	OK func(status int, body []byte) bool
}

// Result accumulates what rounds against one target measured.
type Result struct {
	Requests  int64
	Elapsed   time.Duration
	Lat       []time.Duration // one per completed request, sorted by Finish
	ServerCPU float64         // seconds, from Target.CPU
	ClientCPU float64         // seconds of this process, during the rounds
	Err       error           // the first failure; the target's numbers are void
}

// ReqPerSec returns the requests per second over all rounds.
func (r *Result) ReqPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// Finish sorts the latencies.
func (r *Result) Finish() { slices.Sort(r.Lat) }

// Quantile returns the q-quantile latency of sorted latencies.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * q)
	return sorted[i]
}

// NewTransport returns a transport holding at most conns connections, all
// kept alive between requests and rounds.
func NewTransport(conns int) *http.Transport {
	return &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}

// Run sends requests to t from conns goroutines over tr for d (or until
// ctx ends), adding what it measured to into. cpu is read before and
// after. A failed request stops the round and sets into.Err. Latencies
// are kept only if record is set (not during a warm-up).
func Run(ctx context.Context, tr *http.Transport, t *Target, conns int, d time.Duration, into *Result, record bool) {
	if into.Err != nil {
		return
	}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var stop atomic.Bool
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		stop.Store(true)
	}
	lat := make([][]time.Duration, conns)
	counts := make([]int64, conns)
	var wg sync.WaitGroup

	var cpu0 float64
	if t.CPU != nil {
		c, err := t.CPU()
		if err != nil {
			into.Err = fmt.Errorf("%s: server CPU: %w", t.Name, err)
			return
		}
		cpu0 = c
	}
	self0 := proc.SelfCPUSeconds()
	start := time.Now()
	deadline := start.Add(d)
	for g := range conns {
		wg.Go(func() {
			var mine []time.Duration
			if record {
				mine = make([]time.Duration, 0, 1<<12)
			}
			n := int64(0)
			for i := g; n < MaxPerGoroutine && !stop.Load() && ctx.Err() == nil; i += conns {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				if err := do(client, t, i); err != nil {
					fail(err)
					break
				}
				if record {
					mine = append(mine, time.Since(t0))
				}
				n++
			}
			lat[g] = mine
			counts[g] = n
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	self1 := proc.SelfCPUSeconds()
	if firstErr != nil {
		into.Err = fmt.Errorf("%s: %w", t.Name, firstErr)
		return
	}
	if err := ctx.Err(); err != nil {
		into.Err = fmt.Errorf("%s: %w", t.Name, err)
		return
	}
	if t.CPU != nil {
		c, err := t.CPU()
		if err != nil {
			into.Err = fmt.Errorf("%s: server CPU: %w", t.Name, err)
			return
		}
		into.ServerCPU += c - cpu0
	}
	into.ClientCPU += self1 - self0
	into.Elapsed += elapsed
	for g := range conns {
		into.Requests += counts[g]
		into.Lat = append(into.Lat, lat[g]...)
	}
}

// do sends request number i of t and reads the whole answer.
func do(client *http.Client, t *Target, i int) error {
	var req *http.Request
	var err error
	switch t.Method {
	case http.MethodGet:
		req, err = http.NewRequest(http.MethodGet, t.Base+t.Paths[i%len(t.Paths)], nil)
	case http.MethodPost:
		req, err = http.NewRequest(http.MethodPost, t.Base+t.Paths[0], bytes.NewReader(t.Bodies[i%len(t.Bodies)]))
		if err == nil {
			req.Header["Content-Type"] = []string{"application/json"}
		}
	default:
		err = errors.New("method " + t.Method)
	}
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if t.OK == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s %s: status %s", req.Method, req.URL, resp.Status)
		}
		return err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if !t.OK(resp.StatusCode, body) {
		return fmt.Errorf("%s %s: status %s, body %.300s", req.Method, req.URL, resp.Status, body)
	}
	return nil
}

// Plan is a side-by-side comparison: every target gets Rounds rounds of
// PerRound, the order rotating each round, after a warm-up of Warmup each.
type Plan struct {
	Conns    int
	Rounds   int
	PerRound time.Duration
	Warmup   time.Duration
}

// Compare runs p over targets and returns one Result per target, in order.
// A target that fails keeps its error and is skipped for the remaining
// rounds; the others go on.
func Compare(ctx context.Context, p Plan, targets []*Target) []*Result {
	trs := make([]*http.Transport, len(targets))
	res := make([]*Result, len(targets))
	for i := range targets {
		trs[i] = NewTransport(p.Conns)
		res[i] = &Result{}
		defer trs[i].CloseIdleConnections()
	}
	for i, t := range targets {
		warm := &Result{}
		Run(ctx, trs[i], t, p.Conns, p.Warmup, warm, false)
		res[i].Err = warm.Err
	}
	for r := range p.Rounds {
		for k := range targets {
			i := (k + r) % len(targets)
			Run(ctx, trs[i], targets[i], p.Conns, p.PerRound, res[i], true)
		}
	}
	for _, r := range res {
		r.Finish()
	}
	return res
}
