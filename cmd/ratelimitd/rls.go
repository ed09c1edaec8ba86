package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/api/rls"
)

// grpcServer is what the daemon uses of rls.NewGRPCServer's *grpc.Server.
type grpcServer interface {
	Serve(net.Listener) error
	GracefulStop()
	Stop()
}

// healthServer is what the daemon uses of its *health.Server.
type healthServer interface {
	// Shutdown sets every service NOT_SERVING, for good.
	Shutdown()
}

// rlsServer is Envoy's Rate Limit Service: the config Store (loaded at
// start, and with --rls-config reloaded by a Watcher on change and on
// SIGHUP), the Service, and with --grpc-listen its gRPC server.
type rlsServer struct {
	cfg     rlsConfig
	log     *slog.Logger
	store   *rls.Store
	watcher *rls.Watcher // nil without --rls-config
	stopHUP func()
	obs     *metrics.RLS
	svc     *rls.Service // from listen on

	grpc      grpcServer // nil without --grpc-listen
	health    healthServer
	served    chan error
	closeOnce sync.Once
}

// startRLS loads --rls-config (a bad file or directory refuses the start:
// there is no last good config yet), watches it, and reloads it on SIGHUP.
// Without --rls-config the config is empty: every domain is unknown, so
// every descriptor is answered OK with no limit (never an error, which
// Envoy with failure_mode_deny would turn into denials). It returns nil
// when neither --grpc-listen nor --rls-config is set.
func startRLS(cfg *config, log *slog.Logger, prom *metrics.Metrics) (*rlsServer, error) {
	if !cfg.rls.on() {
		if cfg.rls.shadow || cfg.rls.responseHeaders || cfg.rls.countOverLimit {
			log.Warn("--rls-shadow, --rls-response-headers and --rls-count-over-limit do nothing without --grpc-listen or --rls-config")
		}
		return nil, nil
	}
	r := &rlsServer{cfg: cfg.rls, log: log.With("component", "rls"), stopHUP: func() {}, obs: metrics.NewRLS(prom)}
	if cfg.rls.configPath == "" {
		empty, err := rls.Parse()
		if err != nil {
			return nil, err
		}
		r.store = rls.NewStore(empty)
		r.log.Warn("no --rls-config: every ShouldRateLimit is answered OK, with no limit")
		return r, nil
	}
	c, err := rls.Load(cfg.rls.configPath)
	if err != nil {
		return nil, err
	}
	r.store = rls.NewStore(c)
	clog := r.log.With("config", cfg.rls.configPath)
	r.watcher, err = rls.NewWatcher(cfg.rls.configPath, r.store, func(res rls.ReloadResult) {
		r.obs.ConfigReloaded(res.Err == nil, res.Changed)
		switch {
		case res.Err != nil:
			clog.Error("rls config reload failed; keeping the last good config", "trigger", res.Trigger, "err", res.Err, "domains", res.Domains)
		case res.Changed:
			clog.Info("rls config reloaded", "trigger", res.Trigger, "domains", res.Domains, "files", res.Files)
		default:
			clog.Debug("rls config unchanged", "trigger", res.Trigger, "domains", res.Domains)
		}
	}, clog)
	if err != nil {
		return nil, err
	}
	r.stopHUP = onSIGHUP(func() { r.watcher.Reload(rls.TriggerSignal) })
	clog.Info("rls config loaded", "domains", len(c.Domains()), "files", len(c.Files()))
	return r, nil
}

// listen builds the Service on sys and, with --grpc-listen, serves it on
// its own listener, capped at maxConns connections, over TLS with lt.
func (r *rlsServer) listen(sys *actors.System, maxConns int, prom *metrics.Metrics, dash *dashData, lt *listenerTLS) error {
	if r == nil {
		return nil
	}
	svc, err := rls.NewService(sys, r.store, rls.Options{
		CountOverLimit:  r.cfg.countOverLimit,
		ShadowMode:      r.cfg.shadow,
		ResponseHeaders: r.cfg.responseHeaders,
		Observer:        dash.rlsObserver(r.obs),
		Logger:          r.log,
	})
	if err != nil {
		return err
	}
	r.svc = svc
	if r.cfg.grpcListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", r.cfg.grpcListen)
	if err != nil {
		return fmt.Errorf("gRPC listener %s: %w", r.cfg.grpcListen, err)
	}
	l := newConnLimiter(ln, maxConns, "grpc", r.log, time.Now)
	prom.ObserveConns("grpc", l.stats)
	var gl net.Listener = l
	if c := lt.config(alpnGRPC); c != nil {
		// TLS under gRPC, on the capped connections: gRPC's deadline of
		// rls.ConnectionTimeout on a new connection bounds the handshake,
		// which its first read or write makes.
		gl = tls.NewListener(l, c)
	}
	g, h := rls.NewGRPCServer(svc)
	r.grpc, r.health, r.served = g, h, make(chan error, 1)
	go func() { r.served <- g.Serve(gl) }()
	r.log.Info("grpc listening", "addr", ln.Addr().String(), "max_conns", maxConns, "tls", lt != nil,
		"count_over_limit", r.cfg.countOverLimit, "shadow", r.cfg.shadow, "response_headers", r.cfg.responseHeaders)
	return nil
}

// routes returns the public listener's routes of the service: the
// reference's POST /json.
func (r *rlsServer) routes() map[string]http.Handler {
	if r == nil || r.svc == nil {
		return nil
	}
	return map[string]http.Handler{rls.JSONPath: r.svc.JSONHandler()}
}

// drain starts the graceful stop of the gRPC server: health answers
// NOT_SERVING first, so that clients that watch it move away, then
// GracefulStop lets the calls in flight finish. The returned wait waits
// for it until ctx is done, and then stops what is left.
func (r *rlsServer) drain(ctx context.Context) (wait func()) {
	if r == nil || r.grpc == nil {
		return func() {}
	}
	r.health.Shutdown()
	done := make(chan struct{})
	go func() {
		r.grpc.GracefulStop()
		close(done)
	}()
	return func() {
		select {
		case <-done:
		case <-ctx.Done():
			r.log.Warn("gRPC server did not drain in time; closing the remaining calls")
			r.grpc.Stop()
			<-done
		}
		if err := <-r.served; err != nil {
			r.log.Error("gRPC server failed", "err", err)
		}
		r.log.Info("gRPC server stopped")
	}
}

// close stops the gRPC server (at once, if drain has not) and the
// config's watcher and SIGHUP handler. It is idempotent.
func (r *rlsServer) close() {
	if r == nil {
		return
	}
	r.closeOnce.Do(func() {
		if r.grpc != nil {
			r.grpc.Stop()
		}
		r.stopHUP()
		if r.watcher != nil {
			_ = r.watcher.Close()
		}
	})
}
