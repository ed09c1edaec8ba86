package dashboard

import (
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// TestLatencies: the quantiles of 1 µs … 100 µs are the upper edges of
// the buckets of 50 µs and 99 µs; they cover the last minute (the current
// 10 s and five before), no older; a clock stepped back cannot wipe a
// newer interval.
func TestLatencies(t *testing.T) {
	t.Parallel()
	var l Latencies
	if got := unsafe.Sizeof(l); got != 13_056 {
		t.Errorf("Latencies is %d bytes, want 13,056", got)
	}
	base := time.Unix(1_740_000_000, 0) // a whole 10 s
	for i := 1; i <= 100; i++ {
		l.Record(time.Duration(i)*time.Microsecond, base.Add(time.Duration(i)*time.Millisecond))
	}
	// 50,000 ns: top bit 15, mantissa 4: [12·4096, 13·4096); 99,000 ns:
	// top bit 16, mantissa 4: [12·8192, 13·8192).
	want := []time.Duration{53_248, 106_496}
	for _, at := range []time.Duration{0, 59 * time.Second} {
		if got, n := l.Quantile(base.Add(at), 0.5, 0.99); !slices.Equal(got, want) || n != 100 {
			t.Errorf("%v later: p50, p99 %v of %d, want %v of 100", at, got, n, want)
		}
	}
	if got, n := l.Quantile(base.Add(60*time.Second), 0.5); n != 0 || got[0] != 0 {
		t.Errorf("60 s later: %v of %d, want nothing", got, n)
	}
	// 50 s back lands on the slot of base+10s: dropped, not reset.
	l.Record(time.Millisecond, base.Add(10*time.Second))
	l.Record(time.Millisecond, base.Add(-50*time.Second))
	if _, n := l.Quantile(base.Add(10*time.Second), 0.5); n != 101 {
		t.Errorf("after a record from a clock stepped back: %d durations, want 101", n)
	}
	var empty Latencies
	if got, n := empty.Quantile(base, 0.5, 0.99); n != 0 || !slices.Equal(got, []time.Duration{0, 0}) {
		t.Errorf("empty: %v of %d, want zeros", got, n)
	}
}

// TestLatencyBuckets: a duration's bucket's upper edge is above it and at
// most 12.5% (and 1 ns) more; buckets grow with the duration.
func TestLatencyBuckets(t *testing.T) {
	t.Parallel()
	prev := -1
	for ns := int64(0); ns < 1<<latencyTop; ns = ns + 1 + ns/97 {
		b := latencyBucket(ns)
		if b < prev || b >= latencyBuckets {
			t.Fatalf("bucket of %d ns is %d, after %d (of %d)", ns, b, prev, latencyBuckets)
		}
		prev = b
		if up := int64(latencyUpper(b)); up <= ns || float64(up) > float64(ns)*1.125+1 {
			t.Fatalf("%d ns: bucket %d ends at %d", ns, b, up)
		}
	}
	if b := latencyBucket(int64(time.Hour)); b != latencyBuckets-1 {
		t.Errorf("an hour: bucket %d, want the last, %d", b, latencyBuckets-1)
	}
	if b := latencyBucket(-5); b != 0 {
		t.Errorf("a negative duration: bucket %d, want 0", b)
	}
}

// TestLatenciesConcurrent: Records from many goroutines are all counted.
func TestLatenciesConcurrent(t *testing.T) {
	t.Parallel()
	var l Latencies
	now := time.Unix(1_740_000_000, 0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				l.Record(time.Duration(g*1000+i)*time.Microsecond, now)
			}
		})
	}
	wg.Wait()
	if _, n := l.Quantile(now, 0.5); n != 8000 {
		t.Errorf("%d durations, want 8000", n)
	}
}
