// Package dashboard is ratelimitd's live dashboard: a page of plain HTML,
// CSS and JavaScript embedded in the binary (go:embed; no build step, no
// CDN, it works offline) with one vendored chart library (uPlot, see
// static/VENDOR.md), and the JSON endpoints it reads. Mount the Handler on
// the admin listener, never on the public one; Options.Next serves the
// rest of the admin API.
//
// # Endpoints
//
//	GET  /, /dashboard          the page; without a session, the login form (200)
//	POST /login                 token=TOKEN (a form): 303 to /dashboard with the session cookie, or 401
//	POST /logout                clears the session cookie: 303 to /dashboard
//	GET  /dashboard/static/...  the page's scripts and styles (no data; no session needed)
//	GET  /dashboard/traffic[?since=UNIX]     checks per second by result, the last 900 whole seconds
//	GET  /top?by=hits|denials&window=1m|15m&n=1..100    top keys (defaults hits, 1m, 20)
//	GET  /dashboard/rules       each rule's policy and rates
//	GET  /dashboard/health      the rate limiter's health
//	POST /simulate              the algorithm playground (JSON)
//
// The JSON endpoints need the session cookie or "Authorization: Bearer
// TOKEN" (401 with WWW-Authenticate: Bearer otherwise), answer
// Cache-Control: no-store, and answer bad input 400
// {"error":"FIELD: RULE","field":"FIELD"}, as the rest of the HTTP API.
// An unknown or repeated query parameter is such an error. Everything is
// read-only: /simulate runs on tables of its own.
//
// # Access
//
// The admin token guards the page and its data. The login form posts it;
// the right token gets a session cookie (HttpOnly, SameSite=Strict, Path=/,
// Secure when the request came over TLS, expiring after SessionLifetime,
// 12 h), a wrong one 401 and the form again with "Not accepted.", the same
// answer whatever was wrong. The server keeps no session table: a cookie
// is its expiry, a tag of the token it was logged in with, and an
// HMAC-SHA256 of both under a key drawn at random when the process starts,
// so a restart ends every session and nothing can make or stretch a cookie
// without the key. With Options.Tokens the accepted tokens may change: a
// session lasts while its token is accepted, so dropping a token ends the
// sessions logged in with it. Logging out clears the cookie in the browser
// only; a copied cookie stays good until it expires or its token goes. The
// token is compared by its SHA-256 digest in constant time.
//
// Logins are limited per client address, right or wrong: LoginAttempts (10)
// at once, then one per 6 s, in a token bucket of package table per IPv4
// address or IPv6 /64 (the connection's address, not a forwarding header),
// at most 4096 addresses remembered (the one closest to having its attempts
// back is forgotten first); past it, 429 with Retry-After. A wrong bearer
// token, on the page or a JSON endpoint, is an attempt too, counted in the
// same bucket (a right one, a session cookie or no Authorization header
// counts nothing); past the limit, a request with a bearer token, the
// right one included, is 429 with Retry-After without its token being
// compared (the JSON endpoints in JSON, the page as the login form), and
// the lock-out is logged once.
//
// Every response carries ContentSecurityPolicy (only this origin, no inline
// script or style, no eval, frame-ancestors 'none'), X-Content-Type-Options:
// nosniff, X-Frame-Options: DENY, Referrer-Policy: no-referrer and
// Cross-Origin-Opener-Policy and -Resource-Policy: same-origin. The page
// puts every piece of data on the page as text (textContent), so an id like
// <img src=x onerror=alert(1)> shows as those characters.
//
// # Live traffic
//
// The page polls GET /dashboard/traffic once a second, asking with ?since=
// only for the seconds it has not seen, and the other panels every two
// seconds. Polling rather than server-sent events: each poll is a short
// request that the admin listener's write timeout, connection cap and
// graceful shutdown treat like any other, no goroutine is held per open
// page, and a page that lost its server catches up at the next poll. The
// series is a TrafficRing the checks record into: 900 seconds × 4 counters,
// lock-free.
//
// # The playground
//
// POST /simulate takes a policy and a traffic shape and answers what each
// of the four algorithms admits and denies over time, computed by package
// table on a fresh table per algorithm, on a virtual clock that starts at a
// whole number of scales (so fixed windows start with it):
//
//	{"policy": {"algorithm": "fixed_window", "limit": 100, "scale": "1s", "burst": 0},
//	 "traffic": {"shape": "boundary"},
//	 "bucket": "10ms"}
//
// scale and every duration are a number of milliseconds or a Go duration
// string. algorithm (default fixed_window) is the one the page highlights;
// all four run, with the same limit, scale and burst. The shapes and their
// parameters (rates in hits per second):
//
//	steady    rate, duration                 evenly spaced from 0
//	burst     hits, at (0), every (once), duration (at + 2 × scale when once)
//	ramp      from_rate (0), to_rate, duration    the rate changes linearly
//	boundary  before (limit−1), after (limit), offset (scale/20), duration (2 × scale):
//	          before hits at scale−offset, after hits at scale+offset,
//	          straddling the first window boundary
//	poisson   rate, duration, seed (1)       exponential gaps, the same for the same seed
//
// A simulation sends at most MaxSimHits (100,000) hits over at most
// MaxSimSpan (24 h) of virtual time; more is 400 naming the field that
// asked for it (traffic.rate, traffic.hits, traffic.to_rate,
// traffic.after, traffic.duration). The answer has bucket_ms (default 1, 2
// or 5 × 10^k ms making about 200 buckets; at most MaxSimBuckets, 2000),
// the hits offered per bucket, and per algorithm the admitted and denied
// totals and per bucket:
//
//	{"selected":"fixed_window","shape":"boundary","hits":199,"duration_ms":2000,"bucket_ms":10,
//	 "offered":[...],"algorithms":[{"algorithm":"fixed_window","policy":"100/1s","admitted":199,
//	 "denied":0,"admitted_per_bucket":[...],"denied_per_bucket":[...]}, ...]}
//
// At most two simulations run at once; more wait their turn.
//
// # Data sources
//
// The Handler depends on no part of the rate limiter: it reads Traffic,
// TopKeys, Rules and Health, small interfaces the wiring implements (top
// keys with package actors/topk). A nil source makes its endpoint answer
// 404 and the page show the panel as not available. Latencies, like
// TrafficRing, is a fixed-memory recorder for the wiring: the check
// latency quantiles of the health panel, over the last minute.
package dashboard
