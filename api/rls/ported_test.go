package rls

import (
	"context"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ok is an OK status of a limit with rem remaining.
func ok(rpu uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, rem uint32, reset int64) *rlsv3.RateLimitResponse_DescriptorStatus {
	return lim(cOK, rpu, unit, rem, reset)
}

// over is an OVER_LIMIT status of a limit.
func over(rpu uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, reset int64) *rlsv3.RateLimitResponse_DescriptorStatus {
	return lim(cOver, rpu, unit, 0, reset)
}

// ov is d with a limit override.
func ov(d *rlcommon.RateLimitDescriptor, rpu uint32, unit typev3.RateLimitUnit) *rlcommon.RateLimitDescriptor {
	d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
	return d
}

// portedStep is one request of a ported reference case and its answer.
type portedStep struct {
	src         string // the reference file and test it comes from
	req         *rlsv3.RateLimitRequest
	want        *rlsv3.RateLimitResponse // the answer in both counting modes
	wantCounted *rlsv3.RateLimitResponse // with CountOverLimit, when it differs
	code        codes.Code               // an error answer instead
	event       *LimitEvent              // the last limit event after the step
	evCounted   *LimitEvent              // with CountOverLimit, when it differs
}

// portedScenario is a config and the steps run in order against one System.
type portedScenario struct {
	name  string
	files []string // none: no config loaded
	opts  Options
	steps []portedStep
}

const (
	srcConfig  = "test/config/config_test.go "
	srcService = "test/service/ratelimit_test.go "
	srcCache   = "test/redis/fixed_cache_impl_test.go "
	srcReadme  = "README.md "
)

func ev(domain, key string, hits, within, near, over, shadow uint64) *LimitEvent {
	return &LimitEvent{Domain: domain, Key: key, Hits: hits, WithinLimit: within, NearLimit: near, OverLimit: over, ShadowMode: shadow}
}

func portedScenarios() []portedScenario {
	const b, tb = "basic", srcConfig + "TestBasicConfig"
	basic := portedScenario{name: "basic", files: []string{"ported/basic.yaml"}, steps: []portedStep{
		{src: tb, req: rq("foo_domain", 0, ds("key1=value1")), want: rs(cOK, none())},
		{src: tb, req: rq(b, 0, ds("key1=something")), want: rs(cOK, none())},
		{src: tb, req: rq(b, 0, ds("key1=value1")), want: rs(cOK, none())},
		{src: tb, req: rq(b, 0, ds("key2=value2", "subkey=subvalue")), want: rs(cOK, none())},
		{src: tb, req: rq(b, 0, ds("key5=value5", "subkey5=subvalue")), want: rs(cOK, none())},
		{src: tb, req: rq(b, 0, ds("key1=value1", "subkey1=something")), want: rs(cOK, ok(5, second, 4, resetSecond)),
			event: ev(b, "key1_value1.subkey1", 1, 1, 0, 0, 0)},
		{src: tb, req: rq(b, 0, ds("key1=value1", "subkey1=subvalue1")), want: rs(cOK, ok(10, second, 9, resetSecond)),
			event: ev(b, "key1_value1.subkey1_subvalue1", 1, 1, 0, 0, 0)},
		{src: tb, req: rq(b, 0, ds("key2=something")), want: rs(cOK, ok(20, minute, 19, resetMinute)), event: ev(b, "key2", 1, 1, 0, 0, 0)},
		{src: tb, req: rq(b, 0, ds("key2=value2")), want: rs(cOK, ok(30, minute, 29, resetMinute)), event: ev(b, "key2_value2", 1, 1, 0, 0, 0)},
		{src: tb, req: rq(b, 0, ds("key2=value3")), want: rs(cOK, none())},
		{src: tb, req: rq(b, 0, ds("key3=foo")), want: rs(cOK, ok(1, hour, 0, resetHour)), event: ev(b, "key3", 1, 1, 1, 0, 0)},
		{src: tb, req: rq(b, 0, ds("key3=foo")), want: rs(cOver, over(1, hour, resetHour)), event: ev(b, "key3", 1, 0, 0, 1, 0)},
		{src: tb, req: rq(b, 0, ds("key4=foo")), want: rs(cOK, named("key4_rate_limit", ok(1, day, 0, resetDay))), event: ev(b, "key4", 1, 1, 1, 0, 0)},
		{src: tb, req: rq(b, 0, ds("key5=value5")), want: rs(cOK, ok(15, day, 14, resetDay))},
		{src: tb, req: rq(b, 0, ds("key5=value5", "subkey5=subvalue5")), want: rs(cOK, ok(25, day, 24, resetDay))},
		{src: tb, req: rq(b, 0, ds("key6=foo")), want: rs(cOK, unlimited())},
		{src: tb, req: rq(b, 0, ds("key7=unspecified_value")), want: rs(cOK, ok(70, minute, 69, resetMinute)),
			event: ev(b, "key7_unspecified_value", 1, 1, 0, 0, 0)},
		{src: tb, req: rq(b, 0, ds("key7=another_value")), want: rs(cOK, ok(70, minute, 69, resetMinute)),
			event: ev(b, "key7_another_value", 1, 1, 0, 0, 0)},
	}}
	const to = srcConfig + "TestConfigLimitOverride"
	override := portedScenario{name: "override", files: []string{"ported/basic.yaml"}, steps: []portedStep{
		{src: to, req: rq("foo_domain", 0, ov(ds("key1=value1"), 10, typev3.RateLimitUnit_DAY)), want: rs(cOK, none())},
		{src: to, req: rq(b, 0, ov(ds("key1=value1", "subkey1=something"), 10, typev3.RateLimitUnit_DAY)),
			want: rs(cOK, ok(10, day, 9, resetDay)), event: ev(b, "key1.subkey1", 1, 1, 0, 0, 0)},
		{src: to, req: rq(b, 0, ov(ds("key1=value1", "subkey1=something"), 42, typev3.RateLimitUnit_HOUR)),
			want: rs(cOK, ok(42, hour, 41, resetHour))},
		{src: to, req: rq(b, 0, ov(ds("key1=value1", "subkey1=something_else"), 42, typev3.RateLimitUnit_HOUR)),
			want: rs(cOK, ok(42, hour, 41, resetHour))},
	}}
	const s, ts = "shadow", srcConfig + "TestShadowModeConfig"
	shadow := portedScenario{name: "shadow", files: []string{"ported/shadow.yaml"}, steps: []portedStep{
		{src: ts, req: rq(s, 0, ds("key1=value1", "subkey1=something")), want: rs(cOK, ok(5, second, 4, resetSecond))},
		{src: ts, req: rq(s, 11, ds("key1=value1", "subkey1=subvalue1")), want: rs(cOK, ok(10, second, 0, resetSecond)),
			event: ev(s, "key1_value1.subkey1_subvalue1", 11, 0, 2, 1, 1)},
		{src: ts, req: rq(s, 21, ds("key2=something")), want: rs(cOK, ok(20, minute, 0, resetMinute)), event: ev(s, "key2", 21, 0, 4, 1, 1)},
		{src: ts, req: rq(s, 31, ds("key2=value2")), want: rs(cOver, over(30, minute, resetMinute)), event: ev(s, "key2_value2", 31, 0, 6, 1, 0)},
	}}
	const w, tw = "wildcard", srcConfig + "TestWildcardConfig"
	wild := portedScenario{name: "wildcard", files: []string{"ported/wildcard.yaml"}, steps: []portedStep{
		{src: tw, req: rq(w, 0, ds("noVal=foo1")), want: rs(cOK, ok(20, minute, 19, resetMinute)), event: ev(w, "noVal", 1, 1, 0, 0, 0)},
		{src: tw, req: rq(w, 0, ds("noVal=foo2")), want: rs(cOK, ok(20, minute, 19, resetMinute)), event: ev(w, "noVal", 1, 1, 0, 0, 0)},
		{src: tw, req: rq(w, 0, ds("wild=foo1")), want: rs(cOK, ok(20, minute, 19, resetMinute)), event: ev(w, "wild_foo*", 1, 1, 0, 0, 0)},
		{src: tw, req: rq(w, 0, ds("wild=foo2")), want: rs(cOK, ok(20, minute, 19, resetMinute))},
		{src: tw, req: rq(w, 0, ds("nestedWild=val1", "wild=goo2")), want: rs(cOK, ok(20, minute, 19, resetMinute)),
			event: ev(w, "nestedWild_val1.wild_goo*", 1, 1, 0, 0, 0)},
		{src: tw, req: rq(w, 0, ds("wild=bar")), want: rs(cOK, none())},
		{src: tw, req: rq(w, 0, ds("noWild=foo1")), want: rs(cOK, none())},
		{src: tw, req: rq(w, 0, ds("midWild=barab")), want: rs(cOK, ok(20, minute, 19, resetMinute)), event: ev(w, "midWild_bar*b", 1, 1, 0, 0, 0)},
		{src: tw, req: rq(w, 0, ds("midWild=bar123b")), want: rs(cOK, ok(20, minute, 19, resetMinute))},
		{src: tw, req: rq(w, 0, ds("midWild=barb")), want: rs(cOK, ok(20, minute, 19, resetMinute))},
		{src: tw, req: rq(w, 0, ds("midWild=bara")), want: rs(cOK, none())},
		{src: tw, req: rq(w, 0, ds("midWild=xbarb")), want: rs(cOK, none())},
		{src: tw, req: rq(w, 0, ds("multiWild=foo123bar456baz")), want: rs(cOK, ok(10, minute, 9, resetMinute)),
			event: ev(w, "multiWild_foo*bar*baz", 1, 1, 0, 0, 0)},
		{src: tw, req: rq(w, 0, ds("multiWild=foobarbaz")), want: rs(cOK, ok(10, minute, 9, resetMinute))},
		{src: tw, req: rq(w, 0, ds("multiWild=foo123baz")), want: rs(cOK, none())},
		{src: tw, req: rq(w, 0, ds("multiWild=bar456baz")), want: rs(cOK, none())},
	}}
	const sh, tsh = "share", srcConfig + "TestShareThreshold"
	share := portedScenario{name: "share", files: []string{"ported/share.yaml"}, steps: []portedStep{
		{src: tsh, req: rq(sh, 0, ds("files=files/a.pdf")), want: rs(cOK, ok(100, minute, 99, resetMinute)), event: ev(sh, "files_files/*", 1, 1, 0, 0, 0)},
		{src: tsh, req: rq(sh, 0, ds("files=files/b.csv")), want: rs(cOK, ok(100, minute, 98, resetMinute))},
		{src: tsh, req: rq(sh, 0, ds("files=files/c.txt")), want: rs(cOK, ok(100, minute, 97, resetMinute))},
		{src: tsh, req: rq(sh, 0, ds("nested=parent", "files=nested/file1.txt")), want: rs(cOK, ok(200, minute, 199, resetMinute)),
			event: ev(sh, "nested_parent.files_nested/*", 1, 1, 0, 0, 0)},
		{src: tsh, req: rq(sh, 0, ds("nested=parent", "files=nested/file2.txt")), want: rs(cOK, ok(200, minute, 198, resetMinute))},
		{src: tsh, req: rq(sh, 0, ds("file=test1")), want: rs(cOK, ok(50, minute, 49, resetMinute))},
		{src: tsh, req: rq(sh, 0, ds("file=test2")), want: rs(cOK, ok(100, minute, 99, resetMinute))},
		{src: tsh, req: rq(sh, 0, ds("file=test3")), want: rs(cOK, ok(100, minute, 98, resetMinute))},
		{src: tsh, req: rq(sh, 0, ds("path=path/foo", "file=file/doc1", "type=pdf")), want: rs(cOK, ok(120, minute, 119, resetMinute)),
			event: ev(sh, "path_path/*.file_file/*.type", 1, 1, 0, 0, 0)},
		{src: tsh, req: rq(sh, 0, ds("path=path/bar", "file=file/doc1", "type=pdf")), want: rs(cOK, ok(120, minute, 118, resetMinute))},
		{src: tsh, req: rq(sh, 0, ds("path=path/bar", "file=file/doc2", "type=pdf")), want: rs(cOK, ok(120, minute, 119, resetMinute))},
	}}
	const v = "service"
	keyName := func(st *rlsv3.RateLimitResponse_DescriptorStatus) *rlsv3.RateLimitResponse_DescriptorStatus {
		return named("key_name", st)
	}
	service := portedScenario{name: "service", files: []string{"ported/service.yaml"}, steps: []portedStep{
		{src: srcService + "TestService", req: rq(v, 1, ds("hello=world")), want: rs(cOK, none())},
		{src: srcService + "TestService", req: rq(v, 11, ds("foo=bar"), ds("hello=world")), want: rs(cOver, keyName(over(10, minute, resetMinute)), none())},
		{src: srcService + "TestService", req: rq(v, 11, ds("hello=world"), ds("foo=bar")), want: rs(cOver, none(), keyName(over(10, minute, resetMinute)))},
		{src: srcService + "TestRuleShadowMode", req: rq(v, 11, ds("shadowed=a"), ds("shadowed=b")),
			want: rs(cOK, ok(10, minute, 0, resetMinute), ok(10, minute, 0, resetMinute))},
		{src: srcService + "TestMixedRuleShadowMode", req: rq(v, 11, ds("shadowed=c"), ds("foo=bar")),
			want: rs(cOver, ok(10, minute, 0, resetMinute), keyName(over(10, minute, resetMinute)))},
		{src: srcService + "TestEmptyDomain", req: rq("", 1, ds("hello=world")), code: codes.InvalidArgument},
		{src: srcService + "TestEmptyDescriptors", req: rq(v, 1), code: codes.InvalidArgument},
	}}
	unl := portedScenario{name: "unlimited", files: []string{"ported/service.yaml"}, steps: []portedStep{
		{src: srcService + "TestUnlimited", req: rq(v, 1, ds("foo=bar"), ds("hello=world"), ds("baz=qux")),
			want: rs(cOK, keyName(ok(10, minute, 9, resetMinute)), none(), unlimited())},
	}}
	globalShadow := portedScenario{name: "global_shadow", files: []string{"ported/service.yaml"}, opts: Options{ShadowMode: true}, steps: []portedStep{
		{src: srcService + "TestServiceGlobalShadowMode", req: rq(v, 11, ds("foo=bar"), ds("hello=world")),
			want: rs(cOK, keyName(over(10, minute, resetMinute)), none())},
	}}
	withHeaders := func(r *rlsv3.RateLimitResponse, names ...string) *rlsv3.RateLimitResponse {
		r.ResponseHeadersToAdd = []*corev3.HeaderValue{{Key: names[0], Value: "10"}, {Key: names[1], Value: "0"}, {Key: names[2], Value: "20"}}
		return r
	}
	headers := portedScenario{name: "headers", files: []string{"ported/service.yaml"}, opts: Options{ResponseHeaders: true}, steps: []portedStep{
		{src: srcService + "TestServiceWithDefaultRatelimitHeaders", req: rq(v, 11, ds("foo=bar"), ds("hello=world")),
			want: withHeaders(rs(cOver, keyName(over(10, minute, resetMinute)), none()), "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")},
	}}
	customHeaders := portedScenario{name: "custom_headers", files: []string{"ported/service.yaml"},
		opts: Options{ResponseHeaders: true, HeaderLimit: "A-Ratelimit-Limit", HeaderRemaining: "A-Ratelimit-Remaining", HeaderReset: "A-Ratelimit-Reset"},
		steps: []portedStep{
			{src: srcService + "TestServiceWithCustomRatelimitHeaders", req: rq(v, 11, ds("foo=bar"), ds("hello=world")),
				want: withHeaders(rs(cOver, keyName(over(10, minute, resetMinute)), none()), "A-Ratelimit-Limit", "A-Ratelimit-Remaining", "A-Ratelimit-Reset")},
		}}
	noConfig := portedScenario{name: "no_config", steps: []portedStep{
		{src: srcService + "TestInitialLoadError", req: rq(v, 1, ds("hello=world")), code: codes.Unavailable},
	}}
	const c, tr, tn, tst = "cache", srcCache + "testRedis", srcCache + "TestNearLimit", srcCache + "TestOverLimitWithStopCacheKeyIncrementWhenOverlimitConfig"
	cache := portedScenario{name: "cache", files: []string{"ported/cache.yaml"}, steps: []portedStep{
		{src: tr, req: rq(c, 4, ds("key=value")), want: rs(cOK, ok(10, second, 6, resetSecond))},
		{src: tr, req: rq(c, 1, ds("key=value")), want: rs(cOK, ok(10, second, 5, resetSecond)), event: ev(c, "key_value", 1, 1, 0, 0, 0)},
		{src: tr, req: rq(c, 10, ds("key2=value2", "subkey2=subvalue2")), want: rs(cOK, ok(10, minute, 0, resetMinute))},
		{src: tr, req: rq(c, 0, dh(0, "key2=value2"), dh(1, "key2=value2", "subkey2=subvalue2")),
			want: rs(cOver, none(), over(10, minute, resetMinute)), event: ev(c, "key2_value2.subkey2_subvalue2", 1, 0, 0, 1, 0)},
		{src: tr, req: rq(c, 10, ds("key3=value3")), want: rs(cOK, ok(10, hour, 0, resetHour))},
		{src: tr, req: rq(c, 1, ds("key3=value3")), want: rs(cOver, over(10, hour, resetHour))},
		{src: tr, req: rq(c, 10, ds("key3=value3", "subkey3=subvalue3")), want: rs(cOK, ok(10, day, 0, resetDay))},
		{src: tr, req: rq(c, 1, ds("key3=value3", "subkey3=subvalue3")), want: rs(cOver, over(10, day, resetDay))},
		// A peek is over only if the count already passed the limit, which
		// only counted denials make it do.
		{src: tr, req: rq(c, 0, dh(0, "key3=value3"), dh(1, "key3=value3", "subkey3=subvalue3")),
			want:        rs(cOver, ok(10, hour, 0, resetHour), over(10, day, resetDay)),
			wantCounted: rs(cOver, over(10, hour, resetHour), over(10, day, resetDay))},
		{src: tn, req: rq(c, 10, ds("key4=value4")), want: rs(cOK, ok(15, hour, 5, resetHour))},
		{src: tn, req: rq(c, 1, ds("key4=value4")), want: rs(cOK, ok(15, hour, 4, resetHour)), event: ev(c, "key4_value4", 1, 1, 0, 0, 0)},
		{src: tn, req: rq(c, 2, ds("key4=value4")), want: rs(cOK, ok(15, hour, 2, resetHour)), event: ev(c, "key4_value4", 2, 2, 1, 0, 0)},
		{src: tn, req: rq(c, 3, ds("key4=value4")), want: rs(cOver, over(15, hour, resetHour)), event: ev(c, "key4_value4", 3, 0, 2, 1, 0)},
		{src: tn, req: rq(c, 1, ds("key4=value4")), want: rs(cOK, ok(15, hour, 1, resetHour)), wantCounted: rs(cOver, over(15, hour, resetHour)),
			event: ev(c, "key4_value4", 1, 1, 1, 0, 0), evCounted: ev(c, "key4_value4", 1, 0, 0, 1, 0)},
		{src: tn, req: rq(c, 2, ds("key5=value5")), want: rs(cOK, ok(20, second, 18, resetSecond))},
		{src: tn, req: rq(c, 3, ds("key5=value5")), want: rs(cOK, ok(20, second, 15, resetSecond)), event: ev(c, "key5_value5", 3, 3, 0, 0, 0)},
		{src: tn, req: rq(c, 5, ds("key6=value6")), want: rs(cOK, ok(8, second, 3, resetSecond))},
		{src: tn, req: rq(c, 2, ds("key6=value6")), want: rs(cOK, ok(8, second, 1, resetSecond)), event: ev(c, "key6_value6", 2, 2, 1, 0, 0)},
		{src: tn, req: rq(c, 16, ds("key7=value7")), want: rs(cOK, ok(20, second, 4, resetSecond))},
		{src: tn, req: rq(c, 3, ds("key7=value7")), want: rs(cOK, ok(20, second, 1, resetSecond)), event: ev(c, "key7_value7", 3, 3, 3, 0, 0)},
		{src: tn, req: rq(c, 19, ds("key8=value8")), want: rs(cOK, ok(20, second, 1, resetSecond))},
		{src: tn, req: rq(c, 3, ds("key8=value8")), want: rs(cOver, over(20, second, resetSecond)), event: ev(c, "key8_value8", 3, 0, 1, 2, 0)},
		{src: tn, req: rq(c, 15, ds("key9=value9")), want: rs(cOK, ok(20, second, 5, resetSecond))},
		{src: tn, req: rq(c, 7, ds("key9=value9")), want: rs(cOver, over(20, second, resetSecond)), event: ev(c, "key9_value9", 7, 0, 4, 2, 0)},
		{src: tn, req: rq(c, 10, ds("key10=value10")), want: rs(cOK, ok(10, second, 0, resetSecond))},
		{src: tn, req: rq(c, 3, ds("key10=value10")), want: rs(cOver, over(10, second, resetSecond)), event: ev(c, "key10_value10", 3, 0, 0, 3, 0)},
		{src: tst, req: rq(c, 10, ds("stop4=value4"), ds("stop5=value5")), want: rs(cOK, ok(15, hour, 5, resetHour), ok(14, hour, 4, resetHour))},
		{src: tst, req: rq(c, 0, dh(1, "stop4=value4"), dh(1, "stop5=value5")), want: rs(cOK, ok(15, hour, 4, resetHour), ok(14, hour, 3, resetHour))},
		{src: tst, req: rq(c, 0, dh(2, "stop4=value4"), dh(2, "stop5=value5")), want: rs(cOK, ok(15, hour, 2, resetHour), ok(14, hour, 1, resetHour))},
		// The reference with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT answers
		// stop4 OK with its 2 remaining: nothing was consumed.
		{src: tst, req: rq(c, 0, dh(2, "stop4=value4"), dh(2, "stop5=value5")),
			want:        rs(cOver, ok(15, hour, 2, resetHour), over(14, hour, resetHour)),
			wantCounted: rs(cOver, ok(15, hour, 0, resetHour), over(14, hour, resetHour))},
	}}
	msg := func() *rlsv3.RateLimitRequest {
		return rq("messaging", 0, ds("message_type=marketing", "to_number=2061111111"), ds("to_number=2061111111"))
	}
	const e2 = srcReadme + "Example 2"
	readme := portedScenario{name: "readme", files: []string{
		"ported/readme/mongo.yaml", "ported/readme/messaging.yaml", "ported/readme/edge.yml", "ported/readme/example4.yaml",
		"ported/readme/example4b.yaml", "ported/readme/internal.yaml", "ported/readme/example6.yaml", "ported/readme/example7.yaml",
	}, steps: []portedStep{
		{src: srcReadme + "Example 1", req: rq("mongo_cps", 0, ds("database=users")), want: rs(cOK, ok(500, second, 499, resetSecond))},
		{src: srcReadme + "Example 1", req: rq("mongo_cps", 0, ds("database=default")), want: rs(cOK, ok(500, second, 499, resetSecond))},
		{src: srcReadme + "Example 1", req: rq("mongo_cps", 0, ds("database=other")), want: rs(cOK, none())},
		{src: e2, req: msg(), want: rs(cOK, ok(5, day, 4, resetDay), ok(100, day, 99, resetDay))},
		{src: e2, req: msg(), want: rs(cOK, ok(5, day, 3, resetDay), ok(100, day, 98, resetDay))},
		{src: e2, req: msg(), want: rs(cOK, ok(5, day, 2, resetDay), ok(100, day, 97, resetDay))},
		{src: e2, req: msg(), want: rs(cOK, ok(5, day, 1, resetDay), ok(100, day, 96, resetDay))},
		{src: e2, req: msg(), want: rs(cOK, ok(5, day, 0, resetDay), ok(100, day, 95, resetDay))},
		// Over: by default the per-number limit is not charged either.
		{src: e2, req: msg(), want: rs(cOver, over(5, day, resetDay), ok(100, day, 95, resetDay)),
			wantCounted: rs(cOver, over(5, day, resetDay), ok(100, day, 94, resetDay))},
		{src: srcReadme + "Example 3", req: rq("edge_proxy_per_ip", 0, ds("remote_address=50.0.0.1")), want: rs(cOK, ok(10, second, 9, resetSecond))},
		{src: srcReadme + "Example 3", req: rq("edge_proxy_per_ip", 0, ds("remote_address=50.0.0.5")), want: rs(cOver, over(0, second, resetSecond))},
		{src: srcReadme + "Example 4", req: rq("example4", 0, ds("key=value", "subkey=subvalue")), want: rs(cOK, none())},
		{src: srcReadme + "Example 4", req: rq("example4b", 0, ds("key=value", "subkey=subvalue")), want: rs(cOK, ok(300, second, 299, resetSecond))},
		{src: srcReadme + "Example 5", req: rq("internal", 0, ds("ldap=x")), want: rs(cOK, unlimited())},
		{src: srcReadme + "Example 5", req: rq("internal", 0, ds("azure=x")), want: rs(cOK, ok(100, minute, 99, resetMinute))},
		{src: srcReadme + "Example 6", req: rq("example6", 11, ds("service=auth-service", "user=user-a")), want: rs(cOK, ok(10, second, 0, resetSecond))},
		{src: srcReadme + "Example 6", req: rq("example6", 21, ds("service=auth-service", "user=user-b")), want: rs(cOver, over(20, second, resetSecond))},
		{src: srcReadme + "Example 7", req: rq("example7", 0, ds("key_1=value_1", "user=bkthomps"), ds("key_2=value_2", "user=bkthomps")),
			want: rs(cOK, none(), ok(10, second, 9, resetSecond))},
		{src: srcReadme + "Example 7", req: rq("example7", 0, ds("key_1=value_1", "user=bkthomps")),
			want: rs(cOK, named("specific_limit", ok(5, second, 4, resetSecond)))},
	}}
	return []portedScenario{basic, override, shadow, wild, share, service, unl, globalShadow, headers, customHeaders, noConfig, cache, readme}
}

// TestPortedReferenceCases replays the reference's own cases (its config,
// service and cache tests, and its README's examples) through a real gRPC
// client, in both counting modes.
func TestPortedReferenceCases(t *testing.T) {
	t.Parallel()
	scenarios := portedScenarios()
	n := 0
	for _, sc := range scenarios {
		n += len(sc.steps)
	}
	if n < 50 {
		t.Fatalf("%d ported cases, want at least 50", n)
	}
	t.Logf("%d ported cases, each in both counting modes", n)
	for _, sc := range scenarios {
		for _, counted := range []bool{false, true} {
			mode := "strict"
			if counted {
				mode = "count_over_limit"
			}
			t.Run(sc.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				var cfg *Config
				if len(sc.files) > 0 {
					cfg = loadFiles(t, sc.files...)
				}
				rec := &recorder{}
				opts := sc.opts
				opts.CountOverLimit, opts.Observer = counted, rec
				svc, _, _ := newService(t, cfg, opts)
				client, _ := serveGRPC(t, svc)
				for i, st := range sc.steps {
					got, err := client.ShouldRateLimit(context.Background(), st.req)
					if st.code != codes.OK {
						if status.Code(err) != st.code {
							t.Errorf("step %d (%s): got %v, want code %v", i, st.src, err, st.code)
						}
						continue
					}
					if err != nil {
						t.Fatalf("step %d (%s): %v", i, st.src, err)
					}
					want := st.want
					if counted && st.wantCounted != nil {
						want = st.wantCounted
					}
					equalResp(t, "step "+itoa(i)+" ("+st.src+")", got, want)
					wantEv := st.event
					if counted && st.evCounted != nil {
						wantEv = st.evCounted
					}
					if wantEv != nil {
						if gotEv, _ := rec.last(); gotEv != *wantEv {
							t.Errorf("step %d (%s): last limit event %+v, want %+v", i, st.src, gotEv, *wantEv)
						}
					}
				}
			})
		}
	}
}
