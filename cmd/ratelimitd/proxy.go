package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/clientip"
	"github.com/ratelimitd/ratelimitd/api/proxy"
)

// newProxy builds the limiting reverse proxy of proxy mode.
func newProxy(cfg *config, log *slog.Logger, sys *actors.System, rs *ruleSet, rec api.Recorder) (http.Handler, error) {
	u, err := url.Parse(cfg.proxy.upstream)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	resolver, err := clientip.New(clientip.Config{Trusted: cfg.proxy.trusted, IPv6Prefix: cfg.proxy.ipv6Prefix, Header: cfg.proxy.header})
	if err != nil {
		return nil, err
	}
	return proxy.New(sys, proxy.Options{
		Upstream:    u,
		PerClient:   cfg.proxy.client,
		PerHost:     cfg.proxy.host,
		Global:      cfg.proxy.global,
		Rules:       rs.store,
		ClientKey:   resolver.Key,
		TrustedPeer: resolver.TrustsPeer,
		DenyStatus:  cfg.denyStatus,
		Metrics:     rec,
		Logger:      log.With("component", "proxy"),
	})
}
