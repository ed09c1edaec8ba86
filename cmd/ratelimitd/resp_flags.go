package main

import (
	"errors"
	"flag"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/api/resp"
)

// respConfig is what the Redis protocol flags say. Its zero value is the
// listener off.
type respConfig struct {
	listen       string // host:port, a loopback host when none was given; "": off
	maxConns     int    // 0: its share of the descriptors, at most resp.DefaultMaxConns
	passwordFile string
	// idleTimeout is resp.Options.IdleTimeout: 0 its default, negative never.
	idleTimeout time.Duration
	// authFailures is resp.Options.AuthFailures: 0 its default, negative
	// no limit.
	authFailures int

	// passwords are those of passwordFile, read at start and again when
	// it changes; nil without it. Not a flag.
	passwords *reloading[[]string]
}

// respFlags defines the flags of the Redis protocol listener.
func respFlags(fs *flag.FlagSet, cfg *config) {
	fs.Func("redis-listen", "`address` (host:port) to serve the Redis protocol (RESP2: CL.THROTTLE, RL.CHECK, RL.RULE, RL.REFUND) on, such as 127.0.0.1:6380; a port alone (6380 or :6380) binds 127.0.0.1; empty (the default) serves none", func(s string) error {
		addr, err := redisListenAddr(s)
		if err != nil {
			return err
		}
		cfg.redis.listen = addr
		return nil
	})
	intFlag(fs, &cfg.redis.maxConns, "redis-max-conns", "`number` of Redis protocol connections held open at most; one more is answered \"ERR max number of clients reached\" and closed (default: the listener's share of the descriptor limit, at most "+strconv.Itoa(resp.DefaultMaxConns)+"; see README)", 1, 0)
	fs.StringVar(&cfg.redis.passwordFile, "redis-password-file", "", "`file` holding the password Redis clients must give with AUTH before any other command, in a file no group or other user may access (mode 0600 or 0400): one per line, any of them accepted; re-read when it changes, so a password rotates without a restart; without it no AUTH is asked")
	authFailuresFlag(fs, &cfg.redis.authFailures, "redis-auth-failures", "`number` of failed AUTHs a client address may make at once, then per minute, before its AUTHs are refused for a while, their passwords not compared; 0 turns the limit off, for clients that share an address behind a proxy or NAT (default "+strconv.Itoa(resp.DefaultAuthFailures)+")")
	fs.Func("redis-idle-timeout", "close a Redis protocol connection that sends nothing for this long, a `duration`; 0 never closes one (default "+resp.DefaultIdleTimeout.String()+")", func(s string) error {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return errors.New("must be a duration such as 30s or 5m, or 0 for never")
		case d < 0:
			return errors.New("must not be negative")
		case d == 0:
			d = -1 // resp's never
		}
		cfg.redis.idleTimeout = d
		return nil
	})
}

// redisListenAddr returns the address --redis-listen s names: host:port
// as checkListenAddr takes it, with 127.0.0.1 for a missing host, so that
// the listener binds loopback unless told otherwise (0.0.0.0:6380 or
// [::]:6380 serve every interface); "" is off.
func redisListenAddr(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if !strings.Contains(s, ":") {
		s = ":" + s // a port alone
	}
	if err := checkListenAddr(s); err != nil {
		return "", err
	}
	host, port, _ := net.SplitHostPort(s)
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}
