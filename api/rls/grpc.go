package rls

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The limits NewGRPCServer sets.
const (
	// MaxRecvMsgSize bounds a request message: room for MaxDescriptors
	// descriptors of long values, so that a big request is refused by
	// validation, naming its field, rather than by the transport.
	MaxRecvMsgSize = 4 << 20
	// MaxSendMsgSize bounds an answer (MaxDescriptors statuses and three
	// headers need a few KiB).
	MaxSendMsgSize = 1 << 20
	// MaxConcurrentStreams bounds the calls in flight on one connection;
	// Envoy opens another connection past it.
	MaxConcurrentStreams = 1024
	// KeepaliveMinTime is the shortest interval between a client's pings
	// that is tolerated (faster ones close the connection with
	// ENHANCE_YOUR_CALM); pings without calls in flight are allowed, as
	// Envoy's connection_keepalive sends them.
	KeepaliveMinTime = 5 * time.Second
	// KeepaliveTime is the idle time after which the server pings a
	// client, and KeepaliveTimeout how long it waits for the answer before
	// closing the connection: dead peers are found within a minute.
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 10 * time.Second
	// ConnectionTimeout bounds a new connection's HTTP/2 handshake.
	ConnectionTimeout = 10 * time.Second
	// StreamWorkers is the number of goroutines kept to serve calls: a
	// call served by one reuses its grown stack instead of starting a
	// goroutine whose stack is grown (copied) on every call. Calls past it
	// get a goroutine of their own, as without workers.
	StreamWorkers = 256
	// WindowSize is the HTTP/2 flow-control window of each call and of
	// each connection. A fixed window turns off gRPC's bandwidth-delay
	// estimation, whose pings would otherwise follow every round trip;
	// requests are small, so the window is never what bounds them.
	WindowSize = 1 << 20
)

// NewGRPCServer returns a gRPC server, not yet serving, with svc's
// ShouldRateLimit (envoy.service.ratelimit.v3.RateLimitService), the
// standard health service (grpc.health.v1.Health, SERVING for "" and the
// rate-limit service) and server reflection (so that grpcurl works), with
// the message, stream and keepalive limits above. extra options come after
// those and may override them. The health server is returned so that the
// caller can report NOT_SERVING while shutting down.
//
// A request that is not a valid RateLimitRequest (invalid UTF-8 in a
// string, broken wire format) is answered InvalidArgument naming the field,
// not Internal; a panic in a handler is answered Internal and logged. No
// answer carries codes.Unknown.
func NewGRPCServer(svc *Service, extra ...grpc.ServerOption) (*grpc.Server, *health.Server) {
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec{base: encoding.GetCodecV2(grpcproto.Name)}),
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		grpc.MaxSendMsgSize(MaxSendMsgSize),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.ConnectionTimeout(ConnectionTimeout),
		grpc.NumStreamWorkers(StreamWorkers),
		grpc.InitialWindowSize(WindowSize),
		grpc.InitialConnWindowSize(WindowSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		grpc.ChainUnaryInterceptor(svc.recoverer),
	}
	g := grpc.NewServer(append(opts, extra...)...)
	desc := rlsv3.RateLimitService_ServiceDesc
	desc.Methods = []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: shouldRateLimitHandler}}
	g.RegisterService(&desc, svc)
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	h.SetServingStatus(rlsv3.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, h)
	reflection.Register(g)
	return g, h
}

// recoverer answers a panicking handler Internal (never Unknown) and logs it.
func (s *Service) recoverer(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.opts.Logger.Error("rls: handler panicked", "method", info.FullMethod, "panic", fmt.Sprint(r))
			resp, err = nil, status.Error(codes.Internal, "internal error")
		}
	}()
	return handler(ctx, req)
}

// wireRequest is a RateLimitRequest as the codec decodes it: the error of
// a request that is not valid protobuf is kept for the handler, which
// answers it InvalidArgument (the transport would answer Internal).
type wireRequest struct {
	req rlsv3.RateLimitRequest
	raw []byte // kept only when decoding failed
	err error
}

// codec is the proto codec, except that it decodes a *wireRequest itself.
type codec struct{ base encoding.CodecV2 }

func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	w, ok := v.(*wireRequest)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	// One buffer, as a small request arrives, is decoded in place (the
	// decoded strings are copies); only a request that fails keeps a copy.
	var b []byte
	if len(data) == 1 {
		b = data[0].ReadOnlyData()
	} else {
		b = data.Materialize()
	}
	if w.err = proto.Unmarshal(b, &w.req); w.err != nil {
		w.raw = bytes.Clone(b)
	}
	return nil
}

func (codec) Name() string { return grpcproto.Name }

// shouldRateLimitHandler is the gRPC method handler of ShouldRateLimit.
func shouldRateLimitHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	w := &wireRequest{}
	if err := dec(w); err != nil {
		return nil, err
	}
	svc := srv.(*Service)
	if w.err != nil {
		field, rule := badField(w.raw)
		if svc.opts.Observer != nil {
			svc.opts.Observer.ObserveCall(CallEvent{Transport: TransportGRPC, Outcome: OutcomeInvalid})
		}
		return nil, status.Error(codes.InvalidArgument, field+": "+rule)
	}
	if interceptor == nil {
		return svc.ShouldRateLimit(ctx, &w.req)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: rlsv3.RateLimitService_ShouldRateLimit_FullMethodName}
	return interceptor(ctx, &w.req, info, func(ctx context.Context, req any) (any, error) {
		return svc.ShouldRateLimit(ctx, req.(*rlsv3.RateLimitRequest))
	})
}

// Field numbers of the request's string fields, which is all badField looks for.
const (
	fieldDomain      = 1 // RateLimitRequest.domain
	fieldDescriptors = 2 // RateLimitRequest.descriptors
	fieldEntries     = 1 // RateLimitDescriptor.entries
	fieldKey         = 1 // Entry.key
	fieldValue       = 2 // Entry.value
)

// badField names the field of a RateLimitRequest, in wire format b, that
// keeps it from decoding: the first string that is not valid UTF-8, or
// "request" when the wire format itself is broken.
func badField(b []byte) (field, rule string) {
	const broken = "is not a valid RateLimitRequest message"
	var path string
	walkStrings(b, func(num protowire.Number, s []byte) bool {
		if num == fieldDomain && !utf8.Valid(s) {
			path = "domain"
			return false
		}
		return true
	}, func(num protowire.Number, i int, m []byte) bool {
		if num != fieldDescriptors {
			return true
		}
		j := 0
		return walkStrings(m, nil, func(num protowire.Number, _ int, e []byte) bool {
			if num != fieldEntries {
				return true
			}
			at := "descriptors[" + strconv.Itoa(i) + "].entries[" + strconv.Itoa(j) + "]"
			j++
			return walkStrings(e, func(num protowire.Number, s []byte) bool {
				switch {
				case num == fieldKey && !utf8.Valid(s):
					path = at + ".key"
				case num == fieldValue && !utf8.Valid(s):
					path = at + ".value"
				default:
					return true
				}
				return false
			}, nil)
		})
	})
	if path != "" {
		return path, "must be valid UTF-8"
	}
	return "request", broken
}

// walkStrings walks the length-delimited fields of the message b: str is
// called for those whose numbers it is interested in as strings, msg for
// each with a per-number index; either returning false stops the walk.
// walkStrings returns false if the walk stopped or b is malformed.
func walkStrings(b []byte, str func(protowire.Number, []byte) bool, msg func(protowire.Number, int, []byte) bool) bool {
	counts := map[protowire.Number]int{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return false
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if str != nil && !str(num, v) {
			return false
		}
		if msg != nil {
			i := counts[num]
			counts[num] = i + 1
			if !msg(num, i, v) {
				return false
			}
		}
	}
	return true
}
