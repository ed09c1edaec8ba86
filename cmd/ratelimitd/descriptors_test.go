package main

import (
	"errors"
	"testing"
)

// TestConnCaps: the default --max-conns is the descriptor limit less the
// reserve (shards × (⌈threshold/segment⌉ + 7) + 64, + 256 in proxy mode),
// divided by what a connection on every listener that is on costs (2 on
// the proxy listener, which may hold an upstream connection each).
func TestConnCaps(t *testing.T) {
	t.Parallel()
	base := defaults // 8 MiB segments, 32 MiB threshold: 11 per shard
	with := func(f func(*config)) config {
		c := base
		f(&c)
		return c
	}
	tests := []struct {
		name     string
		cfg      config
		shards   int
		nofile   uint64
		want     int
		reserve  int
		perShard int
	}{
		{"public only", base, 8, 20000, 20000 - (8*11 + 64), 8*11 + 64, 11},
		{"public and admin", with(func(c *config) { c.adminTokenFile = "t" }), 8, 20000, (20000 - 152) / 2, 152, 11},
		{"proxy and admin", with(func(c *config) { c.adminTokenFile = "t"; c.proxy.upstream = "http://u" }), 8, 20000, (20000 - 152 - 256) / 3, 152 + 256, 11},
		{"no journal", with(func(c *config) { c.dataDir = "" }), 8, 1024, 1024 - 64, 64, 0},
		{"small segments", with(func(c *config) { c.segmentSize = 3 << 20 }), 2, 4096, 4096 - (2*(11+7) + 64), 2*(11+7) + 64, 18},
		{"explicit", with(func(c *config) { c.maxConns = 8 }), 8, 100, 8, 152, 11},
		{"the least default", base, 1, 16 + 11 + 64, 16, 75, 11},
	}
	for _, tt := range tests {
		b, err := connCaps(&tt.cfg, tt.shards, tt.nofile)
		if err != nil || b.maxConns != tt.want || b.reserve != tt.reserve || b.perShard != tt.perShard || b.nofile != tt.nofile || b.shards != tt.shards {
			t.Errorf("%s: got %+v, %v; want max_conns %d, reserve %d, per shard %d", tt.name, b, err, tt.want, tt.reserve, tt.perShard)
		}
	}
	b, err := connCaps(&base, 1, 15+11+64)
	if !errors.Is(err, errFewDescriptors) || b.maxConns != 15 {
		t.Errorf("one descriptor short of 16 connections: got %+v, %v; want errFewDescriptors", b, err)
	}
	if _, err := connCaps(&base, 8, 100); !errors.Is(err, errFewDescriptors) {
		t.Errorf("a limit below the reserve: got %v, want errFewDescriptors", err)
	}
}
