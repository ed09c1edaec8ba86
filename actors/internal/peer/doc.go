// Package peer is the member-to-member transport of a ratelimitd cluster:
// unary gRPC calls (google.golang.org/grpc) whose requests and replies are
// opaque bytes, carried by a raw codec, so that no protobuf definitions are
// needed; package actors encodes its batches itself.
//
// A Server dispatches each call to the Handler of its method; a Client
// calls a member. Calls have the caller's deadline and fail fast when the
// member cannot be reached (no waiting for a connection to come up); the
// connection reconnects by itself, with a backoff of at most MaxBackoff.
//
// # Non-guarantees
//
// A call that fails (a deadline, a connection that broke) may or may not
// have run on the member: callers that retry make their requests
// idempotent. The transport has no TLS and no authentication: it is meant
// for a private network between the members.
package peer
