package sweeper_test

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/sweeper"
)

// A target that has 3 expired buckets and deletes them when asked.
type threeExpired struct{ left int }

func (o *threeExpired) Receive(c actor.Context) {
	if m, ok := c.Message().(*sweeper.Sweep); ok {
		n := min(o.left, m.Max)
		o.left -= n
		c.Respond(&sweeper.Swept{Round: m.Round, Target: m.Target, Deleted: n, More: n == m.Max})
	}
}

func Example() {
	as := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	defer as.Shutdown()
	owner := as.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &threeExpired{left: 3} }))

	clock := clocktest.New(time.Unix(0, 0))
	reports := make(reports, 1)
	as.Root.Spawn(sweeper.Props(sweeper.Config{
		Targets: []*actor.PID{owner}, Interval: time.Minute, Batch: 2, Clock: clock, Observer: reports,
	}))
	clock.BlockUntil(1) // the sweeper armed its first tick
	clock.Advance(time.Minute)
	r := <-reports
	fmt.Printf("deleted %d in %d batches, complete: %v\n", r.Deleted, r.Batches, r.Complete)
	// Output: deleted 3 in 2 batches, complete: true
}
