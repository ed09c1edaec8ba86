package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/clientip"
	"github.com/ratelimitd/ratelimitd/table"
)

// proxyConfig is what the proxy flags say.
type proxyConfig struct {
	upstream             string // "": not a proxy
	trusted              []netip.Prefix
	ipv6Prefix           int
	header               string // the one forwarding header to read, or "" for the automatic order
	client, host, global *api.ProxyLimit
}

// parseLimitSpec parses LIMIT/SCALE[/ALGORITHM[/BURST]], e.g. 100/1s or
// 600/1m/token_bucket/50.
func parseLimitSpec(s string) (*api.ProxyLimit, error) {
	bad := errors.New("must be LIMIT/SCALE[/ALGORITHM[/BURST]], such as 100/1s or 600/1m/token_bucket/50")
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 4 {
		return nil, bad
	}
	l := &api.ProxyLimit{}
	var err error
	if l.Limit, err = strconv.ParseInt(parts[0], 10, 64); err != nil || l.Limit < 1 {
		return nil, bad
	}
	if l.Scale, err = time.ParseDuration(parts[1]); err != nil {
		return nil, bad
	}
	if len(parts) > 2 {
		if l.Algorithm, err = table.ParseAlgorithm(parts[2]); err != nil {
			return nil, fmt.Errorf("algorithm %s", strings.TrimPrefix(err.Error(), "algorithm: "))
		}
	}
	if len(parts) > 3 {
		if l.Burst, err = strconv.ParseInt(parts[3], 10, 64); err != nil || l.Burst < 0 {
			return nil, bad
		}
	}
	probe := table.Request{ID: "x", Scale: l.Scale, Limit: l.Limit, Algorithm: l.Algorithm, Burst: l.Burst, Hits: 1}
	if err := probe.Validate(); err != nil {
		return nil, err
	}
	return l, nil
}

// limitFlag defines a LIMIT/SCALE flag that sets *p.
func limitFlag(set func(name, usage string, fn func(string) error), p **api.ProxyLimit, name, usage string) {
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
func newProxy(cfg *config, log *slog.Logger, sys *actors.System, rs *ruleSet, metrics *api.Metrics) (http.Handler, error) {
	u, err := url.Parse(cfg.proxy.upstream)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	resolver, err := clientip.New(clientip.Config{Trusted: cfg.proxy.trusted, IPv6Prefix: cfg.proxy.ipv6Prefix, Header: cfg.proxy.header})
	if err != nil {
		return nil, err
	}
	return api.NewProxy(sys, api.ProxyOptions{
		Upstream:    u,
		PerClient:   cfg.proxy.client,
		PerHost:     cfg.proxy.host,
		Global:      cfg.proxy.global,
		Rules:       rs.store,
		ClientKey:   resolver.Key,
		TrustedPeer: resolver.TrustsPeer,
		DenyStatus:  cfg.denyStatus,
		Metrics:     metrics,
		Logger:      log.With("component", "proxy"),
	})
}
