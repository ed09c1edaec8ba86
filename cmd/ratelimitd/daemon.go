package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/table/journal"
)

// running is what start started, which shutdown stops.
type running struct {
	cfg    *config
	log    *slog.Logger
	rules  *ruleSet
	sys    *actors.System
	admin  *adminServer // nil without the admin API
	redis  *respServer  // nil without --redis-listen
	rls    *rlsServer   // nil without --grpc-listen and --rls-config
	dash   *dashData    // nil without the dashboard
	tls    *listenerTLS // nil without --tls-cert
	srv    *http.Server
	ln     net.Listener // the public listener, capped
	served chan error   // Serve's return
}

// start starts the daemon: the descriptor limit, the admin token and the
// rules (a refused file stops it before any recovery), the actor system,
// the handlers, the admin API and the public listener. It returns nil and
// the exit code when it could not start; whatever it had started is then
// stopped.
func start(ctx context.Context, cfg *config, log *slog.Logger) (*running, int) {
	// Before any journal or listener opens: the soft descriptor limit up to
	// the hard one, which sizes the connection caps.
	nofile, nofileHard, err := raiseNoFile()
	if err != nil {
		log.Warn("cannot raise the descriptor limit", "err", err)
	}
	log.Info("descriptor limit", "soft", nofile, "hard", nofileHard)

	adminTokens, err := readAdminTokens(cfg, time.Now, log)
	if err != nil {
		log.Error("cannot read the admin token", "err", err)
		return nil, exitFailure
	}
	if err := readRedisPassword(cfg, time.Now, log); err != nil {
		log.Error("cannot read the Redis password", "err", err)
		return nil, exitFailure
	}
	ltls, err := loadListenerTLS(cfg.tls, time.Now, log)
	if err != nil {
		log.Error("cannot load the TLS files", "err", err)
		return nil, exitFailure
	}
	if ltls != nil {
		log.Info("TLS on every client-facing listener", "cert", cfg.tls.certFile, "client_ca", cfg.tls.clientCAFile)
	}
	prom := metrics.New()
	observeFiles(prom, cfg, ltls, adminTokens)
	rs, err := startRules(cfg, log, prom)
	if err != nil {
		log.Error("cannot load the rules", "err", err)
		return nil, exitFailure
	}
	rl, err := startRLS(cfg, log, prom)
	if err != nil {
		rs.close()
		log.Error("cannot load the RLS config", "err", err)
		return nil, exitFailure
	}
	dash := newDashData(cfg)
	acfg := actorsConfig(cfg, log, prom)
	dash.configureActors(&acfg)
	sys, err := actors.Start(ctx, acfg)
	if err != nil {
		rs.close()
		rl.close()
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			log.Info("stopped while starting", "cause", context.Cause(ctx))
			return nil, exitOK
		}
		if errors.Is(err, journal.ErrCorrupt) {
			err = fmt.Errorf("%w; start with --journal-repair to cut the journal there, keeping the valid prefix and moving the rest aside to *.broken files", err)
		}
		log.Error("cannot start the actor system", "err", err)
		return nil, exitFailure
	}
	prom.Observe(metricsStats(sys))
	if _, ok := sys.ClusterStatus(); ok {
		prom.ObserveCluster(clusterMetrics(sys))
	}
	d := &running{cfg: cfg, log: log, rules: rs, sys: sys, rls: rl, dash: dash, tls: ltls}
	if !d.listen(ctx, nofile, secretsOf(adminTokens), prom) {
		d.admin.shutdown(context.Background(), log)
		d.redis.drain(context.Background(), log)()
		d.stop()
		return nil, exitFailure
	}
	return d, exitOK
}

// actorsConfig is the config of the actor system the flags ask for.
func actorsConfig(cfg *config, log *slog.Logger, prom *metrics.Metrics) actors.Config {
	return actors.Config{
		Shards:        cfg.shards,
		SweepInterval: cfg.sweepInterval,
		BucketTTL:     cfg.bucketTTL,
		Logger:        log.With("component", "actors"),
		SweepObserver: sweepMetrics{prom},

		DataDir:             cfg.dataDir,
		JournalSync:         cfg.journalSync,
		JournalSyncInterval: cfg.journalSyncInterval,
		OnJournalError:      cfg.onJournalError,
		JournalRepair:       cfg.journalRepair,
		SegmentSize:         cfg.segmentSize,
		SnapshotThreshold:   cfg.snapshotThreshold,

		MaxBuckets:  cfg.maxBuckets,
		EvictOldest: cfg.evictOldest,

		Cluster: clusterActorsConfig(&cfg.cluster, log.With("component", "cluster")),
	}
}

// listen sizes the connection caps, builds the public handler, starts the
// admin API and opens the public listener. It reports whether it could,
// having logged what failed.
func (d *running) listen(ctx context.Context, nofile uint64, adminTokens func() []string, prom *metrics.Metrics) bool {
	cfg, log := d.cfg, d.log
	budget, err := connCaps(cfg, d.sys.Stats().Shards, nofile)
	if err != nil {
		log.Error("cannot size the connection caps", "err", err)
		return false
	}
	log.Info("connection caps", "max_conns", budget.maxConns, "listeners", len(listenerCosts(cfg)),
		"descriptor_limit", budget.nofile, "reserve", budget.reserve, "shards", budget.shards, "per_shard", budget.perShard,
		"from_flag", cfg.maxConns > 0)
	if need := uint64(budget.reserve) + uint64(budget.maxConns)*uint64(budget.perConnAll); cfg.maxConns > 0 && need > nofile {
		log.Warn("--max-conns allows more connections than the descriptor limit leaves free: a flood may starve the journal",
			"max_conns", budget.maxConns, "descriptors_needed", need, "descriptor_limit", nofile)
	}

	if err := d.rls.listen(d.sys, budget.maxConns, prom, d.dash, d.tls); err != nil {
		log.Error("cannot start the Rate Limit Service", "err", err)
		return false
	}
	var handler http.Handler
	if cfg.proxy.upstream != "" {
		// Proxy mode: the public listener proxies everything; metrics are
		// on the admin listener.
		handler, err = newProxy(cfg, log, d.sys, d.rules, d.dash.recorder(prom))
	} else {
		handler, err = httpapi.NewHandler(d.sys, httpapi.Options{
			DenyStatus: cfg.denyStatus,
			Metrics:    d.dash.recorder(prom),
			Logger:     log.With("component", "api"),
			Rules:      d.rules.store,
			Routes:     d.rls.routes(),
		})
	}
	if err != nil {
		log.Error("cannot build the HTTP handler", "err", err)
		return false
	}
	if d.admin, err = startAdmin(cfg, adminTokens, budget.maxConns, log, d.sys, d.rules, prom, d.dash, d.tls); err != nil {
		log.Error("cannot start the admin API", "err", err)
		return false
	}
	if d.redis, err = startRESP(cfg, budget.maxConns, log, d.sys, d.rules, prom, d.dash, d.tls); err != nil {
		log.Error("cannot start the Redis protocol server", "err", err)
		return false
	}

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		log.Error("cannot listen", "addr", cfg.listen, "err", err)
		return false
	}
	if log.Enabled(ctx, slog.LevelDebug) {
		handler = httpapi.AccessLog(log.With("component", "http"), handler)
	}
	d.srv = newServer(handler, log.With("component", "http"))
	name := "public"
	if cfg.proxy.upstream != "" {
		name = "proxy"
	}
	d.ln = limitConns(ln, d.srv, budget.maxConns, name, log.With("component", "http"), prom, d.tls.config(alpnHTTP))
	log.Info("listening", "addr", ln.Addr().String(), "max_conns", budget.maxConns, "tls", d.tls != nil)
	return true
}

// serve serves until ctx is done or the public listener fails, then shuts
// the daemon down, and returns the exit code.
func (d *running) serve(ctx context.Context) int {
	d.served = make(chan error, 1)
	go func() { d.served <- d.srv.Serve(d.ln) }()
	select {
	case <-ctx.Done():
		d.log.Info("shutting down", "cause", context.Cause(ctx), "timeout", d.cfg.shutdownTimeout)
		return d.shutdown(ctx, nil)
	case err := <-d.served:
		// Serve returns before Shutdown only on a failure to accept.
		d.log.Error("HTTP server failed; shutting down", "err", err)
		return d.shutdown(ctx, err)
	}
}

// shutdown drains the HTTP servers within --shutdown-timeout (closing
// what is left after it), then stops the actors and the rules, and
// returns the exit code: a failure, when serveErr (Serve failed) or a
// step did not end cleanly.
func (d *running) shutdown(ctx context.Context, serveErr error) int {
	log := d.log
	code := exitOK
	if serveErr != nil {
		code = exitFailure
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.shutdownTimeout)
	waitRedis := d.redis.drain(shutdownCtx, log)
	waitGRPC := d.rls.drain(shutdownCtx)
	err := d.srv.Shutdown(shutdownCtx)
	d.admin.shutdown(shutdownCtx, log)
	waitRedis()
	waitGRPC()
	cancel()
	if err != nil {
		log.Warn("HTTP server did not drain in time; closing the remaining connections", "err", err)
		_ = d.srv.Close()
	}
	if serveErr == nil {
		// Shutdown has closed the listener, so Serve returns (ErrServerClosed).
		if err := <-d.served; !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP server failed", "err", err)
			code = exitFailure
		}
	}
	log.Info("HTTP server stopped")
	if !d.stop() {
		code = exitFailure
	}
	log.Info("stopped", "exit_code", code)
	return code
}

// stop stops the actors and then the rules' watcher, and reports whether
// the actors stopped cleanly.
func (d *running) stop() bool {
	d.rls.close()
	ok := stopActors(d.log, d.sys, d.cfg.shutdownTimeout)
	d.rules.close()
	return ok
}

// newServer returns an HTTP server for h with the daemon's timeouts.
func newServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// stopActors stops sys within timeout and logs the outcome. It reports
// whether sys stopped cleanly.
func stopActors(log *slog.Logger, sys *actors.System, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := sys.Stop(ctx); err != nil {
		log.Error("actor system did not stop cleanly", "err", err)
		return false
	}
	log.Info("actor system stopped")
	return true
}
