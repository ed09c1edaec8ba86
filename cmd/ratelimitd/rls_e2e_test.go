//go:build unix

package main

// End-to-end tests of Envoy's Rate Limit Service: the built daemon with
// --grpc-listen and --rls-config, driven by the Go gRPC client.

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// rlsService is the gRPC name of Envoy's Rate Limit Service.
const rlsService = "envoy.service.ratelimit.v3.RateLimitService"

// rlsDaemon is a daemon serving the Rate Limit Service, and a client of it.
type rlsDaemon struct {
	*daemon
	grpcAddr string
	conn     *grpc.ClientConn
	client   rlsv3.RateLimitServiceClient
}

// startRLSDaemon starts the daemon with --grpc-listen 127.0.0.1:0 and
// flags, and connects a gRPC client to the address its "grpc listening"
// line names.
func startRLSDaemon(t *testing.T, flags ...string) *rlsDaemon {
	t.Helper()
	d := startDaemon(t, append([]string{"--grpc-listen", "127.0.0.1:0"}, flags...)...)
	line, err := d.logs.waitLine(startTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == "grpc listening" })
	if err != nil {
		t.Fatalf("no grpc listening line: %v\n%s", err, d.logs)
	}
	r := &rlsDaemon{daemon: d, grpcAddr: line["addr"]}
	r.conn, err = grpc.NewClient(r.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.conn.Close() })
	r.client = rlsv3.NewRateLimitServiceClient(r.conn)
	return r
}

// rlsRequest is a request of domain with one descriptor of "key=value" entries.
func rlsRequest(domain string, hits uint32, kvs ...string) *rlsv3.RateLimitRequest {
	d := &rlcommon.RateLimitDescriptor{}
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: hits, Descriptors: []*rlcommon.RateLimitDescriptor{d}}
}

// should calls ShouldRateLimit, failing t on an error.
func (r *rlsDaemon) should(t *testing.T, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.client.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	return resp
}

// yearLimit is a config of domain whose key k has a limit of rpu per
// (365-day, epoch-aligned) year: one window for the length of any test.
func yearLimit(domain, rpu string) string {
	return "domain: " + domain + "\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: " + rpu + "}\n"
}

// TestE2ERLS: a config directory of two files; ShouldRateLimit from the
// Go client counts exactly, one status per descriptor; POST /json answers
// 200 and 429 from the same counters; health and reflection answer; bad
// requests are InvalidArgument and the server goes on serving.
func TestE2ERLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), yearLimit("a", "3"))
	writeFile(t, filepath.Join(dir, "edge.yml"), `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: year, requests_per_unit: 2, name: per_ip}
  - key: path
    value: "/api/*"
    rate_limit: {unlimited: true}
`)
	d := startRLSDaemon(t, "--rls-config", dir)

	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		resp := d.should(t, rlsRequest("a", 0, "k=x"))
		st := resp.Statuses[0]
		wantRem := uint32(max(2-i, 0))
		if resp.OverallCode != want || len(resp.Statuses) != 1 || st.Code != want || st.LimitRemaining != wantRem || st.CurrentLimit.GetRequestsPerUnit() != 3 || st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_YEAR {
			t.Fatalf("call %d: got %v, want %v with 3 per YEAR, %d remaining", i+1, resp, want, wantRem)
		}
	}
	// Two descriptors, one unlimited, one with no limit in an unknown domain's stead.
	resp := d.should(t, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{
		{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "path", Value: "/api/users"}}},
		{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}},
		{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "nothing", Value: "here"}}},
	}})
	if len(resp.Statuses) != 3 || resp.OverallCode != rlsv3.RateLimitResponse_OK ||
		resp.Statuses[0].LimitRemaining != 4294967295 || resp.Statuses[0].CurrentLimit != nil ||
		resp.Statuses[1].CurrentLimit.GetName() != "per_ip" || resp.Statuses[1].LimitRemaining != 1 ||
		resp.Statuses[2].Code != rlsv3.RateLimitResponse_OK || resp.Statuses[2].CurrentLimit != nil {
		t.Fatalf("three descriptors: got %v", resp)
	}

	// POST /json, the reference's HTTP API, on the public listener: the
	// same counter (10.0.0.1 has 1 of 2 left).
	body := `{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}`
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		r, _ := d.do(t, http.MethodPost, "/json", "application/json", strings.NewReader(body))
		wantCode := map[int]string{200: `"overallCode":"OK"`, 429: `"overallCode":"OVER_LIMIT"`}[want]
		if r.status != want || !strings.Contains(strings.ReplaceAll(string(r.body), " ", ""), wantCode) {
			t.Fatalf("POST /json %d: got %v, want %d with %s", i+1, r, want, wantCode)
		}
	}
	if r, _ := d.do(t, http.MethodPost, "/json", "application/json", strings.NewReader(`{"domain":""}`)); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"field":"domain"`) {
		t.Errorf("POST /json with an empty domain: got %v, want 400 naming domain", r)
	}
	if r := d.get(t, "/json"); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "POST" {
		t.Errorf("GET /json: got %v, want 405 with Allow: POST", r)
	}
	if r := d.get(t, "/jsonx"); r.status != http.StatusNotFound {
		t.Errorf("GET /jsonx: got %v, want 404", r)
	}

	// Health: SERVING for the server and for the service.
	hc := healthpb.NewHealthClient(d.conn)
	for _, svc := range []string{"", rlsService} {
		h, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: got %v, %v; want SERVING", svc, h, err)
		}
	}
	// Reflection lists the services, as grpcurl list does.
	services := reflectionServices(t, d.conn)
	for _, want := range []string{rlsService, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(services, want) {
			t.Errorf("reflection lists %v, want %s among them", services, want)
		}
	}
	grpcurlList(t, "-plaintext", d.grpcAddr)

	// Bad input: InvalidArgument naming the field; the server goes on.
	for _, c := range []struct {
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{rlsRequest("", 0, "k=x"), "domain: must not be empty"},
		{&rlsv3.RateLimitRequest{Domain: "a"}, "descriptors: must not be empty"},
		{rlsRequest("a", 0, "=x"), "descriptors[0].entries[0].key: must not be empty"},
		{rlsRequest("a", 0, "k="+strings.Repeat("v", 100<<10)), "descriptors[0].entries[0].value: must be at most 65536 bytes"},
	} {
		_, err := d.client.ShouldRateLimit(context.Background(), c.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
			t.Errorf("bad request: got %v, want InvalidArgument %q", err, c.want)
		}
	}
	if resp := d.should(t, rlsRequest("a", 0, "k=other")); resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Errorf("after the bad requests: got %v, want OK", resp)
	}
	d.pollMetrics(t, "the RLS series", func(get func(string) float64) (bool, string) {
		over := get(`ratelimitd_rls_over_limit_total{domain="a",key="k"}`)
		invalid := get(`ratelimitd_rls_requests_total{domain="",outcome="invalid",transport="grpc"}`)
		return over == 1 && invalid == 4, "over " + ftoa(over) + " invalid " + ftoa(invalid)
	})
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// reflectionServices lists the services the server at conn reflects.
func reflectionServices(t *testing.T, conn *grpc.ClientConn) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
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
	_ = stream.CloseSend()
	return names
}

// grpcurlList runs grpcurl with args (the connection's flags and the
// address) and list, if findGrpcurl finds grpcurl, and checks that it
// lists the Rate Limit Service and health; without grpcurl it says so and
// checks nothing (the tests' own gRPC clients have checked the same).
func grpcurlList(t *testing.T, args ...string) {
	t.Helper()
	bin := findGrpcurl()
	if bin == "" {
		t.Logf("grpcurl not found on PATH nor in $(go env GOPATH)/bin: skipping `grpcurl %s list` (install it with go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4)", strings.Join(args, " "))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(args, "list")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), rlsService) || !strings.Contains(string(out), "grpc.health.v1.Health") {
		t.Errorf("grpcurl %s list: %v\n%s\nwant %s and grpc.health.v1.Health listed", strings.Join(args, " "), err, out, rlsService)
	}
}

// findGrpcurl returns the path of grpcurl, on PATH or in
// $(go env GOPATH)/bin, or "" if it is in neither.
func findGrpcurl() string {
	if bin, err := exec.LookPath("grpcurl"); err == nil {
		return bin
	}
	gopath, _ := exec.Command("go", "env", "GOPATH").Output()
	for _, p := range filepath.SplitList(strings.TrimSpace(string(gopath))) {
		if c := filepath.Join(p, "bin", "grpcurl"); fileExists(c) {
			return c
		}
	}
	return ""
}

// fileExists reports whether p is a regular file.
func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// TestE2ERLSReloadUnderLoad: while clients keep calling ShouldRateLimit on
// one descriptor, the config is edited (limit 20 → 30), broken (30 stays in
// force), and changed behind a link the watcher cannot see, applied by
// SIGHUP (30 → 40): at each step exactly the limit in force is admitted,
// never more, and the counts carry over. The load is bounded in requests
// and in time.
func TestE2ERLSReloadUnderLoad(t *testing.T) {
	t.Parallel()
	dir, outside := t.TempDir(), t.TempDir()
	// The config is a link to a file in another directory, so that a change
	// of that file is seen only on SIGHUP.
	target := filepath.Join(outside, "load.yaml")
	writeFile(t, target, yearLimit("load", "20"))
	link := filepath.Join(dir, "load.yaml")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	d := startRLSDaemon(t, "--rls-config", dir)

	const workers, maxRequests, maxTime = 4, 40000, 60 * time.Second
	var admitted, sent, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	deadline := time.Now().Add(maxTime)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := rlsRequest("load", 0, "k=v")
			for sent.Add(1) <= maxRequests && time.Now().Before(deadline) {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := d.client.ShouldRateLimit(ctx, req)
				cancel()
				switch {
				case err != nil:
					failed.Add(1)
				case resp.OverallCode == rlsv3.RateLimitResponse_OK:
					admitted.Add(1)
				}
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	// settle waits until admitted reaches want and n more calls have been
	// answered since, then asserts it is still want.
	settle := func(what string, want int64) {
		t.Helper()
		for admitted.Load() < want {
			if time.Now().After(deadline) || sent.Load() > maxRequests {
				t.Fatalf("%s: admitted %d, want %d, before the load's bounds (%d sent)", what, admitted.Load(), want, sent.Load())
			}
			<-time.After(pollInterval) // a poll, not a timing assertion
		}
		from := sent.Load()
		for sent.Load() < from+200 && sent.Load() <= maxRequests && time.Now().Before(deadline) {
			<-time.After(pollInterval)
		}
		if got := admitted.Load(); got != want || failed.Load() != 0 {
			t.Fatalf("%s: admitted %d (%d calls failed), want exactly %d", what, got, failed.Load(), want)
		}
	}
	settle("limit 20", 20)

	writeFile(t, target+".new", yearLimit("load", "30"))
	relink(t, link, target+".new") // an edit seen by the watcher
	waitLog(t, d.daemon, "rls config reloaded", "file")
	settle("limit raised to 30", 30)

	writeFile(t, target+".broken", "domain: load\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: many}\n")
	relink(t, link, target+".broken")
	line := waitLog(t, d.daemon, "rls config reload failed; keeping the last good config", "file")
	if !strings.Contains(line["err"], link+":4: descriptors[0].rate_limit.requests_per_unit") {
		t.Errorf("reload failure logged with err %q, want %s, line 4 and the field", line["err"], link)
	}
	settle("a broken file keeps 30", 30)

	// Fixed behind the link, out of the watcher's sight; SIGHUP applies it.
	writeFile(t, target+".broken", yearLimit("load", "40"))
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, d.daemon, "rls config reloaded", "signal")
	settle("limit raised to 40 by SIGHUP", 40)
	d.pollMetrics(t, "the reload counts", func(get func(string) float64) (bool, string) {
		changed, errs := get(`ratelimitd_rls_config_reloads_total{result="changed"}`), get(`ratelimitd_rls_config_reloads_total{result="error"}`)
		return changed == 2 && errs >= 1, "changed " + ftoa(changed) + " error " + ftoa(errs)
	})
}

// relink points the symlink link at target, atomically (a new link
// renamed over it), as a ConfigMap's swap does.
func relink(t *testing.T, link, target string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(link), ".relink.tmp")
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

// waitLog waits for a log line msg with trigger, and returns it.
func waitLog(t *testing.T, d *daemon, msg, trigger string) logRecord {
	t.Helper()
	line, err := d.logs.waitLine(pollTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == msg && rec["trigger"] == trigger })
	if err != nil {
		t.Fatalf("no log line %q with trigger %s: %v\n%s", msg, trigger, err, d.logs)
	}
	return line
}

// TestE2ERLSCountsSurviveSIGKILL: the RLS counters are journalled as every
// other check: after kill -9 and a restart on the same data directory the
// count goes on.
func TestE2ERLSCountsSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	conf, data := filepath.Join(t.TempDir(), "rls.yaml"), t.TempDir()
	writeFile(t, conf, yearLimit("k9", "5"))
	d := startRLSDaemon(t, "--rls-config", conf, "--data-dir", data)
	for i := range 3 {
		if resp := d.should(t, rlsRequest("k9", 0, "k=alice")); resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != uint32(4-i) {
			t.Fatalf("call %d: got %v, want OK with %d remaining", i+1, resp, 4-i)
		}
	}
	d.kill()
	d = startRLSDaemon(t, "--rls-config", conf, "--data-dir", data)
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if resp := d.should(t, rlsRequest("k9", 0, "k=alice")); resp.OverallCode != want {
			t.Fatalf("call %d after kill -9: got %v, want %v (3 of 5 were spent before)", i+4, resp, want)
		}
	}
}

// TestE2ERLSModes: --rls-count-over-limit counts denied hits (the
// reference's counting), --rls-shadow answers OK overall, and
// --rls-response-headers adds the RateLimit headers; without
// --rls-count-over-limit a denied request consumes nothing.
func TestE2ERLSModes(t *testing.T) {
	t.Parallel()
	conf := filepath.Join(t.TempDir(), "rls.yaml")
	writeFile(t, conf, yearLimit("m", "3"))
	for _, countOver := range []bool{false, true} {
		flags := []string{"--rls-config", conf, "--rls-shadow", "--rls-response-headers"}
		if countOver {
			flags = append(flags, "--rls-count-over-limit")
		}
		d := startRLSDaemon(t, flags...)
		// 5 hits against 3: over, answered OK overall by the shadow mode.
		resp := d.should(t, rlsRequest("m", 5, "k=a"))
		if resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].Code != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("count-over-limit %v: 5 hits of 3: got %v, want OK overall with the status OVER_LIMIT", countOver, resp)
		}
		headers := map[string]string{}
		for _, h := range resp.ResponseHeadersToAdd {
			headers[h.Key] = h.Value
		}
		if headers["RateLimit-Limit"] != "3" || headers["RateLimit-Remaining"] != "0" || headers["RateLimit-Reset"] == "" {
			t.Errorf("count-over-limit %v: headers %v, want RateLimit-Limit 3, RateLimit-Remaining 0 and a reset", countOver, headers)
		}
		// Then one hit: it fits unless the 5 denied hits were counted.
		resp = d.should(t, rlsRequest("m", 1, "k=a"))
		want := rlsv3.RateLimitResponse_OK
		if countOver {
			want = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if resp.Statuses[0].Code != want {
			t.Errorf("count-over-limit %v: one hit after the denial: got %v, want the status %v", countOver, resp, want)
		}
		d.pollMetrics(t, "the global shadow", func(get func(string) float64) (bool, string) {
			v := get(`ratelimitd_rls_global_shadow_total{domain="m"}`)
			return v >= 1, ftoa(v)
		})
	}
}

// TestE2ERLSNoConfig: with --grpc-listen and no --rls-config every
// descriptor is answered OK with no limit (an empty config), said at start.
func TestE2ERLSNoConfig(t *testing.T) {
	t.Parallel()
	d := startRLSDaemon(t)
	if _, err := d.logs.waitLine(startTimeout, d.exited, func(rec logRecord) bool {
		return rec["level"] == "WARN" && strings.HasPrefix(rec["msg"], "no --rls-config")
	}); err != nil {
		t.Errorf("no warning about the missing config: %v", err)
	}
	for range 3 {
		resp := d.should(t, rlsRequest("any", 0, "remote_address=10.0.0.1"))
		if resp.OverallCode != rlsv3.RateLimitResponse_OK || len(resp.Statuses) != 1 || resp.Statuses[0].Code != rlsv3.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit != nil {
			t.Fatalf("without a config: got %v, want OK with no limit", resp)
		}
	}
}

// TestE2ERLSBadConfigRefusesStart: a bad config file, or a directory
// without one, stops the start, before any journal is recovered, naming
// the file, the line and the field.
func TestE2ERLSBadConfigRefusesStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	code, _, stderr := runDaemonOnce(t, "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--rls-config", dir)
	if code != exitFailure || !strings.Contains(stderr, bad+":4: descriptors[0].rate_limit.unit") || strings.Contains(stderr, "journal recovered") || strings.Contains(stderr, "listening") {
		t.Errorf("bad config: exit %d, stderr:\n%s\nwant exit 1 naming %s:4 and descriptors[0].rate_limit.unit, before any recovery", code, stderr, bad)
	}
	empty := t.TempDir()
	code, _, stderr = runDaemonOnce(t, "--listen", "127.0.0.1:0", "--rls-config", empty)
	if code != exitFailure || !strings.Contains(stderr, empty+" has no *.yaml or *.yml file") {
		t.Errorf("empty config directory: exit %d, stderr:\n%s\nwant exit 1 saying it has no config file", code, stderr)
	}
}

// TestE2ERLSGracefulShutdown: on SIGTERM the health service turns
// NOT_SERVING first (a client watching it is told), then the gRPC server
// stops within --shutdown-timeout and the daemon exits 0.
func TestE2ERLSGracefulShutdown(t *testing.T) {
	t.Parallel()
	d := startRLSDaemon(t, "--shutdown-timeout", "2s")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	watch, err := healthpb.NewHealthClient(d.conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: rlsService})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := watch.Recv(); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first health update: got %v, %v; want SERVING", h, err)
	}
	d.terminate()
	if h, err := watch.Recv(); err != nil || h.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health update after SIGTERM: got %v, %v; want NOT_SERVING", h, err)
	}
	if took := d.stop(); took > stopTimeout {
		t.Errorf("the daemon took %v to stop, want it within --shutdown-timeout and the actors' stop", took)
	}
	if _, err := d.logs.waitLine(pollTimeout, d.exited, func(rec logRecord) bool { return rec["msg"] == "gRPC server stopped" }); err != nil {
		t.Errorf("no gRPC server stopped line: %v\n%s", err, d.logs)
	}
}
