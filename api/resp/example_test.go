package resp_test

import (
	"context"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/resp"
)

// Example serves the Redis protocol on a loopback port and asks it what
// redis-cell's users ask: 30 per minute, in bursts of up to 16.
func Example() {
	ctx := context.Background()
	sys, err := actors.Start(ctx, actors.Config{})
	if err != nil {
		panic(err)
	}
	defer sys.Stop(ctx)
	srv, err := resp.New(resp.Options{Checker: sys, Stopped: actors.ErrStopped, Unavailable: actors.ErrUnavailable})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(ctx)

	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String()})
	defer rdb.Close()
	reply, err := rdb.Do(ctx, "CL.THROTTLE", "user123", 15, 30, 60, 1).Int64Slice()
	if err != nil {
		panic(err)
	}
	fmt.Println("limited, limit, remaining, retry after, reset after:", reply)
	// Output: limited, limit, remaining, retry after, reset after: [0 16 15 -1 2]
}
