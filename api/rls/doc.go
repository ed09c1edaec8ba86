// Package rls is Envoy's Rate Limit Service (envoy.service.ratelimit.v3,
// ShouldRateLimit) for ratelimitd: a drop-in for envoyproxy/ratelimit (the
// reference) that reads the same config files and gives the same answers,
// counting on ratelimitd's own limiter instead of Redis.
//
// A Service answers from the Config in a Store and counts on a Checker
// (*actors.System); NewGRPCServer serves it with the health service and
// server reflection; Service.JSONHandler is the reference's HTTP POST /json.
//
// # Config
//
// Load reads one YAML file or a directory of *.yaml / *.yml files, each
//
//	domain: mongo_cps            # required, unique across files
//	descriptors:
//	  - key: database            # required
//	    value: users             # optional; '*' matches any run of characters
//	    rate_limit:              # optional; none (and no children) allows all
//	      unit: second           # second, minute, hour, day, week, month, year
//	      requests_per_unit: 500 # 0 denies everything
//	      name: users_limit      # echoed in current_limit.name
//	      replaces: [{name: other_limit}] # drop that limit from the same request
//	      unlimited: false       # true: always OK, limit_remaining 4294967295; no unit then
//	      algorithm: fixed_window # extension: sliding_window, token_bucket, leaky_bucket
//	      burst: 0               # extension: bucket size of the token and leaky buckets
//	      unit_multiplier: 1     # extension: the window is unit × multiplier
//	    shadow_mode: false       # over limit answered OK (counted in metrics)
//	    detailed_metric: false   # metrics key holds the request's values
//	    value_to_metric: false   # metrics key holds this entry's value
//	    share_threshold: false   # with '*': every matching value shares one counter
//	    descriptors: [...]       # the next entry of the request
//
// validated strictly, as the reference: an unknown or repeated key, a
// value of the wrong type, a bad or missing unit, a unit with unlimited, a
// second descriptor with the same key and value at one level, an empty or
// self-naming replaces, share_threshold without '*', a domain defined
// twice, are each a *ConfigError naming the file, the line and the field.
// quota_mode: true and metadata, which the reference knows, are refused as
// unsupported rather than ignored. A unit is an epoch-aligned window as in
// the reference (a week starts on a Thursday, a month is 30 days, a year
// 365); unit × unit_multiplier must be at most table.MaxScale.
// Unlike the reference, '*' is a wildcard in values only (a key is
// literal), and a descriptor's key and value are matched as a pair, not as
// the string key_value.
//
// A Config is immutable. A Watcher keeps a Store in step with the files
// (reloading on change, and on Reload, which the daemon calls on SIGHUP):
// a reload reads them until two reads agree and, if they are valid,
// Store.Swap puts the new Config in force whole, so that every check sees
// the old config or the new one; a bad file keeps the last good config.
//
// # Matching and answers
//
// As the reference (its config_impl.go and service/ratelimit.go): a
// descriptor of an unknown domain has no limit, even with a limit
// override; on a known domain a descriptor's own limit (override) is its
// limit; otherwise its entries are matched level by level, by exact key and
// value, then the level's wildcard values in config order, then the key
// alone, and only a limit found at the last entry applies. Limits named in
// another matched limit's replaces are dropped. The hits of a descriptor
// are its hits_addend when set (0 is a peek, which counts nothing and is
// over only if the count already exceeds the limit), else the request's
// hits_addend, 0 meaning 1. is_negative_hits gives the hits back (a
// refund), which the reference ignores.
//
// The answer has one status per descriptor, in order: OK without
// current_limit when no limit applies; OK with limit_remaining 4294967295
// when unlimited; otherwise current_limit, limit_remaining (0 when over)
// and duration_until_reset, whole seconds to the window's end (for the
// token and leaky buckets: until a denied request fits, at least 1 s, or
// until the bucket is empty). A shadow_mode limit that is over answers OK.
// overall_code is OVER_LIMIT iff a status is; Options.ShadowMode answers
// OK overall whatever the statuses. Options.ResponseHeaders adds
// RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset from the last
// over-limit status, else the first with the least remaining.
//
// Bad requests (empty domain, no descriptors, a descriptor without
// entries, an empty key, more than MaxDescriptors descriptors or
// MaxEntries entries, a key or value past MaxKeyLen or MaxValueLen,
// invalid UTF-8, an override with an unknown unit or a bad multiplier)
// are answered codes.InvalidArgument naming the field, a Checker failure
// codes.Unavailable: never codes.Unknown, which trips an assert in
// Envoy's debug builds, and never the UNKNOWN overall code.
//
// # Counting: two modes
//
//	                      default                      Options.CountOverLimit
//	denied hits           never counted                counted (fixed windows)
//	several descriptors   one all-or-nothing CheckAll  each counted on its own
//	over iff              the hits do not fit          count after the hits > limit
//	reference setting     STOP_CACHE_KEY_INCREMENT_    its default
//	                      WHEN_OVERLIMIT=true
//
// By default a request over the limit consumes nothing in any of its
// descriptors: its non-shadow checks are one CheckAll, admitted only if
// all fit. Peeks and refunds come first and a shadow_mode check last,
// consumed only if the request is admitted and it fits. A status of a
// denied request whose own hits would have fitted is OK with the remaining
// it had.
//
// With CountOverLimit every limited fixed-window descriptor is counted
// whether or not it is over, as the reference's INCRBY does, so a client
// that keeps sending while over stays over for the rest of the window. The
// other algorithms have no count to overshoot: each such descriptor is
// checked on its own and a denial consumes nothing.
//
// # Keys
//
// A descriptor counts in the bucket of its domain and entries (see
// bucketID; share_threshold puts the pattern in place of the value), in
// Namespace, which no rule and no check_rate id can share. An id longer
// than table.MaxIDLen ends in a SHA-256 of the whole (collision-resistant,
// so long values are counted apart, not refused). The buckets live on the
// same System as every other check: journalled, swept and bounded by its
// MaxBuckets (a check the full table refuses is OVER_LIMIT). A limit's
// buckets are keyed by algorithm and window, not by its requests_per_unit,
// so a reload that changes a limit keeps the counts.
//
// # Metrics
//
// An Observer is told about every call (domain, transport, outcome,
// latency) and every limited descriptor (hits within, near — past
// NearLimitRatio — and over the limit, and shadowed), per configured domain
// and per descriptor key: runtime values appear in a key only where the
// config asks (detailed_metric, value_to_metric), and past
// Options.MaxMetricKeys distinct keys the rest are reported as
// OtherMetricKey, so clients cannot grow the label set without bound.
package rls
