package main

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestE2EDeniedBatchesNeverOverAdmit is the probe's setup against the real
// daemon: key A (20 ms windows, limit 5) and key B (full for a day), batches
// [A, B] sent continuously (always denied) while single checks of A go in;
// no window of A admits more than 5 singles, counted by the
// Ratelimit-Window each admitted single names.
func TestE2EDeniedBatchesNeverOverAdmit(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--shards", "4")
	for _, alg := range []string{"fixed_window", "sliding_window"} {
		a := `{"id":"a-` + alg + `","scale":20,"limit":5,"algorithm":"` + alg + `"}`
		b := `{"id":"b-` + alg + `","scale":86400000,"limit":1}`
		if r, _ := d.do(t, http.MethodPost, "/check_rate", "application/json", strings.NewReader(b)); r.status != 200 {
			t.Fatalf("filling B: got %v", r)
		}
		batch := "[" + a + "," + b + "]"
		run := time.Second
		if testing.Short() {
			run = 200 * time.Millisecond
		}
		deadline := time.Now().Add(run)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for n := 0; n < 100_000 && time.Now().Before(deadline); n++ {
					r, ok := d.do(t, http.MethodPost, "/check_rate", "application/json", strings.NewReader(batch))
					if !ok {
						return
					}
					if r.status != http.StatusRequestEntityTooLarge {
						t.Errorf("batch [A, B]: got %v, want 413", r)
						return
					}
				}
			})
		}
		perWindow := map[string]int{}
		for n := 0; n < 100_000 && time.Now().Before(deadline); n++ {
			r, ok := d.do(t, http.MethodPost, "/check_rate", "application/json", strings.NewReader(a))
			if !ok {
				break
			}
			if r.status == 200 {
				perWindow[r.header.Get("Ratelimit-Window")]++
			}
		}
		wg.Wait()
		if len(perWindow) < 5 {
			t.Fatalf("%s: only %d windows admitted anything: the test tests nothing", alg, len(perWindow))
		}
		for w, n := range perWindow {
			if w == "" || n > 5 {
				t.Errorf("%s: window %q admitted %d singles, want at most 5", alg, w, n)
			}
		}
	}
}
