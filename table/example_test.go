package table_test

import (
	"fmt"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

func Example() {
	t := table.New(table.Config{})
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	req := table.Request{ID: "203.0.113.7", Policy: table.Policy{Scale: 30 * time.Second, Limit: 2}, Hits: 1}
	for i := range 3 {
		d := t.Apply(req, now.Add(time.Duration(i)*time.Second))
		fmt.Printf("allowed=%v count=%d remaining=%d retry_after=%v\n", d.Allowed, d.Count, d.Remaining, d.RetryAfter)
	}
	fmt.Println("swept:", t.DeleteExpired(now.Add(30*time.Second), 100))
	// Output:
	// allowed=true count=1 remaining=1 retry_after=0s
	// allowed=true count=2 remaining=0 retry_after=0s
	// allowed=false count=2 remaining=0 retry_after=28s
	// swept: 1
}
