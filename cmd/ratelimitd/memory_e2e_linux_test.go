package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
)

// procStatus returns the fields of /proc/<pid>/status given, in bytes.
func procStatus(t *testing.T, pid int, fields ...string) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		for _, f := range fields {
			if k == f {
				kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				if err != nil {
					t.Fatalf("/proc/%d/status %s: %q", pid, k, v)
				}
				got[k] = kb << 10
			}
		}
	}
	return got
}

// memoryFiller fills a daemon with buckets: ids m-000000000, m-000000001,
// … (11 bytes), each checked once in a window of an hour, in POST batches
// of 1000 from several connections.
type memoryFiller struct {
	t    *testing.T
	d    *daemon
	next atomic.Int64 // the next id
}

// checkJSON writes the JSON of the check of id number i.
func checkJSON(buf *bytes.Buffer, i int64) {
	fmt.Fprintf(buf, `{"id":"m-%09d","scale":"1h","limit":10}`, i)
}

// fill checks ids until the daemon holds want buckets (or, at the cap,
// refuses every new one). A batch refused with 503 (a full shard refuses
// the whole batch) is sent again one check at a time, so that the ids of
// the shards with room still land.
func (f *memoryFiller) fill(want int64, upTo int64) {
	f.t.Helper()
	const batch, workers = 1000, 4
	var wg sync.WaitGroup
	var stop atomic.Bool
	for range workers {
		wg.Go(func() {
			client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			var buf bytes.Buffer
			post := func(body []byte) int {
				resp, err := client.Post(f.d.base+"/check_rate", "application/json", bytes.NewReader(body))
				if err != nil {
					f.t.Errorf("POST /check_rate: %v", err)
					stop.Store(true)
					return 0
				}
				_, _ = buf.ReadFrom(resp.Body)
				resp.Body.Close()
				return resp.StatusCode
			}
			for !stop.Load() {
				lo := f.next.Add(batch) - batch
				hi := min(lo+batch, upTo)
				if lo >= hi {
					return
				}
				buf.Reset()
				buf.WriteByte('[')
				for i := lo; i < hi; i++ {
					if i > lo {
						buf.WriteByte(',')
					}
					checkJSON(&buf, i)
				}
				buf.WriteByte(']')
				body := bytes.Clone(buf.Bytes())
				switch st := post(body); st {
				case http.StatusOK:
				case http.StatusServiceUnavailable:
					for i := lo; i < hi && !stop.Load(); i++ {
						buf.Reset()
						checkJSON(&buf, i)
						if st := post(bytes.Clone(buf.Bytes())); st != http.StatusOK && st != http.StatusServiceUnavailable {
							f.t.Errorf("single check: got status %d", st)
							stop.Store(true)
						}
					}
				default:
					f.t.Errorf("POST of a batch: got status %d", st)
					stop.Store(true)
				}
			}
		})
	}
	// Stop the workers once the daemon holds want buckets.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return
		case <-time.After(200 * time.Millisecond):
		}
		if n, _ := f.d.metric(f.t, "ratelimitd_buckets"); int64(n) >= want {
			stop.Store(true)
		}
	}
}

// TestE2EMemoryAtDefaultCap measures the resident memory (VmRSS) of the
// built daemon, default flags and a data directory in t.TempDir(), filled
// to the default --max-buckets, and at 1,048,576 buckets for the slope per
// bucket; then checks README's figures against the measurement (each within
// 15%). It needs about a minute of both cores and 3 GB of memory, so it runs
// only when asked, and never under -race (which changes memory):
//
//	RATELIMITD_MEASURE_MEMORY=1 go test -run TestE2EMemoryAtDefaultCap -v ./cmd/ratelimitd/
func TestE2EMemoryAtDefaultCap(t *testing.T) {
	if os.Getenv("RATELIMITD_MEASURE_MEMORY") != "1" {
		t.Skip("a measurement: set RATELIMITD_MEASURE_MEMORY=1 to run it")
	}
	if raceEnabled {
		t.Skip("a measurement of memory: run it without -race")
	}
	d := startDaemon(t)
	pid := d.cmd.Process.Pid
	const oneM = 1 << 20
	full := int64(actors.DefaultMaxBuckets)
	fields := []string{"VmRSS", "RssAnon", "RssFile", "VmHWM"}

	base := procStatus(t, pid, fields...)
	f := &memoryFiller{t: t, d: d}
	start := time.Now()
	f.fill(oneM, oneM)
	if n, _ := d.metric(t, "ratelimitd_buckets"); n != oneM {
		t.Fatalf("after the first fill: %v buckets, want %d", n, oneM)
	}
	at1M := procStatus(t, pid, fields...)
	t.Logf("empty: %v; at %d buckets (%v): %v", base, oneM, time.Since(start).Round(time.Second), at1M)

	f.fill(full, full+full/4) // a quarter more ids than the cap, for the shards' uneven shares
	n, _ := d.metric(t, "ratelimitd_buckets")
	if int64(n) != full {
		t.Fatalf("after the second fill: %v buckets, want the cap %d", n, full)
	}
	atCap := procStatus(t, pid, fields...)
	slope := float64(atCap["VmRSS"]-at1M["VmRSS"]) / float64(full-oneM)
	t.Logf("at the cap, %d buckets (%v): %v", full, time.Since(start).Round(time.Second), atCap)
	t.Logf("VmRSS: %.2f GB at the cap, %.1f bytes per bucket overall, %.1f bytes per bucket between 1M and the cap",
		float64(atCap["VmRSS"])/1e9, float64(atCap["VmRSS"])/float64(full), slope)

	perBucket, total := readmeMemory(t)
	if got := float64(atCap["VmRSS"]) / 1e9; got < total*0.85 || got > total*1.15 {
		t.Errorf("README says about %.1f GB at the cap; measured %.2f GB", total, got)
	}
	if slope < perBucket*0.85 || slope > perBucket*1.15 {
		t.Errorf("README says about %.0f bytes per bucket; measured %.1f", perBucket, slope)
	}
}
