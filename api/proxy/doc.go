// Package proxy is the limiting reverse proxy of ratelimitd: New returns a
// handler that spends one hit of every request in each of its layers (per
// client, per URL rule, per host, global), all or nothing through one
// api.Checker CheckAll, before the upstream sees it; an admitted request is
// proxied with net/http/httputil.ReverseProxy.
//
// README.md ("In front of an app") is the contract of its answers and
// headers.
//
// Guarantees: a denied request never reaches the upstream and consumes
// nothing in the other layers; a Checker failure or a full table is
// answered 503 (fail closed); forwarding headers are believed only from
// trusted peers (Options.TrustedPeer). The handler is safe for concurrent
// use.
//
// Non-guarantees: an admitted request whose upstream fails (502) keeps its
// hit counted; a shadow rule's check that fails lets the request through.
package proxy
