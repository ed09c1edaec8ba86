package rls

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/clock/clocktest"
	"github.com/ratelimitd/ratelimitd/table"
)

// TestConcurrentExactlyLimit: 1,000 concurrent calls on one descriptor with
// limit 100 admit exactly 100, in both counting modes.
func TestConcurrentExactlyLimit(t *testing.T) {
	t.Parallel()
	for _, counted := range []bool{false, true} {
		svc, _, _ := newService(t, mustParse(t, "domain: c\ndescriptors:\n  - {key: k, rate_limit: {unit: hour, requests_per_unit: 100}}\n"), Options{CountOverLimit: counted})
		client, _ := serveGRPC(t, svc)
		var wg sync.WaitGroup
		var mu sync.Mutex
		okN, overN := 0, 0
		var firstErr error
		for range 1000 {
			wg.Go(func() {
				resp, err := client.ShouldRateLimit(context.Background(), rq("c", 0, ds("k=same")))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					firstErr = err
				case resp.OverallCode == cOK:
					okN++
				default:
					overN++
				}
			})
		}
		wg.Wait()
		if firstErr != nil || okN != 100 || overN != 900 {
			t.Errorf("CountOverLimit %v: %d OK, %d over, err %v; want 100 and 900", counted, okN, overN, firstErr)
		}
	}
}

func mustParse(t testing.TB, doc string) *Config {
	t.Helper()
	c, err := Parse(File{Name: "inline.yaml", Data: []byte(doc)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// failing is a Checker whose every call fails with err.
type failing struct{ err error }

func (f failing) Check(context.Context, table.Request) (table.Decision, error) {
	return table.Decision{}, f.err
}
func (f failing) CheckAll(context.Context, []table.Request) ([]table.Decision, bool, error) {
	return nil, false, f.err
}
func (f failing) Refund(context.Context, table.Request) (table.Decision, error) {
	return table.Decision{}, f.err
}

// TestCheckerFailureIsUnavailable is the reference's TestCacheError: a
// failing limiter is answered Unavailable (never Unknown), and a descriptor
// without a limit is answered without it.
func TestCheckerFailureIsUnavailable(t *testing.T) {
	t.Parallel()
	cfg := loadFiles(t, "ported/service.yaml")
	sys, _ := startSystem(t)
	if err := sys.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Checker{sys, failing{actors.ErrUnavailable}, failing{errors.New("disk on fire")}} {
		rec := &recorder{}
		svc, err := NewService(c, NewStore(cfg), Options{Observer: rec})
		if err != nil {
			t.Fatal(err)
		}
		client, _ := serveGRPC(t, svc)
		_, err = client.ShouldRateLimit(context.Background(), rq("service", 0, ds("foo=bar")))
		if status.Code(err) != codes.Unavailable || !strings.HasPrefix(status.Convert(err).Message(), "rate limiter unavailable: ") {
			t.Errorf("%T: got %v, want Unavailable", c, err)
		}
		resp, err := client.ShouldRateLimit(context.Background(), rq("service", 0, ds("hello=world"), ds("baz=qux")))
		if err != nil {
			t.Fatalf("%T: unlimited and unmatched: %v", c, err)
		}
		equalResp(t, "no limiter needed", resp, rs(cOK, none(), unlimited()))
		if len(rec.calls) != 2 || rec.calls[0] != (CallEvent{Domain: "service", Transport: TransportGRPC, Outcome: OutcomeError}) {
			t.Errorf("%T: calls %+v", c, rec.calls)
		}
	}
}

// TestHealthAndReflection: the server answers grpc.health.v1 SERVING and
// lists the rate-limit service through reflection (what grpcurl uses).
func TestHealthAndReflection(t *testing.T) {
	t.Parallel()
	svc, _, _ := newService(t, loadFiles(t, "ported/basic.yaml"), Options{})
	_, conn := serveGRPC(t, svc)
	for _, name := range []string{"", rlsv3.RateLimitService_ServiceDesc.ServiceName} {
		resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q: %v, %v; want SERVING", name, resp, err)
		}
	}
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	got := strings.Join(names, ",")
	for _, want := range []string{"envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(got, want) {
			t.Errorf("reflection lists %s; want %s among them", got, want)
		}
	}
	// The file descriptor of the service resolves, so grpcurl can build requests.
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: "envoy.service.ratelimit.v3.RateLimitService"}}); err != nil {
		t.Fatal(err)
	}
	if r, err := stream.Recv(); err != nil || len(r.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("file containing the service: %v, %v", r, err)
	}
	_ = stream.CloseSend()
}

// TestJSONEndpoint is the reference's POST /json: proto-JSON in and out,
// 200 or 429, 400 naming the field, 405 for another method.
func TestJSONEndpoint(t *testing.T) {
	t.Parallel()
	svc, _, _ := newService(t, loadFiles(t, "ported/service.yaml"), Options{})
	srv := httptest.NewServer(svc.JSONHandler())
	t.Cleanup(srv.Close)
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(srv.URL+JSONPath, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	compact := func(s string) string {
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(s)); err != nil {
			t.Fatalf("not JSON: %q", s)
		}
		return b.String()
	}
	cases := []struct {
		body string
		code int
		want string
	}{
		{`{"domain":"service","descriptors":[{"entries":[{"key":"foo","value":"bar"}]}]}`, 200,
			`{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"name":"key_name","requestsPerUnit":10,"unit":"MINUTE"},"limitRemaining":9,"durationUntilReset":"20s"}]}`},
		{`{"domain":"service","descriptors":[{"entries":[{"key":"foo","value":"bar"}],"hits_addend":10}]}`, 429,
			`{"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"name":"key_name","requestsPerUnit":10,"unit":"MINUTE"},"durationUntilReset":"20s"}]}`},
		{`{"domain":"service","descriptors":[{"entries":[{"key":"hello","value":"world"}]}]}`, 200,
			`{"overallCode":"OK","statuses":[{"code":"OK"}]}`},
		{`{"domain":"","descriptors":[{"entries":[{"key":"a"}]}]}`, 400, `{"error":"domain: must not be empty","field":"domain"}`},
		{`{"domain":"service","descriptors":[{"entries":[{"key":""}]}]}`, 400,
			`{"error":"descriptors[0].entries[0].key: must not be empty","field":"descriptors[0].entries[0].key"}`},
		{`{"domain":"service","descriptors":[{"entries":[{"key":"a"}],"limit":{"requests_per_unit":1,"unit":"FORTNIGHT"}}]}`, 400, ""},
		{`{"domain":`, 400, ""},
		{`{"domain":"service","bogus":1}`, 400, ""},
	}
	for i, c := range cases {
		code, body := post(c.body)
		if code != c.code {
			t.Errorf("case %d: status %d, want %d (%s)", i, code, c.code, body)
			continue
		}
		if c.want != "" && compact(body) != c.want {
			t.Errorf("case %d: body %s\nwant %s", i, compact(body), c.want)
		}
		if c.want == "" {
			var e struct{ Error, Field string }
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" || e.Field != "body" {
				t.Errorf("case %d: body %s, want a JSON error about the body", i, body)
			}
		}
	}
	resp, err := http.Get(srv.URL + JSONPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET: %d Allow %q, want 405 Allow POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestLongValuesHashed: descriptors whose id would pass table.MaxIDLen are
// counted in buckets of their own (a SHA-256 tail), not refused, and two
// long values differing only at their end do not share a bucket.
func TestLongValuesHashed(t *testing.T) {
	t.Parallel()
	svc, _, _ := newService(t, mustParse(t, "domain: l\ndescriptors:\n  - {key: path, rate_limit: {unit: hour, requests_per_unit: 1}}\n"), Options{})
	client, _ := serveGRPC(t, svc)
	long := strings.Repeat("/x", 3000)
	for _, v := range []string{long + "a", long + "b"} {
		resp, err := client.ShouldRateLimit(context.Background(), rq("l", 0, ds("path="+v)))
		if err != nil {
			t.Fatal(err)
		}
		equalResp(t, "first hit of "+v[len(v)-1:], resp, rs(cOK, ok(1, hour, 0, resetHour)))
	}
	resp, err := client.ShouldRateLimit(context.Background(), rq("l", 0, ds("path="+long+"a")))
	if err != nil {
		t.Fatal(err)
	}
	equalResp(t, "second hit", resp, rs(cOver, over(1, hour, resetHour)))
	id := bucketID("l", ds("path="+long+"a"), nil)
	if len(id) > table.MaxIDLen || !strings.Contains(id, hashMark) || !strings.HasPrefix(id, "l|path=/x/x") {
		t.Errorf("id %q…: want at most %d bytes, a readable prefix and %s", id[:40], table.MaxIDLen, hashMark)
	}
}

// TestBucketIDsUnambiguous: escaping keeps ids of different descriptors apart.
func TestBucketIDsUnambiguous(t *testing.T) {
	t.Parallel()
	cases := []struct {
		domain string
		d      *rlcommon.RateLimitDescriptor
		shared []string
		want   string
	}{
		{"rl", ds("remote_address=10.0.0.1"), nil, "rl|remote_address=10.0.0.1"},
		{"rl", ds("a=b|c=d"), nil, "rl|a=b%7Cc%3Dd"},
		{"rl", ds("a=b", "c=d"), nil, "rl|a=b|c=d"},
		{"r|l", ds("a=%"), nil, "r%7Cl|a=%25"},
		{"rl", ds("path=/api/v1"), []string{"/api/*"}, "rl|path~/api/*"},
		{"rl", ds("path=~#"), nil, "rl|path=%7E%23"},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		got := bucketID(c.domain, c.d, c.shared)
		if got != c.want || seen[got] {
			t.Errorf("bucketID(%q, %v) = %q, want %q (and unique)", c.domain, c.d, got, c.want)
		}
		seen[got] = true
	}
}

// TestRefund: is_negative_hits gives hits back (the reference ignores it).
func TestRefund(t *testing.T) {
	t.Parallel()
	for _, counted := range []bool{false, true} {
		svc, _, _ := newService(t, mustParse(t, "domain: r\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 10}}\n"), Options{CountOverLimit: counted})
		client, _ := serveGRPC(t, svc)
		call := func(d *rlcommon.RateLimitDescriptor) *rlsv3.RateLimitResponse {
			resp, err := client.ShouldRateLimit(context.Background(), rq("r", 0, d))
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		equalResp(t, "spend 8", call(dh(8, "k=v")), rs(cOK, ok(10, minute, 2, resetMinute)))
		refund := dh(5, "k=v")
		refund.IsNegativeHits = true
		equalResp(t, "refund 5", call(refund), rs(cOK, ok(10, minute, 7, resetMinute)))
		equalResp(t, "spend 7", call(dh(7, "k=v")), rs(cOK, ok(10, minute, 0, resetMinute)))
	}
}

// TestAlgorithmsAndMultiplier: the extensions count by their algorithm and
// window, and current_limit carries a unit_multiplier the config set.
func TestAlgorithmsAndMultiplier(t *testing.T) {
	t.Parallel()
	svc, _, clock := newService(t, mustParse(t, `domain: x
descriptors:
  - {key: tb, rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token_bucket, burst: 2}}
  - {key: half, rate_limit: {unit: minute, requests_per_unit: 3, unit_multiplier: 30}}
`), Options{})
	client, _ := serveGRPC(t, svc)
	call := func(kv string) *rlsv3.RateLimitResponse {
		resp, err := client.ShouldRateLimit(context.Background(), rq("x", 0, ds(kv)))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// A bucket of 2 refilled at one a second: two pass, the third waits 1 s.
	equalResp(t, "tb 1", call("tb=a"), rs(cOK, ok(60, minute, 1, 1)))
	equalResp(t, "tb 2", call("tb=a"), rs(cOK, ok(60, minute, 0, 2)))
	equalResp(t, "tb 3", call("tb=a"), rs(cOver, over(60, minute, 1)))
	clock.Advance(time.Second)
	equalResp(t, "tb after 1s", call("tb=a"), rs(cOK, ok(60, minute, 0, 2)))
	// 30 minutes: epoch 1,000,000 s is 1,000 s into its 1,800 s window.
	half := func(rem uint32) *rlsv3.RateLimitResponse {
		st := ok(3, minute, rem, 1800-1000000%1800-1)
		st.CurrentLimit.UnitMultiplier = wrapperspb.UInt32(30)
		return rs(cOK, st)
	}
	equalResp(t, "30 min", call("half=a"), half(2))
	// An override's multiplier is echoed too.
	d := ds("any=thing")
	d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_SECOND, UnitMultiplier: wrapperspb.UInt32(10)}
	resp, err := client.ShouldRateLimit(context.Background(), rq("x", 0, d))
	if err != nil {
		t.Fatal(err)
	}
	want := ok(5, second, 4, 10-1000001%10)
	want.CurrentLimit.UnitMultiplier = wrapperspb.UInt32(10)
	equalResp(t, "override ×10 s", resp, rs(cOK, want))
}

// TestReplacedLimitNotCounted: a limit replaced in a request is answered
// without a limit and consumes nothing.
func TestReplacedLimitNotCounted(t *testing.T) {
	t.Parallel()
	svc, _, _ := newService(t, loadFiles(t, "ported/readme/example7.yaml"), Options{})
	client, _ := serveGRPC(t, svc)
	both := rq("example7", 0, ds("key_1=value_1", "user=bkthomps"), ds("key_2=value_2", "user=bkthomps"))
	for range 3 {
		if _, err := client.ShouldRateLimit(context.Background(), both); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := client.ShouldRateLimit(context.Background(), rq("example7", 0, ds("key_1=value_1", "user=bkthomps")))
	if err != nil {
		t.Fatal(err)
	}
	equalResp(t, "specific_limit untouched", resp, rs(cOK, named("specific_limit", ok(5, second, 4, resetSecond))))
}

// TestFullTableIsOverLimit: a check the full table refuses is OVER_LIMIT,
// with the window's end from the clock.
func TestFullTableIsOverLimit(t *testing.T) {
	t.Parallel()
	sys, err := actors.Start(context.Background(), actors.Config{Shards: 1, SweepInterval: -1, MaxBuckets: 1, Clock: clocktest.New(epoch)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Stop(context.Background()) })
	svc, err := NewService(sys, NewStore(mustParse(t, "domain: f\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 5}}\n")),
		Options{Clock: func() time.Time { return epoch }})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := svc.ShouldRateLimit(context.Background(), rq("f", 0, ds("k=1")))
	if err != nil {
		t.Fatal(err)
	}
	equalResp(t, "first bucket", resp, rs(cOK, ok(5, minute, 4, resetMinute)))
	resp, err = svc.ShouldRateLimit(context.Background(), rq("f", 0, ds("k=2")))
	if err != nil {
		t.Fatal(err)
	}
	equalResp(t, "table full", resp, rs(cOver, over(5, minute, resetMinute)))
}
