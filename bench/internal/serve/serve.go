// Package serve holds the servers the suite runs in child processes of its
// own (cmd/compare -serve ROLE): the bare net/http ceiling, gubernator
// v2's daemon and the Redis+Lua front. Each logs
// "msg=listening addr=HOST:PORT" on stderr, as ratelimitd does, and stops
// on SIGTERM or SIGINT.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Roles are the names Run accepts.
var Roles = []string{"bare", "gubernator", "redisfront"}

// Run serves role on listen (host:port, port 0 for any) until SIGTERM or
// SIGINT. redisAddr is the Redis server of the redisfront role.
func Run(role, listen, redisAddr string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	switch role {
	case "bare":
		return serveHTTP(ctx, listen, http.HandlerFunc(Bare))
	case "gubernator":
		return runGubernator(ctx, listen)
	case "redisfront":
		h, closeFn, err := NewRedisFront(ctx, redisAddr)
		if err != nil {
			return err
		}
		defer closeFn()
		return serveHTTP(ctx, listen, h)
	}
	return fmt.Errorf("serve: unknown role %q (want one of %v)", role, Roles)
}

// Bare is the ceiling: the least a JSON HTTP answer costs, with the same
// kind of body ratelimitd's check_rate answers.
func Bare(w http.ResponseWriter, _ *http.Request) {
	w.Header()["Content-Type"] = []string{"application/json"}
	_, _ = io.WriteString(w, `{"allowed":true,"id":"user-0","count":1,"limit":1000000000000,"remaining":999999999999,"reset_ms":1000,"retry_after_ms":0}`)
}

// logListening prints the line proc.Start waits for.
func logListening(addr net.Addr) {
	fmt.Fprintf(os.Stderr, "time=%s level=INFO msg=listening addr=%s\n", time.Now().Format(time.RFC3339), addr)
}

// serveHTTP serves h on listen until ctx ends, then shuts down.
func serveHTTP(ctx context.Context, listen string, h http.Handler) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 120 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logListening(ln.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
