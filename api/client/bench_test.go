package client_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/client"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// BenchmarkCheck measures one Check, a full HTTP round trip to a real
// server on the loopback interface, sequentially and from GOMAXPROCS
// goroutines: ad hoc and allowed every time (a limit no run reaches), by
// rule, and a peek.
func BenchmarkCheck(b *testing.B) {
	store := apitest.NewStore(b, rules.Rule{Name: "api", Policy: table.Policy{Scale: longScale, Limit: 1 << 60}})
	srv := apitest.StartServer(b, actorstest.StartSystem(b), httpapi.Options{Rules: store})
	c := newClient(b, client.Options{BaseURL: srv.URL})
	ctx := context.Background()
	adHoc := client.Limit{Policy: client.Policy{Scale: longScale, Limit: 1 << 60}}
	tests := []struct {
		name string
		l    client.Limit
		hits int64
	}{
		{"ad hoc", adHoc, 1},
		{"rule", client.Limit{Rule: "api"}, 1},
		{"peek", adHoc, 0},
	}
	for _, tt := range tests {
		b.Run(tt.name+"/sequential", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d, err := c.Check(ctx, "bench", tt.l, tt.hits); err != nil || !d.Allowed {
					b.Fatalf("got %+v, %v", d, err)
				}
			}
		})
		b.Run(tt.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if d, err := c.Check(ctx, "bench", tt.l, tt.hits); err != nil || !d.Allowed {
						b.Errorf("got %+v, %v", d, err)
						return
					}
				}
			})
		})
	}
}

// cannedTransport answers every request with one decision, without a
// network, so that a benchmark measures the client alone (and net/http's
// Client, which it cannot do without).
type cannedTransport struct{}

func (cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode:    200,
		Header:        http.Header{},
		Body:          io.NopCloser(strings.NewReader(decisionJSON)),
		ContentLength: int64(len(decisionJSON)),
		Request:       req,
	}, nil
}

// BenchmarkCheckClientOnly is BenchmarkCheck without the network or the
// server: the cost of building the request and decoding the answer.
func BenchmarkCheckClientOnly(b *testing.B) {
	c := newClient(b, client.Options{BaseURL: "http://ratelimitd.invalid", HTTPClient: &http.Client{Transport: cannedTransport{}}})
	ctx := context.Background()
	l := client.Limit{Policy: client.Policy{Scale: time.Minute, Limit: 10}}
	b.ReportAllocs()
	for b.Loop() {
		if d, err := c.Check(ctx, "bench", l, 1); err != nil || !d.Allowed {
			b.Fatalf("got %+v, %v", d, err)
		}
	}
}
