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
	"strings"
	"syscall"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api"
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
func startRules(cfg *config, log *slog.Logger, metrics *api.Metrics) (*ruleSet, error) {
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
	metrics.ObserveRules(store)
	if cfg.rulesFile == "" {
		return rs, nil
	}
	rlog := log.With("component", "rules", "file", cfg.rulesFile)
	rs.watcher, err = rules.NewWatcher(cfg.rulesFile, store, func(r rules.ReloadResult) {
		metrics.RulesReloaded(r.Err == nil, r.Changed)
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
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				rs.watcher.Reload(rules.TriggerSignal)
			case <-done:
				return
			}
		}
	}()
	rs.stopHUP = func() {
		signal.Stop(hup)
		close(done)
	}
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

// readToken reads the admin bearer token: the file's content without
// surrounding white space, which must not be empty.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("admin token: %s is empty", path)
	}
	return tok, nil
}

// adminServer is the admin API on its own listener.
type adminServer struct {
	srv    *http.Server
	served chan error
}

// startAdmin serves the admin API on --admin-listen when an admin token is
// configured; without one it serves nothing (and says so).
func startAdmin(cfg *config, log *slog.Logger, sys *actors.System, rs *ruleSet, metrics *api.Metrics) (*adminServer, error) {
	if cfg.adminTokenFile == "" {
		log.Info("admin API off: no --admin-token-file")
		return nil, nil
	}
	tok, err := readToken(cfg.adminTokenFile)
	if err != nil {
		return nil, err
	}
	alog := log.With("component", "admin")
	opts := api.AdminOptions{
		Backend: sys,
		Rules:   rs.store,
		Token:   tok,
		Logger:  alog,
		OnRulesChanged: func(s *rules.Set) {
			alog.Info("rules changed through the admin API", "version", s.Version(), "rules", s.Len())
		},
	}
	if cfg.proxy.upstream != "" {
		opts.Metrics = metrics // the public listener proxies: metrics are here
	}
	h, err := api.NewAdminHandler(opts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.adminListen)
	if err != nil {
		return nil, fmt.Errorf("admin listener %s: %w", cfg.adminListen, err)
	}
	a := &adminServer{srv: newServer(h, alog), served: make(chan error, 1)}
	alog.Info("admin listening", "addr", ln.Addr().String())
	go func() { a.served <- a.srv.Serve(ln) }()
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
