package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/table"
)

// benchIDs is the number of distinct ids the benchmarks spread checks over.
const benchIDs = 1000

// benchQuery is the check_rate query of id number i: a long window and a
// limit no benchmark reaches, so every check is allowed.
func benchQuery(i int) string {
	return fmt.Sprintf("/check_rate?id=user-%d&scale=%s&limit=1000000000000", i, apitest.LongScale)
}

// discardWriter is a reusable http.ResponseWriter that keeps nothing but
// the status, so a benchmark measures the handler and not the recorder.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }

func BenchmarkCheckRateGET(b *testing.B) {
	h, err := api.NewHandler(actorstest.StartSystem(b, actors.Config{}), api.Options{})
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]*http.Request, benchIDs)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, benchQuery(i), nil)
	}
	b.Run("recorder", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, reqs[i%benchIDs])
			if rec.Code != http.StatusOK {
				b.Fatalf("got status %d, want 200; body %s", rec.Code, rec.Body)
			}
			i++
		}
	})
	b.Run("handler-only", func(b *testing.B) {
		b.ReportAllocs()
		w := &discardWriter{h: make(http.Header)}
		i := 0
		for b.Loop() {
			clear(w.h)
			h.ServeHTTP(w, reqs[i%benchIDs])
			if w.status != http.StatusOK {
				b.Fatalf("got status %d, want 200", w.status)
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			w := &discardWriter{h: make(http.Header)}
			i := int(next.Add(1)) * 7919
			for pb.Next() {
				clear(w.h)
				h.ServeHTTP(w, reqs[i%benchIDs])
				i++
			}
		})
	})
}

// BenchmarkHandlerOverhead is the cost of package api alone: parsing,
// encoding and writing around a Checker that answers at once.
func BenchmarkHandlerOverhead(b *testing.B) {
	f := &constChecker{d: table.Decision{Allowed: true, Count: 1, Limit: 1000000000000, Remaining: 999999999999, ResetAfter: time.Hour}}
	h, err := api.NewHandler(f, api.Options{})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, benchQuery(42), nil)
	w := &discardWriter{h: make(http.Header)}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}

// constChecker answers every check with d.
type constChecker struct{ d table.Decision }

func (c *constChecker) Check(context.Context, table.Request) (table.Decision, error) { return c.d, nil }

func (c *constChecker) CheckAll(_ context.Context, reqs []table.Request) ([]table.Decision, bool, error) {
	ds := make([]table.Decision, len(reqs))
	for i := range ds {
		ds[i] = c.d
	}
	return ds, c.d.Allowed, nil
}

func (c *constChecker) Refund(context.Context, table.Request) (table.Decision, error) {
	return c.d, nil
}

// batchChecks is the number of checks in a benchmark batch.
const batchChecks = 100

// resettableBody is a request body a benchmark rewinds before each request,
// so that one *http.Request serves every iteration without allocating.
type resettableBody struct {
	bytes.Reader
	data []byte
}

func (r *resettableBody) Close() error { return nil }

func (r *resettableBody) rewind() { r.Reset(r.data) }

// batchBodies returns the POST /check_rate bodies of the batch benchmarks:
// benchIDs/batchChecks batches of batchChecks checks, each on its own id,
// with a one-hour window and a limit no benchmark reaches.
func batchBodies() [][]byte {
	bodies := make([][]byte, benchIDs/batchChecks)
	for n := range bodies {
		var b bytes.Buffer
		b.WriteByte('[')
		for i := range batchChecks {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":"user-%d","scale":3600000,"limit":1000000000000}`, n*batchChecks+i)
		}
		b.WriteByte(']')
		bodies[n] = b.Bytes()
	}
	return bodies
}

// BenchmarkCheckRatePOSTBatch posts batches of batchChecks checks, all
// admitted, to the handler, with one request rewound each time and no
// network. "system" checks them with a real actor system; "api-only" with
// a Checker that answers at once, which leaves the cost of package api
// alone (reading, parsing, validating, encoding). ns/check is ns/op per
// check; cpu-ns/check is the CPU time of the whole process (every
// goroutine: the actors' and the garbage collector's too) per check, which
// other load on the machine disturbs less.
func BenchmarkCheckRatePOSTBatch(b *testing.B) {
	f := &constChecker{d: table.Decision{Allowed: true, Count: 1, Limit: 1000000000000, Remaining: 999999999999, ResetAfter: time.Hour}}
	for _, bc := range []struct {
		name string
		c    api.Checker
	}{
		{"system", actorstest.StartSystem(b, actors.Config{})},
		{"api-only", f},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h, err := api.NewHandler(bc.c, api.Options{})
			if err != nil {
				b.Fatal(err)
			}
			bodies := batchBodies()
			body := &resettableBody{}
			req := httptest.NewRequest(http.MethodPost, "/check_rate", body)
			w := &discardWriter{h: make(http.Header)}
			b.ReportAllocs()
			cpu0, cpuOK := processCPU()
			i := 0
			for b.Loop() {
				body.data = bodies[i%len(bodies)]
				body.rewind()
				req.ContentLength = int64(len(body.data))
				clear(w.h)
				h.ServeHTTP(w, req)
				if w.status != http.StatusOK {
					b.Fatalf("got status %d, want 200", w.status)
				}
				i++
			}
			cpu1, _ := processCPU()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchChecks), "ns/check")
			if cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N*batchChecks), "cpu-ns/check")
			}
		})
	}
}

func BenchmarkCheckRateMetrics(b *testing.B) {
	h, err := api.NewHandler(actorstest.StartSystem(b, actors.Config{}), api.Options{Metrics: api.NewMetrics()})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, benchQuery(0), nil)
	w := &discardWriter{h: make(http.Header)}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}

// loadResult is what load runs measured.
type loadResult struct {
	elapsed time.Duration
	lat     []time.Duration // one per completed request
}

func (r loadResult) rate() float64 { return float64(len(r.lat)) / r.elapsed.Seconds() }

// quantile returns the q-quantile latency; r.lat must be sorted.
func (r loadResult) quantile(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[int(float64(len(r.lat)-1)*q)]
}

// runLoad sends GETs of base+paths (round-robin) from conns goroutines over
// at most conns keep-alive connections of tr for d, adding what it measured
// to into. Any answer but 200 fails b.
func runLoad(b *testing.B, tr *http.Transport, base string, paths []string, conns int, d time.Duration, into *loadResult) {
	b.Helper()
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()

	lat := make([][]time.Duration, conns)
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for g := range conns {
		wg.Go(func() {
			mine := make([]time.Duration, 0, 1<<12)
			for i := g; ctx.Err() == nil; i += conns {
				req, _ := http.NewRequest(http.MethodGet, base+paths[i%len(paths)], nil)
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mine = append(mine, time.Since(t0))
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, resp.Status)
					return
				}
			}
			lat[g] = mine
		})
	}
	wg.Wait()
	into.elapsed += time.Since(start)
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d load goroutines failed, first: %v", n, firstErr.Load())
	}
	for _, l := range lat {
		into.lat = append(into.lat, l...)
	}
}

func newLoadTransport(conns int) *http.Transport {
	return &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		DisableCompression:  true,
	}
}

// BenchmarkHTTPLoad compares, in one run and over loopback, a bare net/http
// handler that answers a tiny body with GET /check_rate (1000 distinct ids,
// all allowed), each behind its own httptest server and driven by 64
// keep-alive connections for a fixed time (2 s per side, 0.2 s with -short),
// in alternating rounds. It ignores b.N: run it with
// -benchtime 1x. The interesting numbers are the reported metrics.
func BenchmarkHTTPLoad(b *testing.B) {
	const (
		conns  = 64
		rounds = 4
	)
	d := 2 * time.Second // per side
	if testing.Short() {
		d = 200 * time.Millisecond
	}
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{"application/json"}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer bare.Close()
	// The check_rate side is configured as the daemon runs it: with metrics.
	sys := actorstest.StartSystem(b, actors.Config{})
	m := api.NewMetrics()
	m.Observe(sys)
	h, err := api.NewHandler(sys, api.Options{Metrics: m})
	if err != nil {
		b.Fatal(err)
	}
	check := httptest.NewServer(h)
	defer check.Close()

	paths := make([]string, benchIDs)
	for i := range paths {
		paths[i] = benchQuery(i)
	}
	// Alternate short rounds, so that a change in background load biases
	// neither side.
	trBare, trCheck := newLoadTransport(conns), newLoadTransport(conns)
	defer trBare.CloseIdleConnections()
	defer trCheck.CloseIdleConnections()
	var rb, rc loadResult
	b.ResetTimer()
	for range rounds {
		runLoad(b, trBare, bare.URL, []string{"/"}, conns, d/rounds, &rb)
		runLoad(b, trCheck, check.URL, paths, conns, d/rounds, &rc)
	}
	b.StopTimer()
	if len(rb.lat) == 0 || len(rc.lat) == 0 {
		b.Fatal("no requests completed")
	}
	slices.Sort(rb.lat)
	slices.Sort(rc.lat)

	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(rb.rate(), "bare-req/s")
	b.ReportMetric(rc.rate(), "check-req/s")
	b.ReportMetric(rc.rate()/rb.rate(), "check/bare")
	b.ReportMetric(us(rb.quantile(0.50)), "bare-p50-µs")
	b.ReportMetric(us(rb.quantile(0.99)), "bare-p99-µs")
	b.ReportMetric(us(rc.quantile(0.50)), "check-p50-µs")
	b.ReportMetric(us(rc.quantile(0.99)), "check-p99-µs")
	b.ReportMetric(0, "ns/op") // b.N is not the work done
}
