// Package grpcload drives Envoy's Rate Limit Service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) over gRPC
// for the comparison: a fixed number of concurrent calls (streams) over a
// few HTTP/2 connections, each call sent as soon as the one before it on
// its goroutine is answered, every answer checked, bounded in time and in
// count. It fills the same load.Result as the HTTP load client, so that
// the two are reported alike.
//
// It is a lean client of its own over HTTP/2 with prior knowledge (as
// Envoy speaks to a rate-limit cluster), so that it takes little of the
// CPU it shares with the servers: each request is marshalled and its
// frames rendered once (a header block without dynamic-table entries, so
// that it is the same on every connection), a call is one write of its
// HEADERS and DATA frames, one reader goroutine per connection hands the
// answers to their calls, and an answer is checked by reading its wire
// format, not by decoding it into messages.
package grpcload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

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

// shouldRateLimitPath is the :path of ShouldRateLimit.
var shouldRateLimitPath = rlsv3.RateLimitService_ShouldRateLimit_FullMethodName

// Client holds the connections to one Target.
type Client struct {
	t       *Target
	reqs    []rendered
	conns   []*h2conn
	streams int
	slots   []*call // one per stream goroutine of Run
	// Timeout bounds each call of Call, and how long a call of Run may
	// outlast its round.
	Timeout time.Duration
}

// NewClient connects conns HTTP/2 connections to t, for streams concurrent
// calls spread over them.
func NewClient(t *Target, conns, streams int) (*Client, error) {
	if len(t.Requests) == 0 || conns < 1 || streams < 1 {
		return nil, errors.New("grpcload: a target needs requests, and a client at least one connection and one stream")
	}
	c := &Client{t: t, streams: streams, Timeout: 10 * time.Second}
	for _, r := range t.Requests {
		msg, err := proto.Marshal(r)
		if err != nil {
			return nil, err
		}
		c.reqs = append(c.reqs, render(t.Addr, shouldRateLimitPath, msg))
	}
	for range conns {
		cn, err := dial(t.Addr)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.conns = append(c.conns, cn)
	}
	for range streams {
		c.slots = append(c.slots, newCall())
	}
	return c, nil
}

// Close closes the connections.
func (c *Client) Close() error {
	var err error
	for _, cn := range c.conns {
		if e := cn.close(); e != nil && !errors.Is(e, net.ErrClosed) {
			err = errors.Join(err, e)
		}
	}
	return err
}

// Call sends one request and checks its answer: OK overall, one status
// with a limit (the call was counted). It returns the answer.
func (c *Client) Call(ctx context.Context, i int) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	cl := newCall()
	msg, err := c.send(ctx, cl, i)
	if err != nil {
		return nil, err
	}
	resp := &rlsv3.RateLimitResponse{}
	if err := proto.Unmarshal(msg, resp); err != nil {
		return nil, fmt.Errorf("answer to %v: %w", c.t.Requests[i%len(c.t.Requests)], err)
	}
	return resp, nil
}

// send makes call i on cl and returns its checked answer's message.
func (c *Client) send(ctx context.Context, cl *call, i int) ([]byte, error) {
	if err := c.conns[i%len(c.conns)].do(ctx, cl, &c.reqs[i%len(c.reqs)]); err != nil {
		return nil, err
	}
	msg, err := cl.message()
	if err == nil && !counted(msg) {
		resp := &rlsv3.RateLimitResponse{}
		if uerr := proto.Unmarshal(msg, resp); uerr != nil {
			return nil, fmt.Errorf("answer to %v: %w", c.t.Requests[i%len(c.t.Requests)], uerr)
		}
		err = fmt.Errorf("unexpected answer %v to %v", resp, c.t.Requests[i%len(c.t.Requests)])
	}
	return msg, err
}

// Field numbers counted reads.
const (
	fieldOverallCode  = 1 // RateLimitResponse.overall_code
	fieldStatuses     = 2 // RateLimitResponse.statuses
	fieldCurrentLimit = 2 // DescriptorStatus.current_limit
)

// counted reports whether msg, a RateLimitResponse in wire format, is OK
// overall with one status that has a limit.
func counted(msg []byte) bool {
	ok, statuses, limited := false, 0, false
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return false
		}
		msg = msg[n:]
		switch {
		case num == fieldOverallCode && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(msg)
			if n < 0 {
				return false
			}
			ok, msg = v == uint64(rlsv3.RateLimitResponse_OK), msg[n:]
		case num == fieldStatuses && typ == protowire.BytesType:
			st, n := protowire.ConsumeBytes(msg)
			if n < 0 {
				return false
			}
			statuses, msg = statuses+1, msg[n:]
			limited = hasField(st, fieldCurrentLimit)
		default:
			n := protowire.ConsumeFieldValue(num, typ, msg)
			if n < 0 {
				return false
			}
			msg = msg[n:]
		}
	}
	return ok && statuses == 1 && limited
}

// hasField reports whether the message m has a length-delimited field num.
func hasField(m []byte, num protowire.Number) bool {
	for len(m) > 0 {
		got, typ, n := protowire.ConsumeTag(m)
		if n < 0 {
			return false
		}
		m = m[n:]
		if got == num && typ == protowire.BytesType {
			return true
		}
		n = protowire.ConsumeFieldValue(got, typ, m)
		if n < 0 {
			return false
		}
		m = m[n:]
	}
	return false
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
	// One deadline for the round's calls, rather than a timer per call.
	ctx, cancel := context.WithTimeout(ctx, d+c.Timeout)
	defer cancel()
	load.Drive(ctx, c.t.Name, c.t.CPU, c.streams, d, into, record, func(g, i int, _ time.Time) error {
		_, err := c.send(ctx, c.slots[g], i)
		return err
	})
}
