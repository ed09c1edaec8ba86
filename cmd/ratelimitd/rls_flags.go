package main

import "flag"

// rlsConfig is what the flags of Envoy's Rate Limit Service say.
type rlsConfig struct {
	grpcListen      string // "": no gRPC server
	configPath      string // a YAML file or a directory; "": no config
	shadow          bool
	responseHeaders bool
	countOverLimit  bool
}

// on reports whether the service runs: with a gRPC listener or a config
// (which POST /json answers from).
func (c rlsConfig) on() bool { return c.grpcListen != "" || c.configPath != "" }

// rlsFlags defines the flags of Envoy's Rate Limit Service: the gRPC
// listener, the config in envoyproxy/ratelimit's format and the modes.
func rlsFlags(fs *flag.FlagSet, cfg *config) {
	addrFlag(fs, &cfg.rls.grpcListen, "grpc-listen", "`address` (host:port) to serve Envoy's Rate Limit Service (gRPC ShouldRateLimit, health, reflection) on, such as 127.0.0.1:8082; off when empty")
	fs.StringVar(&cfg.rls.configPath, "rls-config", "", "the Rate Limit Service's config in envoyproxy/ratelimit's format: a YAML `file`, or a directory of *.yaml and *.yml files; reloaded when it changes and on SIGHUP; without it every ShouldRateLimit is answered OK with no limit")
	fs.BoolVar(&cfg.rls.shadow, "rls-shadow", false, "Rate Limit Service: answer OK overall whatever the descriptors say (global shadow mode; denials are still counted and reported)")
	fs.BoolVar(&cfg.rls.responseHeaders, "rls-response-headers", false, "Rate Limit Service: add RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset, from the most restrictive descriptor, to every answer with a limit")
	fs.BoolVar(&cfg.rls.countOverLimit, "rls-count-over-limit", false, "Rate Limit Service: count every hit of a fixed-window descriptor, denied or not, as envoyproxy/ratelimit does by default; without it a request over a limit consumes nothing")
}
