package apitest

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// DiscardWriter is a reusable http.ResponseWriter that keeps nothing but
// the status, so a benchmark measures the handler and not the recorder.
type DiscardWriter struct {
	H      http.Header
	Status int
}

// Header implements http.ResponseWriter.
func (w *DiscardWriter) Header() http.Header { return w.H }

// Write implements http.ResponseWriter.
func (w *DiscardWriter) Write(b []byte) (int, error) { return len(b), nil }

// WriteHeader implements http.ResponseWriter.
func (w *DiscardWriter) WriteHeader(status int) { w.Status = status }

// LoadResult is what load runs measured.
type LoadResult struct {
	Elapsed time.Duration
	Lat     []time.Duration // one per completed request
}

// Rate returns the requests per second of r.
func (r LoadResult) Rate() float64 { return float64(len(r.Lat)) / r.Elapsed.Seconds() }

// Quantile returns the q-quantile latency; r.Lat must be sorted.
func (r LoadResult) Quantile(q float64) time.Duration {
	if len(r.Lat) == 0 {
		return 0
	}
	return r.Lat[int(float64(len(r.Lat)-1)*q)]
}

// RunLoad sends GETs of base+paths (round-robin) from conns goroutines over
// at most conns keep-alive connections of tr for d, adding what it measured
// to into. Any answer but 200 fails b.
func RunLoad(b *testing.B, tr *http.Transport, base string, paths []string, conns int, d time.Duration, into *LoadResult) {
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
	into.Elapsed += time.Since(start)
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d load goroutines failed, first: %v", n, firstErr.Load())
	}
	for _, l := range lat {
		into.Lat = append(into.Lat, l...)
	}
}

// NewLoadTransport returns a transport of at most conns connections to a
// host, all kept alive.
func NewLoadTransport(conns int) *http.Transport {
	return &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		DisableCompression:  true,
	}
}

// CompareLoad drives a (the paths pathsA) and b (pathsB) over conns
// connections each for d in all, in rounds alternating between them, so
// that a change in background load biases neither side, and returns what
// each measured, latencies sorted. The benchmark's timer runs only over
// the rounds.
func CompareLoad(tb *testing.B, a string, pathsA []string, b string, pathsB []string, conns, rounds int, d time.Duration) (ra, rb LoadResult) {
	tb.Helper()
	trA, trB := NewLoadTransport(conns), NewLoadTransport(conns)
	defer trA.CloseIdleConnections()
	defer trB.CloseIdleConnections()
	tb.ResetTimer()
	for range rounds {
		RunLoad(tb, trA, a, pathsA, conns, d/time.Duration(rounds), &ra)
		RunLoad(tb, trB, b, pathsB, conns, d/time.Duration(rounds), &rb)
	}
	tb.StopTimer()
	if len(ra.Lat) == 0 || len(rb.Lat) == 0 {
		tb.Fatal("no requests completed")
	}
	slices.Sort(ra.Lat)
	slices.Sort(rb.Lat)
	return ra, rb
}

// Micros returns the q-quantile latency of r in microseconds.
func (r LoadResult) Micros(q float64) float64 {
	return float64(r.Quantile(q)) / float64(time.Microsecond)
}
