// Package grpcload drives Envoy's Rate Limit Service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) over gRPC
// for the comparison: a fixed number of concurrent calls (streams) over a
// few HTTP/2 connections, each call sent as soon as the one before it on
// its goroutine is answered, every answer checked, bounded in time and in
// count. It fills the same load.Result as the HTTP load client, so that
// the two are reported alike.
package grpcload

import (
	"context"
	"errors"
	"fmt"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ratelimitd/ratelimitd/bench/internal/load"
)

// Target is one ShouldRateLimit server.
type Target struct {
	Name string
	Addr string // host:port on loopback
	// Requests are sent in turn: call i sends Requests[i%len].
	Requests []*rlsv3.RateLimitRequest
	// CPU returns the server's CPU seconds so far, read before and after
	// each round.
	CPU func() (float64, error)
}

// Requests returns one request per value: the domain, one descriptor of
// one entry key=value.
func Requests(domain, key string, values []string) []*rlsv3.RateLimitRequest {
	rs := make([]*rlsv3.RateLimitRequest, len(values))
	for i, v := range values {
		rs[i] = &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*rlcommon.RateLimitDescriptor{{
			Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: key, Value: v}},
		}}}
	}
	return rs
}

// Client holds the connections to one Target.
type Client struct {
	t       *Target
	conns   []*grpc.ClientConn
	clients []rlsv3.RateLimitServiceClient
	streams int
	// Timeout bounds each call.
	Timeout time.Duration
}

// NewClient connects conns HTTP/2 connections to t, for streams concurrent
// calls spread over them.
func NewClient(t *Target, conns, streams int) (*Client, error) {
	if len(t.Requests) == 0 || conns < 1 || streams < 1 {
		return nil, errors.New("grpcload: a target needs requests, and a client at least one connection and one stream")
	}
	c := &Client{t: t, streams: streams, Timeout: 10 * time.Second}
	for range conns {
		// Each its own connection: grpc.NewClient shares none.
		cc, err := grpc.NewClient(t.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			c.Close()
			return nil, err
		}
		c.conns = append(c.conns, cc)
		c.clients = append(c.clients, rlsv3.NewRateLimitServiceClient(cc))
	}
	return c, nil
}

// Close closes the connections.
func (c *Client) Close() error {
	var err error
	for _, cc := range c.conns {
		err = errors.Join(err, cc.Close())
	}
	return err
}

// Call sends one request and checks its answer: OK overall, one status
// with a limit (the call was counted). It returns the answer.
func (c *Client) Call(ctx context.Context, i int) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req := c.t.Requests[i%len(c.t.Requests)]
	resp, err := c.clients[i%len(c.clients)].ShouldRateLimit(ctx, req)
	switch {
	case err != nil:
		return nil, err
	case resp.OverallCode != rlsv3.RateLimitResponse_OK || len(resp.Statuses) != 1 || resp.Statuses[0].CurrentLimit == nil:
		return nil, fmt.Errorf("unexpected answer %v to %v", resp, req)
	}
	return resp, nil
}

// Run calls c's target for d (or until ctx ends) from c's streams
// goroutines, adding what it measured to into; it does nothing if
// into.Err is set. The target's CPU is read before and after. A failed
// call stops the round and sets into.Err. Latencies are kept only if
// record is set (not during a warm-up).
func Run(ctx context.Context, c *Client, d time.Duration, into *load.Result, record bool) {
	if into.Err != nil {
		return // a failed client may be nil
	}
	load.Drive(ctx, c.t.Name, c.t.CPU, c.streams, d, into, record, func(_, i int, _ time.Time) error {
		_, err := c.Call(ctx, i)
		return err
	})
}
