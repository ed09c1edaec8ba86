package rls

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
)

// epoch is the start of every test clock: Unix 1,000,000 s, as the
// reference's cache tests use, so windows end 1 s (second), 20 s (minute),
// 800 s (hour) and 36,800 s (day) later.
var epoch = time.Unix(1000000, 0)

// Seconds to the end of each window at epoch.
const (
	resetSecond = 1
	resetMinute = 20
	resetHour   = 800
	resetDay    = 36800
)

// Units, short.
const (
	second = rlsv3.RateLimitResponse_RateLimit_SECOND
	minute = rlsv3.RateLimitResponse_RateLimit_MINUTE
	hour   = rlsv3.RateLimitResponse_RateLimit_HOUR
	day    = rlsv3.RateLimitResponse_RateLimit_DAY
)

// startSystem starts an in-memory System on a manual clock at epoch.
func startSystem(t testing.TB) (*actors.System, *clocktest.Manual) {
	t.Helper()
	clock := clocktest.New(epoch)
	sys, err := actors.Start(context.Background(), actors.Config{Shards: 4, SweepInterval: -1, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Stop(context.Background()) })
	return sys, clock
}

// loadFiles loads the testdata files (relative to testdata/) as one config.
func loadFiles(t testing.TB, names ...string) *Config {
	t.Helper()
	var files []File
	for _, n := range names {
		data, err := readTestdata(n)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, File{Name: n, Data: data})
	}
	c, err := Parse(files...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newService builds a Service over c on a fresh System.
func newService(t testing.TB, c *Config, opts Options) (*Service, *actors.System, *clocktest.Manual) {
	t.Helper()
	sys, clock := startSystem(t)
	opts.Clock = clock.Now
	svc, err := NewService(sys, NewStore(c), opts)
	if err != nil {
		t.Fatal(err)
	}
	return svc, sys, clock
}

// serveGRPC serves svc on 127.0.0.1:0 and returns a client of it.
func serveGRPC(t testing.TB, svc *Service) (rlsv3.RateLimitServiceClient, *grpc.ClientConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := NewGRPCServer(svc)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		g.Stop()
		<-done
	})
	return rlsv3.NewRateLimitServiceClient(conn), conn
}

// rq is a request of domain with descs and the request-level hits_addend.
func rq(domain string, hits uint32, descs ...*rlcommon.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: hits, Descriptors: descs}
}

// ds is a descriptor of "key=value" entries ("key" alone: an empty value).
func ds(kvs ...string) *rlcommon.RateLimitDescriptor {
	d := &rlcommon.RateLimitDescriptor{}
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return d
}

// dh is ds with its own hits_addend.
func dh(hits uint64, kvs ...string) *rlcommon.RateLimitDescriptor {
	d := ds(kvs...)
	d.HitsAddend = wrapperspb.UInt64(hits)
	return d
}

// rs is a response with overall code and statuses.
func rs(overall rlsv3.RateLimitResponse_Code, sts ...*rlsv3.RateLimitResponse_DescriptorStatus) *rlsv3.RateLimitResponse {
	return &rlsv3.RateLimitResponse{OverallCode: overall, Statuses: sts}
}

const (
	cOK   = rlsv3.RateLimitResponse_OK
	cOver = rlsv3.RateLimitResponse_OVER_LIMIT
)

// none is the status of a descriptor without a limit.
func none() *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{Code: cOK}
}

// unlimited is the status of an unlimited descriptor.
func unlimited() *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{Code: cOK, LimitRemaining: 4294967295}
}

// lim is the status of a limited descriptor.
func lim(code rlsv3.RateLimitResponse_Code, rpu uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, rem uint32, reset int64) *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{
		Code:               code,
		CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: rpu, Unit: unit},
		LimitRemaining:     rem,
		DurationUntilReset: durationpb.New(time.Duration(reset) * time.Second),
	}
}

// named is st with its limit's name.
func named(name string, st *rlsv3.RateLimitResponse_DescriptorStatus) *rlsv3.RateLimitResponse_DescriptorStatus {
	st.CurrentLimit.Name = name
	return st
}

// equalResp fails t unless got is want, printing both in proto-JSON.
func equalResp(t testing.TB, what string, got, want *rlsv3.RateLimitResponse) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", what, protojson.Format(got), protojson.Format(want))
	}
}

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu     sync.Mutex
	calls  []CallEvent
	limits []LimitEvent
}

func (r *recorder) ObserveCall(e CallEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Latency = 0 // not reproducible
	r.calls = append(r.calls, e)
}

func (r *recorder) ObserveLimit(e LimitEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limits = append(r.limits, e)
}

// last returns the last limit event, and whether there is one.
func (r *recorder) last() (LimitEvent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.limits) == 0 {
		return LimitEvent{}, false
	}
	return r.limits[len(r.limits)-1], true
}

// totals sums the limit events of (domain, key).
func (r *recorder) totals(domain, key string) LimitEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	sum := LimitEvent{Domain: domain, Key: key}
	for _, e := range r.limits {
		if e.Domain == domain && e.Key == key {
			sum.Hits += e.Hits
			sum.WithinLimit += e.WithinLimit
			sum.NearLimit += e.NearLimit
			sum.OverLimit += e.OverLimit
			sum.ShadowMode += e.ShadowMode
		}
	}
	return sum
}

var _ Observer = (*recorder)(nil)

// readTestdata reads testdata/name.
func readTestdata(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("testdata", filepath.FromSlash(name)))
}
func itoa(i int) string { return strconv.Itoa(i) }
