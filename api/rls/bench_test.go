package rls

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/actors"
)

// BenchmarkShouldRateLimit: one descriptor per request over 1,000 values,
// a limit no run reaches, on an in-memory System: the Service called in
// process (/service), and through a loopback gRPC server and client
// (/grpc), from 64 goroutines per proc. Allocations are per request.
func BenchmarkShouldRateLimit(b *testing.B) {
	cfg := mustParse(b, "domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 4294967295}\n")
	sys, err := actors.Start(context.Background(), actors.Config{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sys.Stop(context.Background()) })
	svc, err := NewService(sys, NewStore(cfg), Options{})
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]*rlsv3.RateLimitRequest, 1000)
	for i := range reqs {
		reqs[i] = rq("bench", 0, ds("user=user-"+strconv.Itoa(i)))
	}
	client, _ := serveGRPC(b, svc)
	call := map[string]func(ctx context.Context, r *rlsv3.RateLimitRequest) error{
		"service": func(ctx context.Context, r *rlsv3.RateLimitRequest) error {
			_, err := svc.ShouldRateLimit(ctx, r)
			return err
		},
		"grpc": func(ctx context.Context, r *rlsv3.RateLimitRequest) error {
			_, err := client.ShouldRateLimit(ctx, r)
			return err
		},
	}
	for _, name := range []string{"service", "grpc"} {
		f := call[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(64)
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				i := int(next.Add(1)) * 101 // each goroutine starts elsewhere in the values
				for pb.Next() {
					i++
					if err := f(ctx, reqs[i%len(reqs)]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
