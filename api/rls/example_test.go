package rls_test

import (
	"context"
	"fmt"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/rls"
)

// A config in the reference's format, a System to count on, and two
// requests for one remote address with a limit of 1 per (365-day) year.
func Example() {
	cfg, err := rls.Parse(rls.File{Name: "edge.yaml", Data: []byte(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: year, requests_per_unit: 1}
`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	sys, err := actors.Start(context.Background(), actors.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sys.Stop(context.Background())
	svc, err := rls.NewService(sys, rls.NewStore(cfg), rls.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{{
		Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}},
	}}}
	for range 2 {
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			fmt.Println(err)
			return
		}
		st := resp.Statuses[0]
		fmt.Println(resp.OverallCode, st.CurrentLimit.RequestsPerUnit, st.CurrentLimit.Unit, st.LimitRemaining)
	}
	// Output:
	// OK 1 YEAR 0
	// OVER_LIMIT 1 YEAR 0
}
