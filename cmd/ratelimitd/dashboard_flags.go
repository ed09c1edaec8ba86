package main

import (
	"errors"
	"flag"
	"strconv"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/topk"
)

// dashboardConfig is what the dashboard flags say.
type dashboardConfig struct {
	on            bool // serve the dashboard on the admin listener
	topKeys       bool // track top keys on the check path, for the dashboard
	topKeysSample int  // their sampling rate under load (actors.Config.TopKeysSample); 0: the default
}

// dashboardFlags defines the flags of the live dashboard.
func dashboardFlags(fs *flag.FlagSet, cfg *config) {
	fs.BoolVar(&cfg.dashboard.on, "dashboard", cfg.dashboard.on, "serve the live dashboard (GET / and /dashboard, behind the admin token) on the admin listener; only with --admin-token-file")
	fs.BoolVar(&cfg.dashboard.topKeys, "top-keys", cfg.dashboard.topKeys, "track the heaviest ids by hits and by denials on the check path, for the dashboard and GET /top (fixed memory per shard); only with the dashboard on")
	fs.Func("top-keys-sample", "`rate` at which a shard whose admitted checks come faster than "+strconv.Itoa(actors.TopKeysSampleAbove)+" a second samples them for the top keys: one in rate is counted, rate times (denied checks are all counted); 1 counts every check at any rate; a power of two up to "+strconv.Itoa(topk.MaxSample)+" (default "+strconv.Itoa(actors.DefaultTopKeysSample)+")", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || !topk.ValidSampleRate(n) { // 0, the default's stand-in, is not a rate to ask for
			return errors.New("must be a power of two from 1 to " + strconv.Itoa(topk.MaxSample))
		}
		cfg.dashboard.topKeysSample = n
		return nil
	})
}
