package sweeper_test

import (
	"fmt"
	"time"

	"github.com/ratelimitd/ratelimitd/sweeper"
)

// Drive a round over one target that holds 3 expired buckets, 2 per Sweep.
func Example() {
	expired := 3
	p := sweeper.New(1, 2)
	now := time.Unix(0, 0)
	p.Tick(now)
	for {
		m, ok := p.Next()
		if !ok {
			break
		}
		n := min(expired, m.Max) // the target deletes what m asks
		expired -= n
		if r, done := p.Swept(sweeper.Swept{Round: m.Round, Target: m.Target, Deleted: n, More: n == m.Max}, now); done {
			fmt.Printf("deleted %d in %d batches, complete: %v\n", r.Deleted, r.Batches, r.Complete)
		}
	}
	// Output: deleted 3 in 2 batches, complete: true
}
