package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
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

// minTokenBytes is the shortest admin token accepted: 16 random bytes are
// beyond guessing, a short word is not.
const minTokenBytes = 16

// maxTokenFileBytes bounds what is read of a secret's file.
const maxTokenFileBytes = 64 << 10

// readToken reads the admin bearer token (see readSecret), refusing a
// token shorter than minTokenBytes.
func readToken(path string) (string, error) {
	tok, err := readSecret("admin token", path)
	if err != nil {
		return "", err
	}
	if len(tok) < minTokenBytes {
		return "", fmt.Errorf("admin token: %s holds a token of %d bytes; it must be at least %d bytes (for example 32 random bytes in hex: openssl rand -hex 32)", path, len(tok), minTokenBytes)
	}
	return tok, nil
}

// readSecret reads the secret what (its name in errors) from the file
// path (see readSecretFile): the file's content without surrounding white
// space.
func readSecret(what, path string) (string, error) {
	b, err := readSecretFile(what, path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// readSecretFile reads the file path of the secret what (its name in
// errors), at most maxTokenFileBytes of it. Like ssh with a private key,
// it refuses a file that group or others may access (any of the mode bits
// 077), naming the file and what is wrong.
func readSecretFile(what, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	// The mode of the file opened, not of the path, so a swap in between
	// cannot slip past the check.
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s: %s is accessible by group or others (mode %04o); a secret must be readable by its owner only: chmod 600 %s", what, path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes))
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", what, path, err)
	}
	return b, nil
}

// adminServer is the admin API on its own listener.
type adminServer struct {
	srv    *http.Server
	served chan error
}

// startAdmin serves the admin API on --admin-listen, at most maxConns
// connections at once, with the bearer token tok (read by readToken) when
// --admin-token-file is set, behind the dashboard when it is on (dash);
// over TLS with lt; without the token file it serves nothing (and says so).
func startAdmin(cfg *config, tok string, maxConns int, log *slog.Logger, sys *actors.System, rs *ruleSet, prom *metrics.Metrics, dash *dashData, lt *listenerTLS) (*adminServer, error) {
	if cfg.adminTokenFile == "" {
		log.Info("admin API off: no --admin-token-file")
		return nil, nil
	}
	alog := log.With("component", "admin")
	opts := admin.Options{
		Backend: adminBackend{sys},
		Rules:   rs.store,
		Token:   tok,
		Logger:  alog,
		Cluster: clusterStatus(sys),
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
	if h, err = dash.mount(h, cfg, tok, sys, rs, alog); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.adminListen)
	if err != nil {
		return nil, fmt.Errorf("admin listener %s: %w", cfg.adminListen, err)
	}
	a := &adminServer{srv: newServer(h, alog), served: make(chan error, 1)}
	capped := limitConns(ln, a.srv, maxConns, "admin", alog, prom, lt.config(alpnHTTP))
	alog.Info("admin listening", "addr", ln.Addr().String(), "max_conns", maxConns, "tls", lt != nil)
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
