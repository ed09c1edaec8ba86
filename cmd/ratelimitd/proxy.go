package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/clientip"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/api/proxy"
	"github.com/ratelimitd/ratelimitd/table"
)

// proxyConfig is what the proxy flags say.
type proxyConfig struct {
	upstream             string // "": not a proxy
	trusted              []netip.Prefix
	ipv6Prefix           int
	header               string // the one forwarding header to read, or "" for the automatic order
	client, host, global *table.Policy
}

// parseLimitSpec parses a proxy layer's limit, table.ParsePolicy's
// LIMIT/SCALE[/ALGORITHM[/BURST]] with a LIMIT of at least 1, e.g. 100/1s
// or 600/1m/token_bucket/50.
func parseLimitSpec(s string) (*table.Policy, error) {
	if limit, _, _ := strings.Cut(s, "/"); limit == "0" || strings.HasPrefix(limit, "-") {
		return nil, table.ErrPolicySyntax
	}
	p, err := table.ParsePolicy(s)
	var fe *table.FieldError
	switch {
	case errors.As(err, &fe) && fe.Field == "algorithm":
		return nil, fmt.Errorf("algorithm %s", fe.Message)
	case err != nil:
		return nil, err
	case p.Limit < 1:
		return nil, table.ErrPolicySyntax
	}
	return &p, nil
}

// limitFlag defines a LIMIT/SCALE flag that sets *p.
func limitFlag(set func(name, usage string, fn func(string) error), p **table.Policy, name, usage string) {
	set(name, usage, func(s string) error {
		l, err := parseLimitSpec(s)
		if err != nil {
			return err
		}
		*p = l
		return nil
	})
}

// newProxy builds the limiting reverse proxy of proxy mode.
func newProxy(cfg *config, log *slog.Logger, sys *actors.System, rs *ruleSet, prom *metrics.Metrics) (http.Handler, error) {
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
		Metrics:     prom,
		Logger:      log.With("component", "proxy"),
	})
}
