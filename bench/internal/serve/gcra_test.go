package serve

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/proc"
)

// startRedisServer starts redis-server on a free loopback port for the
// test, or skips it without one (but in CI, which installs it).
func startRedisServer(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed; .ci/run installs it")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p, _, err := proc.Start(ctx, proc.Options{Name: "redis-server", Path: path,
		Args: []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no", "--dir", t.TempDir()}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop(5 * time.Second)
		cancel()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	rdb := NewRedisClient(addr, 1, 5*time.Second)
	defer rdb.Close()
	for deadline := time.Now().Add(15 * time.Second); rdb.Ping(ctx).Err() != nil; time.Sleep(20 * time.Millisecond) {
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("redis-server did not answer PING; its output:\n%s", p.Tail())
		}
	}
	return addr
}

// TestGCRALua: the Lua GCRA answers as CL.THROTTLE does (redis-cell's
// reply): a bucket of max_burst+1 = 2, one token a minute, spent, then
// limited with retry_after 60; a request larger than the bucket is
// limited with retry_after -1; a peek of a fresh key stores nothing.
func TestGCRALua(t *testing.T) {
	addr := startRedisServer(t)
	rdb := NewRedisClient(addr, 1, 5*time.Second)
	defer rdb.Close()
	ctx := context.Background()
	call := func(key string, args ...any) []int64 {
		t.Helper()
		v, err := GCRA.Run(ctx, rdb, []string{key}, args...).Int64Slice()
		if err != nil {
			t.Fatalf("GCRA %s %v: %v", key, args, err)
		}
		return v
	}
	for i, want := range [][]int64{{0, 2, 1, -1, 60}, {0, 2, 0, -1, 120}, {1, 2, 0, 60, 120}} {
		if got := call("k", 1, 1, 60, 1); !slices.Equal(got, want) {
			t.Errorf("call %d: got %v, want %v", i+1, got, want)
		}
	}
	if got, want := call("k", 1, 1, 60, 3), []int64{1, 2, 0, -1, 120}; !slices.Equal(got, want) {
		t.Errorf("quantity 3 of a bucket of 2: got %v, want %v", got, want)
	}
	if got, want := call("fresh", 1, 1, 60, 0), []int64{0, 2, 2, -1, 0}; !slices.Equal(got, want) {
		t.Errorf("a peek of a fresh key: got %v, want %v", got, want)
	}
	if n, err := rdb.Exists(ctx, "fresh").Result(); err != nil || n != 0 {
		t.Errorf("after the peek: EXISTS fresh = %d, %v; want 0", n, err)
	}
	if ttl, err := rdb.PTTL(ctx, "k").Result(); err != nil || ttl <= 119*time.Second || ttl > 120*time.Second {
		t.Errorf("PTTL k = %v, %v; want about 2 minutes (the bucket full again)", ttl, err)
	}
}
