package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
)

// TestE2EClusterRedis: a cluster member's Redis protocol listener serves
// each connection on a goroutine of its own (INFO: event_loops:0), since
// a check it forwards to another member would stall an event loop; and
// CL.THROTTLE through either member's listener is exact across the
// cluster: of 6 requests per key, alternating between the two members,
// exactly max_burst+1 are allowed, the checks of the keys the other
// member owns forwarded to it. The admin API's GET /buckets and a DEL
// through either member act at the key's owner.
func TestE2EClusterRedis(t *testing.T) {
	etcd := actorstest.StartEtcd(t)
	ms := startMembers(t, etcd, 2, "--redis-listen", "127.0.0.1:0")
	waitSettled(t, ms, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clients := make([]*redis.Client, len(ms))
	for i, m := range ms {
		clients[i] = redis.NewClient(&redis.Options{Addr: m.redisAddr(t), PoolSize: 2, MaxRetries: -1})
		defer clients[i].Close()
		info, err := clients[i].Info(ctx, "server").Result()
		if err != nil || !strings.Contains(info, "\r\nevent_loops:0\r\n") {
			t.Fatalf("%s: INFO server: %q, %v; want event_loops:0", m.label, info, err)
		}
	}
	const keys, tries, maxBurst = 20, 6, 3
	for k := range keys {
		key := "cluster-redis-" + strconv.Itoa(k)
		allowed := 0
		for i := range tries {
			v, err := clients[i%2].Do(ctx, "CL.THROTTLE", key, maxBurst, 1, 60).Int64Slice()
			if err != nil || len(v) != 5 {
				t.Fatalf("%s, try %d on %s: %v, %v", key, i, ms[i%2].label, v, err)
			}
			if v[0] == 0 {
				allowed++
			}
		}
		if allowed != maxBurst+1 {
			t.Errorf("%s: %d of %d allowed across the members, want exactly %d", key, allowed, tries, maxBurst+1)
		}
	}
	var forwarded int64
	for _, m := range ms {
		st, _ := m.status(t)
		forwarded += st.Stats.ForwardedChecks
	}
	if forwarded == 0 || forwarded >= keys*tries {
		t.Errorf("%d checks forwarded; want some of the %d (those a member does not own), not all", forwarded, keys*tries)
	}
	// The admin API's GET /buckets of a key through either member reads it
	// at its owner: the one bucket, at the count its 6 tries left.
	for _, m := range ms {
		var got struct {
			Buckets []struct {
				Rule      string `json:"rule"`
				Algorithm string `json:"algorithm"`
				Count     int64  `json:"count"`
			} `json:"buckets"`
		}
		m.adminGet(t, "/buckets?id=cluster-redis-0", &got)
		if len(got.Buckets) != 1 || got.Buckets[0].Rule != "CL.THROTTLE" || got.Buckets[0].Algorithm != "token_bucket" || got.Buckets[0].Count != maxBurst+1 {
			t.Errorf("%s: GET /buckets?id=cluster-redis-0: %+v, want its one CL.THROTTLE token bucket at count %d", m.label, got.Buckets, maxBurst+1)
		}
	}
	// DEL through either member deletes the key at its owner: the next hit,
	// through the other member, is a first hit.
	for k := range keys {
		key := "cluster-redis-" + strconv.Itoa(k)
		if n, err := clients[k%2].Del(ctx, key).Result(); err != nil || n != 1 {
			t.Errorf("DEL %s on %s: %d, %v; want 1", key, ms[k%2].label, n, err)
		}
		if v, err := clients[(k+1)%2].Do(ctx, "CL.THROTTLE", key, maxBurst, 1, 60).Int64Slice(); err != nil || !slices.Equal(v, []int64{0, maxBurst + 1, maxBurst, -1, 60}) {
			t.Errorf("%s after DEL, on %s: %v, %v; want a first hit", key, ms[(k+1)%2].label, v, err)
		}
	}
}
