package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/admin"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/api/rules"
)

// ruleSet is the daemon's named rules: the Store every check reads, and,
// with --rules, the Watcher that reloads it from the file on change and on
// SIGHUP.
type ruleSet struct {
	store   *rules.Store
	watcher *rules.Watcher // nil without --rules
	stopHUP func()
}

// startRules loads --rules (a bad file refuses the start: there is no last
// good set yet), watches it, and reloads it on SIGHUP. Without --rules the
// Store starts empty; the admin API can still add rules.
func startRules(cfg *config, log *slog.Logger, prom *metrics.Metrics) (*ruleSet, error) {
	rs := &ruleSet{stopHUP: func() {}}
	var list []rules.Rule
	if cfg.rulesFile != "" {
		var err error
		if list, err = rules.LoadFile(cfg.rulesFile); err != nil {
			return nil, err
		}
	}
	store, err := rules.NewStore(list)
	if err != nil {
		return nil, err
	}
	rs.store = store
	prom.ObserveRules(store)
	if cfg.rulesFile == "" {
		return rs, nil
	}
	rlog := log.With("component", "rules", "file", cfg.rulesFile)
	rs.watcher, err = rules.NewWatcher(cfg.rulesFile, store, func(r rules.ReloadResult) {
		prom.RulesReloaded(r.Err == nil, r.Changed)
		switch {
		case r.Err != nil:
			rlog.Error("rules reload failed; keeping the last good rules", "trigger", r.Trigger, "err", r.Err, "version", store.Current().Version())
		case r.Changed:
			rlog.Info("rules reloaded", "trigger", r.Trigger, "version", r.Version, "rules", r.Rules)
		default:
			rlog.Debug("rules unchanged", "trigger", r.Trigger, "version", r.Version)
		}
	}, rlog)
	if err != nil {
		return nil, err
	}
	rs.stopHUP = onSIGHUP(func() { rs.watcher.Reload(rules.TriggerSignal) })
	rlog.Info("rules loaded", "rules", len(list), "version", store.Current().Version())
	return rs, nil
}

// close stops the watcher and the SIGHUP handler.
func (rs *ruleSet) close() {
	rs.stopHUP()
	if rs.watcher != nil {
		_ = rs.watcher.Close()
	}
}

// adminServer is the admin API on its own listener.
type adminServer struct {
	srv    *http.Server
	served chan error
}

// startAdmin serves the admin API on --admin-listen, at most maxConns
// connections at once, with the bearer tokens (read by readAdminTokens) when
// --admin-token-file is set, behind the dashboard when it is on (dash);
// over TLS with lt; without the token file it serves nothing (and says so).
func startAdmin(cfg *config, tokens func() []string, maxConns int, log *slog.Logger, sys *actors.System, rs *ruleSet, prom *metrics.Metrics, dash *dashData, lt *listenerTLS) (*adminServer, error) {
	if cfg.adminTokenFile == "" {
		log.Info("admin API off: no --admin-token-file")
		return nil, nil
	}
	alog := log.With("component", "admin")
	stopping := make(chan struct{})
	opts := admin.Options{
		Backend: adminBackend{sys},
		Rules:   rs.store,
		Tokens:  tokens,
		Logger:  alog,
		Cluster: clusterStatus(sys),
		// The dashboard mounted in front counts the wrong tokens of its
		// own endpoints and logins apart.
		AuthFailures:   cfg.adminAuthFailures,
		OnTokenFailure: prom.TokenFailures("api"),
		Profiling:      cfg.adminPprof,
		Done:           stopping,
		OnRulesChanged: func(s *rules.Set) {
			alog.Info("rules changed through the admin API", "version", s.Version(), "rules", s.Len())
		},
	}
	if cfg.proxy.upstream != "" {
		opts.Metrics = prom.Handler() // the public listener proxies: metrics are here
	}
	h, err := admin.NewHandler(opts)
	if err != nil {
		return nil, err
	}
	if h, err = dash.mount(h, cfg, tokens, sys, rs, prom, alog); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.adminListen)
	if err != nil {
		return nil, fmt.Errorf("admin listener %s: %w", cfg.adminListen, err)
	}
	a := &adminServer{srv: newServer(h, alog), served: make(chan error, 1)}
	var stopOnce sync.Once // a CPU profile ends with the server
	a.srv.RegisterOnShutdown(func() { stopOnce.Do(func() { close(stopping) }) })
	capped := limitConns(ln, a.srv, maxConns, "admin", alog, prom, lt.config(alpnHTTP))
	alog.Info("admin listening", "addr", ln.Addr().String(), "max_conns", maxConns, "tls", lt != nil, "pprof", cfg.adminPprof)
	go func() { a.served <- a.srv.Serve(capped) }()
	return a, nil
}

// shutdown stops the admin server within ctx.
func (a *adminServer) shutdown(ctx context.Context, log *slog.Logger) {
	if a == nil {
		return
	}
	if err := a.srv.Shutdown(ctx); err != nil {
		_ = a.srv.Close()
	}
	if err := <-a.served; !errors.Is(err, http.ErrServerClosed) {
		log.Error("admin server failed", "err", err)
	}
}

// onSIGHUP calls reload on every SIGHUP, one at a time, until the returned
// stop is called: the daemon's reload of its config files.
func onSIGHUP(reload func()) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				reload()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}
