package rls

import (
	"context"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestShouldRateLimitAllocations: a counted request allocates the bucket
// id of each limited descriptor and its answer: one piece for one
// descriptor, three for more, whatever their kinds; its bookkeeping stays
// on the stack up to stackItems descriptors. (AllocsPerRun refuses to run in parallel; the
// race detector allocates on its own, so it is not run under it.)
func TestShouldRateLimitAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	c := mustParse(t, "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 4294967295}\n  - key: open\n    rate_limit: {unlimited: true}\n")
	svc, _, _ := newService(t, c, Options{})
	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want float64
	}{
		// The bucket id and the answer.
		{"one limited descriptor", rq("d", 0, ds("user=a")), 2},
		// Two bucket ids, the answer's three pieces, and the requests and
		// decisions of CheckAll.
		{"two limited descriptors", rq("d", 0, ds("user=a"), ds("user=b")), 7},
		// One bucket id and the answer's three pieces: unmatched and
		// unlimited descriptors cost nothing more.
		{"limited, unlimited and unmatched", rq("d", 0, ds("user=a"), ds("open=x"), ds("other=y")), 4},
	} {
		ctx := context.Background()
		call := func() {
			if _, err := svc.ShouldRateLimit(ctx, tc.req); err != nil {
				t.Fatal(err)
			}
		}
		call()
		if got := testing.AllocsPerRun(100, call); got != tc.want {
			t.Errorf("%s: %v allocations, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCodecDecodesInPlace: a request that arrives in one buffer is
// decoded from it, allocating only the decoded message (its descriptor,
// entry, their slices and its three strings); one that fails to decode
// keeps a copy of its bytes, which naming its bad field reads after the
// transport has reused the buffer.
func TestCodecDecodesInPlace(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	c := codec{base: encoding.GetCodecV2(grpcproto.Name)}
	good, err := proto.Marshal(rq("d", 0, ds("user=a")))
	if err != nil {
		t.Fatal(err)
	}
	var w wireRequest
	decode := func() {
		w = wireRequest{}
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(good)}, &w); err != nil || w.err != nil {
			t.Fatal(err, w.err)
		}
	}
	if got := testing.AllocsPerRun(100, decode); got != 7 {
		t.Errorf("decoding one buffer: %v allocations, want 7", got)
	}
	if w.req.Domain != "d" || w.req.Descriptors[0].Entries[0].Value != "a" {
		t.Errorf("decoded %v", &w.req)
	}
	bad := protowire.AppendBytes(protowire.AppendTag(nil, fieldDomain, protowire.BytesType), []byte{0xff})
	w = wireRequest{}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(bad)}, &w); err != nil || w.err == nil {
		t.Fatalf("invalid UTF-8: err %v, decode error %v", err, w.err)
	}
	clear(bad)
	if field, rule := badField(w.raw); field != "domain" || rule != "must be valid UTF-8" {
		t.Errorf("after the buffer was reused: field %q, rule %q, want domain, must be valid UTF-8", field, rule)
	}
}
