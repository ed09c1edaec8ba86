package resp_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/api/resp"
)

// TestExactBurst sends 1,000 CL.THROTTLE on one key from 50 connections at
// once, one command per round trip or pipelined 20 at a time, on a clock
// that does not move: exactly max_burst+1 are allowed, each leaving a
// different remaining (99 down to 0), and every denial reports the full
// bucket.
func TestExactBurst(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, goroutines bool) {
		const conns, perConn, maxBurst = 50, 20, 99
		for _, pipelined := range []bool{false, true} {
			sys, _ := manualSystem(t)
			_, addr := startServer(t, resp.Options{ConnGoroutines: goroutines, Checker: sys})
			clients := make([]*redis.Client, conns)
			for i := range clients {
				clients[i] = newClient(t, addr, 1, "")
			}
			var mu sync.Mutex
			var replies [][]int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for _, c := range clients {
				wg.Go(func() {
					ctx := context.Background()
					<-start
					var got [][]int64
					if pipelined {
						cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
							for range perConn {
								p.Do(ctx, "CL.THROTTLE", "hot", maxBurst, 1, 3600)
							}
							return nil
						})
						if err != nil {
							t.Errorf("pipeline: %v", err)
							return
						}
						for _, cmd := range cmds {
							v, err := cmd.(*redis.Cmd).Int64Slice()
							if err != nil {
								t.Errorf("reply: %v", err)
								return
							}
							got = append(got, v)
						}
					} else {
						for range perConn {
							v, err := c.Do(ctx, "CL.THROTTLE", "hot", maxBurst, 1, 3600).Int64Slice()
							if err != nil {
								t.Errorf("CL.THROTTLE: %v", err)
								return
							}
							got = append(got, v)
						}
					}
					mu.Lock()
					replies = append(replies, got...)
					mu.Unlock()
				})
			}
			close(start)
			wg.Wait()
			if len(replies) != conns*perConn {
				t.Fatalf("pipelined=%v: got %d replies, want %d", pipelined, len(replies), conns*perConn)
			}
			var remaining []int64
			for _, r := range replies {
				if r[0] == 0 {
					remaining = append(remaining, r[2])
					continue
				}
				// Denied: the bucket is full for 100 hours; the next token in 1 hour.
				if want := []int64{1, maxBurst + 1, 0, 3600, 360000}; !slices.Equal(r, want) {
					t.Errorf("pipelined=%v: denial %v, want %v", pipelined, r, want)
				}
			}
			slices.Sort(remaining)
			want := make([]int64, maxBurst+1)
			for i := range want {
				want[i] = int64(i)
			}
			if !slices.Equal(remaining, want) {
				t.Errorf("pipelined=%v: %d allowed, with remaining %v; want exactly %d, with remaining 0 to %d once each",
					pipelined, len(remaining), remaining, maxBurst+1, maxBurst)
			}
		}
	})
}
