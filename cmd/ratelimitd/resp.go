package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/api/resp"
)

// The actor system decides a pipeline's checks in one pass.
var _ resp.EachChecker = (*actors.System)(nil)

// respServer is the Redis protocol server on its own listener.
type respServer struct {
	srv    *resp.Server
	served chan error
}

// redisMaxConns is the cap of the Redis protocol listener: --redis-max-conns
// when set, else the share of the descriptors each listener has (shared,
// the listener counted in listenerCosts), at most resp.DefaultMaxConns.
func redisMaxConns(cfg *config, share int) int {
	if cfg.redis.maxConns > 0 {
		return cfg.redis.maxConns
	}
	return min(share, resp.DefaultMaxConns)
}

// startRESP serves the Redis protocol on --redis-listen, checking with
// sys and the rules of rs, with the passwords read by readRedisPassword;
// without --redis-listen it serves nothing. share is each listener's share
// of the descriptors (connCaps). With lt it serves TLS only.
func startRESP(cfg *config, share int, log *slog.Logger, sys *actors.System, rs *ruleSet, prom *metrics.Metrics, dash *dashData, lt *listenerTLS) (*respServer, error) {
	if cfg.redis.listen == "" {
		return nil, nil
	}
	rlog := log.With("component", "redis")
	maxConns := redisMaxConns(cfg, share)
	srv, err := resp.New(resp.Options{
		Checker:      sys,
		Rules:        rs.store,
		Passwords:    secretsOf(cfg.redis.passwords),
		MaxConns:     maxConns,
		IdleTimeout:  cfg.redis.idleTimeout,
		AuthFailures: cfg.redis.authFailures,
		TLSConfig:    lt.config(nil),
		Stopped:      actors.ErrStopped,
		Unavailable:  actors.ErrUnavailable,
		Observer:     dash.respObserver(prom.ObserveRESP(maxConns)),
		Logger:       rlog,
		Version:      moduleVersion(),
		// A cluster member's checks may wait on their owners over the
		// network: an event loop would stall its other connections.
		ConnGoroutines: len(cfg.cluster.etcd) > 0,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.redis.listen)
	if err != nil {
		return nil, fmt.Errorf("redis listener %s: %w", cfg.redis.listen, err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	if !addr.IP.IsLoopback() && cfg.redis.passwords == nil {
		rlog.Warn("the Redis protocol listener is reachable beyond loopback and asks no password: anyone who reaches it can spend every budget; set --redis-password-file", "addr", addr.String())
	}
	r := &respServer{srv: srv, served: make(chan error, 1)}
	go func() { r.served <- srv.Serve(ln) }()
	rlog.Info("redis listening", "addr", addr.String(), "max_conns", maxConns, "auth", cfg.redis.passwords != nil, "tls", lt != nil)
	return r, nil
}

// drain begins the graceful shutdown of the Redis protocol server: each
// connection answers what it has read and is closed, all of them by the
// end of ctx. The returned wait waits for it to end; a nil r drains
// nothing.
func (r *respServer) drain(ctx context.Context, log *slog.Logger) (wait func()) {
	if r == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.srv.Shutdown(ctx); err != nil {
			log.Warn("Redis protocol server did not drain in time; its remaining connections are closed", "err", err)
		}
		if err := <-r.served; !errors.Is(err, resp.ErrServerClosed) {
			log.Error("Redis protocol server failed", "err", err)
		}
		log.Info("Redis protocol server stopped")
	}()
	return func() { <-done }
}
