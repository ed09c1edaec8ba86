package topk_test

import (
	"fmt"
	"log"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/topk"
)

// Two shards each keep a Sketch; a View merges them on read.
func Example() {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	var shards [2]*topk.Sketch
	for i := range shards {
		s, err := topk.New(topk.Config{})
		if err != nil {
			log.Fatal(err)
		}
		shards[i] = s
	}
	// Shard 0 serves alice and carol, shard 1 bob; alice is over her limit.
	for i := range 50 {
		shards[0].Observe("alice", "login", 1, i >= 10, now)
	}
	shards[1].Observe("bob", "api", 30, false, now)
	shards[0].Observe("carol", "api", 5, false, now)

	for _, m := range []topk.Metric{topk.Hits, topk.Denials} {
		v := topk.View{Metric: m, Window: topk.Minute, Partitioned: true}
		for _, s := range shards {
			v.Merge(s, now.Add(10*time.Second))
		}
		fmt.Printf("by %v (total %d, bound %d):\n", m, v.Total(), v.Bound())
		for _, e := range v.Top(2) {
			fmt.Printf("  %s (%s) %d\n", e.ID, e.Label, e.Count)
		}
	}
	// Output:
	// by hits (total 85, bound 0):
	//   alice (login) 50
	//   bob (api) 30
	// by denials (total 40, bound 0):
	//   alice (login) 40
}
