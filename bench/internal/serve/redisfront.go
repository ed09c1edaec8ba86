package serve

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// FixedWindowLua is the seed's Redis+Lua fixed window: INCR the window's
// key and, on its first hit, PEXPIRE it after one window (ARGV[1] ms), in
// one atomic script; it returns the count and the key's remaining TTL.
const FixedWindowLua = `local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('PTTL', KEYS[1])}`

// FixedWindow is FixedWindowLua as a go-redis Script: Run sends EVALSHA,
// and EVAL only if Redis does not know the script yet.
var FixedWindow = redis.NewScript(FixedWindowLua)

// RedisKey is the key of id's window number window of scaleMs: one key
// per bucket, as the seed stored them.
func RedisKey(id string, scaleMs, window int64) string {
	b := make([]byte, 0, len(id)+32)
	b = append(b, "rl:"...)
	b = append(b, id...)
	b = append(b, ':')
	b = strconv.AppendInt(b, scaleMs, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, window, 10)
	return string(b)
}

// NewRedisClient returns a go-redis client of addr with a pool of pool
// connections and read and write timeouts of timeout.
func NewRedisClient(addr string, pool int, timeout time.Duration) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:         addr,
		PoolSize:     pool,
		MinIdleConns: pool / 4,
		DialTimeout:  5 * time.Second,
		ReadTimeout:  timeout,
		WriteTimeout: timeout,
		// No client identity or maintenance notifications: the plain
		// RESP2 exchange the seed's front had.
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		ContextTimeoutEnabled:    true,
	})
}

// NewRedisFront returns the seed's architecture as an HTTP handler:
// GET /check_rate?id=&scale=&limit= runs FixedWindowLua by EVALSHA on the
// Redis at addr and answers like ratelimitd (200, or 413 with Retry-After,
// and the same JSON fields). closeFn closes the Redis client.
func NewRedisFront(ctx context.Context, addr string) (http.Handler, func(), error) {
	rdb := NewRedisClient(addr, 64, 5*time.Second)
	if err := FixedWindow.Load(ctx, rdb).Err(); err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("redis front: SCRIPT LOAD on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /check_rate", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		id := q.Get("id")
		scale, err1 := parseScale(q.Get("scale"))
		limit, err2 := strconv.ParseInt(q.Get("limit"), 10, 64)
		if id == "" || len(id) > 1024 || err1 != nil || err2 != nil || limit < 1 {
			http.Error(w, `{"error":"bad check"}`, http.StatusBadRequest)
			return
		}
		nowMs := time.Now().UnixMilli()
		window := nowMs / scale
		res, err := FixedWindow.Run(r.Context(), rdb, []string{RedisKey(id, scale, window)}, scale).Int64Slice()
		if err != nil || len(res) != 2 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error":"redis"}`, http.StatusServiceUnavailable)
			return
		}
		count, ttl := res[0], res[1]
		allowed := count <= limit
		remaining := max(limit-count, 0)
		retry := int64(0)
		status := http.StatusOK
		if !allowed {
			retry = ttl
			status = http.StatusRequestEntityTooLarge
			w.Header().Set("Retry-After", strconv.FormatInt(max((ttl+999)/1000, 1), 10))
		}
		b := make([]byte, 0, 160)
		b = append(b, `{"allowed":`...)
		b = strconv.AppendBool(b, allowed)
		b = append(b, `,"id":`...)
		b = strconv.AppendQuote(b, id)
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, min(count, limit), 10)
		b = append(b, `,"limit":`...)
		b = strconv.AppendInt(b, limit, 10)
		b = append(b, `,"remaining":`...)
		b = strconv.AppendInt(b, remaining, 10)
		b = append(b, `,"reset_ms":`...)
		b = strconv.AppendInt(b, ttl, 10)
		b = append(b, `,"retry_after_ms":`...)
		b = strconv.AppendInt(b, retry, 10)
		b = append(b, "}\n"...)
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Cache-Control"] = []string{"no-store"}
		w.WriteHeader(status)
		_, _ = w.Write(b)
	})
	return mux, func() { _ = rdb.Close() }, nil
}

// parseScale reads a window as ratelimitd does: milliseconds or a Go duration.
func parseScale(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 1 {
			return 0, fmt.Errorf("scale %d", ms)
		}
		return ms, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Millisecond {
		return 0, fmt.Errorf("scale %q", s)
	}
	return d.Milliseconds(), nil
}
