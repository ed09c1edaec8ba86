package main

import (
	"errors"
	"fmt"
	"syscall"
)

// The descriptors the daemon keeps for itself, whatever the connections
// do; --max-conns's default leaves them free (README, "Connections").
const (
	// fixedReserve: standard input, output and error, the data directory's
	// lock and META, the Go runtime's poller and its wake-up, the rules
	// watcher (inotify) and the rules file being read, the same two for the
	// RLS config, the admin token file,
	// the listeners themselves, and the metrics' reads of /proc.
	fixedReserve = 64
	// shardReserveExtra: beyond the segments a recovery of the shard maps
	// at once (see shardReserve), a roll's new segment and directory fsync,
	// and a snapshot's temporary file, its directory fsync and the snapshot
	// read back by a recovery, plus one more segment written meanwhile.
	shardReserveExtra = 6
	// proxyIdleUpstream: the idle upstream connections api.NewProxy's
	// transport keeps at most (its MaxIdleConnsPerHost, one upstream host).
	proxyIdleUpstream = 256
	// minDefaultConns is the least default cap per listener: below it the
	// descriptor limit is too low to serve, and the daemon says so.
	minDefaultConns = 16
)

// errFewDescriptors is returned by connCaps when the descriptor limit leaves
// too few connections per listener after the reserve.
var errFewDescriptors = errors.New("descriptor limit too low")

// shardReserve returns the descriptors one shard's journal may hold at once:
// the segments below the snapshot threshold plus the one being written
// (all mapped by a recovery, when an owner restarts), plus
// shardReserveExtra.
func shardReserve(segmentSize, snapshotThreshold int64) int {
	segs := (snapshotThreshold + segmentSize - 1) / segmentSize
	return int(segs) + 1 + shardReserveExtra
}

// listenerCosts returns the descriptors one connection costs on each
// listener that is on: the public one (two in proxy mode, where each
// connection may hold an upstream connection), the admin one with
// --admin-token-file, the Redis protocol one with --redis-listen, and the
// gRPC one with --grpc-listen.
func listenerCosts(cfg *config) []int {
	costs := []int{1}
	if cfg.proxy.upstream != "" {
		costs[0] = 2
	}
	if cfg.adminTokenFile != "" {
		costs = append(costs, 1)
	}
	if cfg.redis.listen != "" {
		costs = append(costs, 1)
	}
	if cfg.rls.grpcListen != "" {
		costs = append(costs, 1) // the gRPC listener
	}
	return costs
}

// connBudget is how --max-conns is sized, for the log.
type connBudget struct {
	maxConns   int    // per listener
	nofile     uint64 // the descriptor limit (soft, after raising it)
	reserve    int    // descriptors kept from the connections
	shards     int
	perShard   int
	perConnAll int // descriptors one connection on every listener costs
}

// connCaps returns the cap of every HTTP listener: --max-conns when set,
// else what the descriptor limit nofile leaves after the reserve (shards ×
// shardReserve + fixedReserve, + proxyIdleUpstream in proxy mode), divided
// by the descriptors a connection on each listener that is on costs. The
// error matches errFewDescriptors when that default falls below
// minDefaultConns.
func connCaps(cfg *config, shards int, nofile uint64) (connBudget, error) {
	b := connBudget{nofile: nofile, shards: shards}
	if cfg.dataDir != "" { // else there is no journal
		b.perShard = shardReserve(cfg.segmentSize, cfg.snapshotThreshold)
	}
	b.reserve = shards*b.perShard + fixedReserve
	if cfg.proxy.upstream != "" {
		b.reserve += proxyIdleUpstream
	}
	for _, c := range listenerCosts(cfg) {
		b.perConnAll += c
	}
	if cfg.maxConns > 0 {
		b.maxConns = cfg.maxConns
		return b, nil
	}
	free := int64(nofile) - int64(b.reserve)
	if nofile > 1<<40 { // RLIM_INFINITY, where a system has it
		free = 1 << 40
	}
	b.maxConns = int(max(free, 0) / int64(b.perConnAll))
	if b.maxConns < minDefaultConns {
		return b, fmt.Errorf("%w: %d descriptors leave %d connections per HTTP listener after the %d the journal and the daemon keep (%d shards × %d + %d); raise the limit (ulimit -n, systemd LimitNOFILE=) or set --max-conns",
			errFewDescriptors, nofile, b.maxConns, b.reserve, shards, b.perShard, b.reserve-shards*b.perShard)
	}
	return b, nil
}

// raiseNoFile raises the soft limit on open descriptors (RLIMIT_NOFILE) to
// the hard limit and returns both, as in force after. (The Go runtime raises
// the soft limit at start too, but to one below the hard limit, and not on
// every system.)
func raiseNoFile() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = raised.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			return uint64(lim.Cur), uint64(lim.Max), fmt.Errorf("setrlimit RLIMIT_NOFILE to the hard limit %d: %w", raised.Max, err)
		}
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return uint64(raised.Cur), uint64(raised.Max), fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
		}
	}
	return uint64(lim.Cur), uint64(lim.Max), nil
}
