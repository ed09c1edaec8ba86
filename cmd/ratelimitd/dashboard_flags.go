package main

import "flag"

// dashboardConfig is what the dashboard flags say.
type dashboardConfig struct {
	on      bool // serve the dashboard on the admin listener
	topKeys bool // track top keys on the check path, for the dashboard
}

// dashboardFlags defines the flags of the live dashboard.
func dashboardFlags(fs *flag.FlagSet, cfg *config) {
	fs.BoolVar(&cfg.dashboard.on, "dashboard", cfg.dashboard.on, "serve the live dashboard (GET / and /dashboard, behind the admin token) on the admin listener; only with --admin-token-file")
	fs.BoolVar(&cfg.dashboard.topKeys, "top-keys", cfg.dashboard.topKeys, "track the heaviest ids by hits and by denials on the check path, for the dashboard and GET /top (fixed memory per shard); only with the dashboard on")
}
