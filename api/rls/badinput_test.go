package rls

import (
	"context"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratelimitd/ratelimitd/table"
)

// rawCodec sends a *[]byte as it is and decodes answers as protobuf, so
// that a test can send bytes the protobuf library would refuse to marshal.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

func (rawCodec) Name() string { return "proto" }

// wireString appends field num holding s (any bytes) to b.
func wireString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// wireRequestBytes encodes a request of domain with one descriptor of one
// entry (key, value), without checking UTF-8.
func wireRequestBytes(domain, key, value string) []byte {
	var entry, desc, req []byte
	entry = wireString(entry, 1, key)
	entry = wireString(entry, 2, value)
	desc = protowire.AppendTag(desc, 1, protowire.BytesType)
	desc = protowire.AppendBytes(desc, entry)
	req = wireString(req, 1, domain)
	req = protowire.AppendTag(req, 2, protowire.BytesType)
	return protowire.AppendBytes(req, desc)
}

// TestBadInput: every bad request is answered InvalidArgument naming the
// field, nothing panics, and the server keeps serving.
func TestBadInput(t *testing.T) {
	t.Parallel()
	svc, _, _ := newService(t, loadFiles(t, "ported/basic.yaml"), Options{})
	client, conn := serveGRPC(t, svc)
	many := &rlcommon.RateLimitDescriptor{}
	for range 10000 {
		many.Entries = append(many.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
	}
	manyDescs := make([]*rlcommon.RateLimitDescriptor, MaxDescriptors+1)
	for i := range manyDescs {
		manyDescs[i] = ds("key2=x")
	}
	badUnit := ds("key1=value1")
	badUnit.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit(99)}
	unknownUnit := ds("key1=value1")
	unknownUnit.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}
	badMult := ds("key1=value1")
	badMult.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_YEAR, UnitMultiplier: wrapperspb.UInt32(2)}
	zeroMult := ds("key1=value1")
	zeroMult.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_SECOND, UnitMultiplier: wrapperspb.UInt32(0)}
	cases := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{"empty domain", rq("", 0, ds("a=b")), "domain: must not be empty"},
		{"long domain", rq(strings.Repeat("d", MaxDomainLen+1), 0, ds("a=b")), "domain: must be at most 1024 bytes"},
		{"no descriptors", rq("basic", 0), "descriptors: must not be empty"},
		{"too many descriptors", rq("basic", 0, manyDescs...), "descriptors: must hold at most 256 descriptors"},
		{"no entries", rq("basic", 0, ds("a=b"), &rlcommon.RateLimitDescriptor{}), "descriptors[1].entries: must not be empty"},
		{"nil entry", rq("basic", 0, &rlcommon.RateLimitDescriptor{Entries: []*rlcommon.RateLimitDescriptor_Entry{{}}}), "descriptors[0].entries[0].key: must not be empty"},
		{"empty key", rq("basic", 0, ds("a=b", "=v")), "descriptors[0].entries[1].key: must not be empty"},
		{"10,000 entries", rq("basic", 0, many), "descriptors[0].entries: must hold at most 64 entries"},
		{"long key", rq("basic", 0, ds(strings.Repeat("k", MaxKeyLen+1)+"=v")), "descriptors[0].entries[0].key: must be at most 1024 bytes"},
		{"1 MiB value", rq("basic", 0, ds("key2="+strings.Repeat("v", 1<<20))), "descriptors[0].entries[0].value: must be at most 65536 bytes"},
		{"unknown unit enum", rq("basic", 0, badUnit), "descriptors[0].limit.unit: must be one of SECOND, MINUTE, HOUR, DAY, MONTH, YEAR"},
		{"unit UNKNOWN", rq("unknown-domain", 0, unknownUnit), "descriptors[0].limit.unit: must be one of"},
		{"multiplier past MaxScale", rq("basic", 0, badMult), "descriptors[0].limit.unit_multiplier: must be from 1 to 1 for unit YEAR"},
		{"multiplier zero", rq("basic", 0, zeroMult), "descriptors[0].limit.unit_multiplier: must be from 1 to"},
		{"hits_addend past int64", rq("basic", 0, dh(1<<63, "key2=x")), "descriptors[0].hits_addend: must be at most 9223372036854775807"},
	}
	for _, c := range cases {
		_, err := client.ShouldRateLimit(context.Background(), c.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
			t.Errorf("%s: got %v, want InvalidArgument %q", c.name, err, c.want)
		}
	}
	// Invalid UTF-8 cannot be marshalled by the protobuf library: send raw bytes.
	raw := []struct {
		name string
		b    []byte
		want string
	}{
		{"invalid UTF-8 domain", wireRequestBytes("bad\xff", "k", "v"), "domain: must be valid UTF-8"},
		{"invalid UTF-8 key", wireRequestBytes("basic", "k\xc3", "v"), "descriptors[0].entries[0].key: must be valid UTF-8"},
		{"invalid UTF-8 value", wireRequestBytes("basic", "k", "\xed\xa0\x80"), "descriptors[0].entries[0].value: must be valid UTF-8"},
		{"broken wire format", []byte{0x12, 0x7f, 0x01}, "request: is not a valid RateLimitRequest message"},
	}
	for _, c := range raw {
		b := c.b
		var resp rlsv3.RateLimitResponse
		err := conn.Invoke(context.Background(), rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, &b, &resp, grpc.ForceCodecV2(rawCodec{}))
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != c.want {
			t.Errorf("%s: got %v, want InvalidArgument %q", c.name, err, c.want)
		}
	}
	// And it still serves.
	got, err := client.ShouldRateLimit(context.Background(), rq("basic", 0, ds("key2=after")))
	if err != nil {
		t.Fatal(err)
	}
	equalResp(t, "after bad input", got, rs(cOK, ok(20, minute, 19, resetMinute)))
}

// FuzzRequestMapping feeds arbitrary requests through validation, matching,
// keying and counting: nothing panics, every answer has one status per
// descriptor and never the UNKNOWN code, every error is InvalidArgument,
// and bucket ids are valid table ids.
func FuzzRequestMapping(f *testing.F) {
	f.Add("wildcard", "wild", "foo1", "nestedWild", "val1", uint32(1), uint64(1), false, uint32(0), uint32(0))
	f.Add("share", "files", "files/x", "", "", uint32(0), uint64(0), true, uint32(3), uint32(2))
	f.Add("basic", "key1", "value1", "subkey1", strings.Repeat("é", 700), uint32(5), uint64(7), false, uint32(10), uint32(1))
	f.Add("", "", "", "", "", uint32(0), uint64(0), false, uint32(99), uint32(0))
	cfg := loadFiles(f, "ported/basic.yaml", "ported/wildcard.yaml", "ported/share.yaml", "ported/cache.yaml")
	svc, _, _ := newService(f, cfg, Options{})
	f.Fuzz(func(t *testing.T, domain, k1, v1, k2, v2 string, reqHits uint32, hits uint64, negative bool, unit, mult uint32) {
		d := ds()
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: k1, Value: v1})
		if k2 != "" || v2 != "" {
			d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: k2, Value: v2})
		}
		if hits%3 != 0 {
			d.HitsAddend = wrapperspb.UInt64(hits % 1000)
		}
		d.IsNegativeHits = negative
		if unit != 0 {
			d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: unit % 50, Unit: typev3.RateLimitUnit(unit % 8)}
			if mult != 0 {
				d.Limit.UnitMultiplier = wrapperspb.UInt32(mult % 400)
			}
		}
		req := rq(domain, reqHits%100, d, ds(k1+"="+v2))
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("error %v, want InvalidArgument only", err)
			}
			return
		}
		if len(resp.Statuses) != len(req.Descriptors) || resp.OverallCode == rlsv3.RateLimitResponse_UNKNOWN {
			t.Fatalf("answer %v for %d descriptors", resp, len(req.Descriptors))
		}
		for _, st := range resp.Statuses {
			if st.Code == rlsv3.RateLimitResponse_UNKNOWN {
				t.Fatalf("status UNKNOWN in %v", resp)
			}
		}
		if cfg.knows(domain) {
			for _, desc := range req.Descriptors {
				m := cfg.match(domain, desc)
				if m.limit == nil {
					continue
				}
				id := bucketID(domain, desc, m.shared)
				r := table.Request{ID: id, Policy: table.Policy{Scale: time.Second, Limit: 1}, Namespace: Namespace}
				if err := r.Validate(); err != nil {
					t.Fatalf("bucket id %q: %v", id, err)
				}
			}
		}
	})
}
