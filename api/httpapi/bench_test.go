package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/table"
)

// benchIDs is the number of distinct ids the benchmarks spread checks over.
const benchIDs = 1000

// benchQuery is the check_rate query of id number i: a long window and a
// limit no benchmark reaches, so every check is allowed.
func benchQuery(i int) string {
	return fmt.Sprintf("/check_rate?id=user-%d&scale=%s&limit=1000000000000", i, apitest.LongScale)
}

func BenchmarkCheckRateGET(b *testing.B) {
	h, err := httpapi.NewHandler(actorstest.StartSystem(b), httpapi.Options{})
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
		w := &apitest.DiscardWriter{H: make(http.Header)}
		i := 0
		for b.Loop() {
			clear(w.H)
			h.ServeHTTP(w, reqs[i%benchIDs])
			if w.Status != http.StatusOK {
				b.Fatalf("got status %d, want 200", w.Status)
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			w := &apitest.DiscardWriter{H: make(http.Header)}
			i := int(next.Add(1)) * 7919
			for pb.Next() {
				clear(w.H)
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
	h, err := httpapi.NewHandler(f, httpapi.Options{})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, benchQuery(42), nil)
	w := &apitest.DiscardWriter{H: make(http.Header)}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.H)
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
		{"system", actorstest.StartSystem(b)},
		{"api-only", f},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h, err := httpapi.NewHandler(bc.c, httpapi.Options{})
			if err != nil {
				b.Fatal(err)
			}
			bodies := batchBodies()
			body := &resettableBody{}
			req := httptest.NewRequest(http.MethodPost, "/check_rate", body)
			w := &apitest.DiscardWriter{H: make(http.Header)}
			b.ReportAllocs()
			cpu0, cpuOK := processCPU()
			i := 0
			for b.Loop() {
				body.data = bodies[i%len(bodies)]
				body.rewind()
				req.ContentLength = int64(len(body.data))
				clear(w.H)
				h.ServeHTTP(w, req)
				if w.Status != http.StatusOK {
					b.Fatalf("got status %d, want 200", w.Status)
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
	h, err := httpapi.NewHandler(actorstest.StartSystem(b), httpapi.Options{Metrics: metrics.New()})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, benchQuery(0), nil)
	w := &apitest.DiscardWriter{H: make(http.Header)}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.H)
		h.ServeHTTP(w, req)
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
	sys := actorstest.StartSystem(b)
	m := metrics.New()
	m.Observe(func() metrics.Stats { return metrics.Stats{Buckets: sys.Stats().Buckets} })
	h, err := httpapi.NewHandler(sys, httpapi.Options{Metrics: m})
	if err != nil {
		b.Fatal(err)
	}
	check := httptest.NewServer(h)
	defer check.Close()

	paths := make([]string, benchIDs)
	for i := range paths {
		paths[i] = benchQuery(i)
	}
	rb, rc := apitest.CompareLoad(b, bare.URL, []string{"/"}, check.URL, paths, conns, rounds, d)
	b.ReportMetric(rb.Rate(), "bare-req/s")
	b.ReportMetric(rc.Rate(), "check-req/s")
	b.ReportMetric(rc.Rate()/rb.Rate(), "check/bare")
	b.ReportMetric(rb.Micros(0.50), "bare-p50-µs")
	b.ReportMetric(rb.Micros(0.99), "bare-p99-µs")
	b.ReportMetric(rc.Micros(0.50), "check-p50-µs")
	b.ReportMetric(rc.Micros(0.99), "check-p99-µs")
	b.ReportMetric(0, "ns/op") // b.N is not the work done
}
