// Package peer is the member-to-member transport of a ratelimitd cluster:
// gRPC (google.golang.org/grpc) unary calls and long-lived bidirectional
// streams whose messages are opaque bytes, carried by a raw codec, so that
// no protobuf definitions are needed; package actors encodes its batches
// itself.
//
// A Server dispatches each call to the Handler of its method, and each
// stream to the StreamHandler of its method; a Client calls a member, or
// opens a Stream to it. Calls have the caller's deadline; opening a
// stream is bounded by its context, and the stream lives until it is
// closed or breaks. Both fail fast when the member cannot be reached (no
// waiting for a connection to come up); the connection reconnects by
// itself, with a backoff of at most MaxBackoff. A stopping Server tells
// its streams (ErrGoingAway), still answers what they carried, and closes
// once their members closed their sides (or its Stop's context ended).
//
// # Non-guarantees
//
// A call that fails (a deadline, a connection that broke), or a message
// sent on a stream that breaks before its answer, may or may not have run
// on the member: callers that retry make their requests
// idempotent. Without a TLS config the transport has no encryption and
// no authentication: it is meant for a private network between the
// members then.
//
// # TLS
//
// With a TLS config (NewServer's and Dial's tc, checked by CheckTLS) the
// members speak TLS 1.3 or later and authenticate each other: a Server
// requires a client certificate its ClientCAs verify, and a Client
// trusts a member whose certificate chains to its RootCAs and names the
// host of the member's address (an IP SAN for an IP address). A refused
// handshake fails the call or the stream's opening as ErrUnreachable,
// with the TLS error's text.
package peer
