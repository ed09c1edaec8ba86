package rls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratelimitd/ratelimitd/table"
)

// Checker decides the checks of a Service. *actors.System is one; its
// methods must be safe for concurrent use (see actors.System for their
// contracts).
type Checker interface {
	// Check counts req against its limit and returns the decision.
	Check(ctx context.Context, req table.Request) (table.Decision, error)
	// CheckAll checks reqs all or nothing: allowed only if every one is
	// admitted, and then each is counted; otherwise nothing is consumed.
	CheckAll(ctx context.Context, reqs []table.Request) ([]table.Decision, bool, error)
	// Refund gives back up to req.Hits (≥ 1) hits to req's bucket and
	// returns the decision a peek gets afterwards.
	Refund(ctx context.Context, req table.Request) (table.Decision, error)
}

// Default names of the response headers Options.ResponseHeaders adds, as
// the reference's.
const (
	DefaultHeaderLimit     = "RateLimit-Limit"
	DefaultHeaderRemaining = "RateLimit-Remaining"
	DefaultHeaderReset     = "RateLimit-Reset"
)

// NearLimitRatio is the share of a limit past which hits count as near
// the limit in metrics, as the reference's default.
const NearLimitRatio = 0.8

// DefaultMaxMetricKeys is the default of Options.MaxMetricKeys.
const DefaultMaxMetricKeys = 10000

// OtherMetricKey is the metrics key reported for descriptor keys past
// Options.MaxMetricKeys.
const OtherMetricKey = "_other"

// Options configures a Service. The zero value is ready to use: the
// all-or-nothing counting, no global shadow mode, no response headers.
type Options struct {
	// CountOverLimit counts every hit of every limited fixed-window
	// descriptor, denied or not, as the reference does by default (see the
	// package documentation). False: a request over the limit consumes
	// nothing in any of its descriptors.
	CountOverLimit bool
	// ShadowMode answers every request OK overall, whatever its
	// descriptors' statuses say (the reference's SHADOW_MODE).
	ShadowMode bool
	// ResponseHeaders adds RateLimit-Limit, RateLimit-Remaining and
	// RateLimit-Reset to every answer that has a limited descriptor, from
	// the most restrictive one (the reference's LIMIT_RESPONSE_HEADERS_ENABLED).
	ResponseHeaders bool
	// HeaderLimit, HeaderRemaining and HeaderReset rename those headers;
	// empty means the defaults.
	HeaderLimit, HeaderRemaining, HeaderReset string
	// Observer, if set, is told about every call and every limited
	// descriptor; it must be safe for concurrent use and must not block.
	Observer Observer
	// MaxMetricKeys bounds the distinct (domain, key) pairs reported to
	// Observer; later ones are reported as OtherMetricKey. 0 means
	// DefaultMaxMetricKeys.
	MaxMetricKeys int
	// Clock gives the time of the answers that no decision carries (the
	// window's end for a check the table refused as full); nil means
	// time.Now. Tests pass the Checker's clock.
	Clock func() time.Time
	// Logger receives unexpected Checker errors; nil discards them.
	Logger *slog.Logger
}

// Service answers Envoy's ShouldRateLimit from a Store's config, counting
// on a Checker. It implements rlsv3.RateLimitServiceServer and is safe for
// concurrent use.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer
	checker Checker
	store   *Store
	opts    Options
	keys    metricKeys
}

var _ rlsv3.RateLimitServiceServer = (*Service)(nil)

// NewService returns a Service answering from store (whose config may
// change at any time) and counting on c.
func NewService(c Checker, store *Store, opts Options) (*Service, error) {
	switch {
	case c == nil:
		return nil, fmt.Errorf("%w: Checker is nil", ErrOption)
	case store == nil:
		return nil, fmt.Errorf("%w: Store is nil", ErrOption)
	case opts.MaxMetricKeys < 0:
		return nil, fmt.Errorf("%w: MaxMetricKeys %d is negative", ErrOption, opts.MaxMetricKeys)
	}
	if opts.HeaderLimit == "" {
		opts.HeaderLimit = DefaultHeaderLimit
	}
	if opts.HeaderRemaining == "" {
		opts.HeaderRemaining = DefaultHeaderRemaining
	}
	if opts.HeaderReset == "" {
		opts.HeaderReset = DefaultHeaderReset
	}
	if opts.MaxMetricKeys == 0 {
		opts.MaxMetricKeys = DefaultMaxMetricKeys
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{checker: c, store: store, opts: opts, keys: metricKeys{max: int64(opts.MaxMetricKeys)}}, nil
}

// callError is a failed call: its gRPC code and message.
type callError struct {
	code  codes.Code
	field string // the request field at fault, for InvalidArgument
	msg   string
}

func (e *callError) Error() string { return e.msg }

// ShouldRateLimit answers req. A bad request is answered
// codes.InvalidArgument with a message naming the field; a Checker failure
// codes.Unavailable (or Canceled / DeadlineExceeded when ctx ended). No
// answer carries codes.Unknown or the UNKNOWN overall code.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	resp, cerr := s.serve(ctx, req, TransportGRPC)
	if cerr != nil {
		return nil, status.Error(cerr.code, cerr.msg)
	}
	return resp, nil
}

// serve answers req and tells the Observer about the call.
func (s *Service) serve(ctx context.Context, req *rlsv3.RateLimitRequest, transport string) (*rlsv3.RateLimitResponse, *callError) {
	o := s.opts.Observer
	var start time.Time
	if o != nil {
		start = time.Now()
	}
	resp, domain, shadowed, cerr := s.decide(ctx, req)
	if o != nil {
		ev := CallEvent{Domain: domain, Transport: transport, Latency: time.Since(start), GlobalShadow: shadowed}
		switch {
		case cerr != nil && cerr.code == codes.InvalidArgument:
			ev.Outcome = OutcomeInvalid
		case cerr != nil:
			ev.Outcome = OutcomeError
		case resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT:
			ev.Outcome = OutcomeOverLimit
		default:
			ev.Outcome = OutcomeOK
		}
		o.ObserveCall(ev)
	}
	return resp, cerr
}

// Kinds of request descriptor.
const (
	kindNone      = iota // no limit applies (unmatched, unknown domain, replaced)
	kindUnlimited        // an unlimited limit
	kindLimited          // a limit to count
)

// stackItems is the most descriptors whose bookkeeping a request keeps on
// the stack; a request of more allocates it.
const stackItems = 4

// item is one descriptor of a request on its way to an answer.
type item struct {
	m       match
	kind    int
	req     table.Request
	hits    int64 // the descriptor's hits (0: a peek)
	refund  bool  // is_negative_hits: give the hits back
	shadow  bool  // the limit's shadow_mode
	counted bool  // CountOverLimit counting: the policy's limit is MaxInt64
	lim     int64 // the limit answers are measured against
	d       table.Decision
	before  int64 // the count before this request's hits
	over    bool
	rem     int64 // limit_remaining
}

// decide answers req; domain is the request's domain if configured (else
// ""), shadowed reports an over-limit answer turned OK by the global shadow mode.
func (s *Service) decide(ctx context.Context, req *rlsv3.RateLimitRequest) (resp *rlsv3.RateLimitResponse, domain string, shadowed bool, cerr *callError) {
	if err := validate(req); err != nil {
		var fe *table.FieldError
		errors.As(err, &fe)
		return nil, "", false, &callError{code: codes.InvalidArgument, field: fe.Field, msg: fe.Error()}
	}
	cfg := s.store.Config()
	if cfg == nil {
		return nil, "", false, &callError{code: codes.Unavailable, msg: "no rate limit configuration loaded"}
	}
	if cfg.knows(req.Domain) {
		domain = req.Domain
	}
	var onStack [stackItems]item
	var items []item
	if n := len(req.Descriptors); n <= stackItems {
		items = onStack[:n]
	} else {
		items = make([]item, n)
	}
	var replaced map[string]bool
	for i, d := range req.Descriptors {
		items[i].m = cfg.match(req.Domain, d)
		if l := items[i].m.limit; l != nil && len(l.Replaces) > 0 {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			for _, r := range l.Replaces {
				replaced[r] = true
			}
		}
	}
	limited := 0
	for i, d := range req.Descriptors {
		it := &items[i]
		l := it.m.limit
		switch {
		case l == nil:
			continue
		case l.Unlimited:
			it.kind = kindUnlimited
			continue
		case l.Name != "" && replaced[l.Name]:
			continue
		}
		it.kind = kindLimited
		limited++
		if d.HitsAddend != nil {
			it.hits = int64(d.HitsAddend.Value) // validate bounds it by MaxInt64
		} else {
			it.hits = max(1, int64(req.HitsAddend))
		}
		it.refund = d.IsNegativeHits && it.hits > 0
		it.shadow = l.ShadowMode
		it.lim = int64(l.RequestsPerUnit)
		it.counted = s.opts.CountOverLimit && l.Algorithm == table.FixedWindow
		it.req = table.Request{
			ID:        bucketID(req.Domain, d, it.m.shared),
			Policy:    table.Policy{Algorithm: l.Algorithm, Scale: l.Scale(), Limit: it.lim, Burst: l.Burst},
			Hits:      it.hits,
			Namespace: Namespace,
		}
		if it.counted {
			it.req.Limit = math.MaxInt64
		}
	}
	if limited > 0 {
		var err error
		if s.opts.CountOverLimit {
			err = s.countAll(ctx, items)
		} else {
			err = s.countStrict(ctx, items)
		}
		if err != nil {
			return nil, domain, false, s.checkerError(err)
		}
	}
	resp, shadowed = s.answer(req, items)
	s.observe(domain, items)
	return resp, domain, shadowed, nil
}

// checkerError maps a Checker error to the call's error.
func (s *Service) checkerError(err error) *callError {
	var fe *table.FieldError
	switch {
	case errors.As(err, &fe):
		return &callError{code: codes.InvalidArgument, field: fe.Field, msg: fe.Error()}
	case errors.Is(err, context.Canceled):
		return &callError{code: codes.Canceled, msg: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return &callError{code: codes.DeadlineExceeded, msg: err.Error()}
	}
	s.opts.Logger.Error("rls: rate limiter failed", "err", err)
	return &callError{code: codes.Unavailable, msg: "rate limiter unavailable: " + err.Error()}
}

// setOwn records d, the decision of it's own check: consumed iff allowed.
func (it *item) setOwn(d table.Decision) {
	it.d = d
	if d.Allowed {
		it.before, it.rem = d.Count-it.hits, d.Remaining
		return
	}
	it.before, it.over = d.Count, true
}

// setHeld records d, a decision that admitted it's hits, in a batch that
// was denied: nothing was consumed, so what remains is as before.
func (it *item) setHeld(d table.Decision) {
	it.d = d
	it.before = d.Count - it.hits
	it.rem = min(d.Limit, d.Remaining+it.hits)
}

// setPeek records d, a peek (or the peek after a refund): over only if
// the count already exceeds the limit, as the reference answers a peek.
func (it *item) setPeek(d table.Decision) {
	it.d = d
	it.before = d.Count
	if d.Full || d.Count > it.limit(d) {
		it.over = true
		return
	}
	it.rem = max(it.limit(d)-d.Count, 0)
}

// setPeeked records d, a peek standing in for it's hits in a request
// that is over the limit anyway: over if they would not fit.
func (it *item) setPeeked(d table.Decision) {
	it.d = d
	it.before = d.Count
	if d.Full || it.hits > d.Remaining {
		it.over = true
		return
	}
	it.rem = d.Remaining
}

// setCounted records d, the decision of a CountOverLimit check (limit
// MaxInt64): over iff the count after it exceeds the real limit; consumed
// reports whether the batch kept its hits.
func (it *item) setCounted(d table.Decision) {
	it.d = d
	if !d.Allowed {
		it.before, it.over = d.Count, true
		return
	}
	it.before = d.Count - it.hits
	if d.Count > it.lim {
		it.over = true
		return
	}
	it.rem = it.lim - d.Count
}

// limit is the limit d is measured against: the configured limit for a
// CountOverLimit policy, the table's otherwise (a bucket size for the
// token and leaky buckets).
func (it *item) limit(d table.Decision) int64 {
	if it.counted {
		return it.lim
	}
	return d.Limit
}

// countStrict counts items all or nothing: the refunds and peeks first,
// then every non-shadow check in one CheckAll, consumed only if all fit
// (and no peek is over already); then each shadow check, consumed only if
// the request is not over and it fits.
func (s *Service) countStrict(ctx context.Context, items []item) error {
	peekOver := false
	var onStack [stackItems]int
	batch := onStack[:0]
	for i := range items {
		it := &items[i]
		if it.kind != kindLimited {
			continue
		}
		switch {
		case it.refund:
			d, err := s.checker.Refund(ctx, it.req)
			if err != nil {
				return err
			}
			it.setPeek(d)
		case it.hits == 0:
			d, err := s.checker.Check(ctx, it.req)
			if err != nil {
				return err
			}
			it.setPeek(d)
		case !it.shadow:
			batch = append(batch, i)
			continue
		default:
			continue
		}
		peekOver = peekOver || it.over && !it.shadow
	}
	requestOver := peekOver
	switch {
	case len(batch) == 0:
	case peekOver:
		for _, i := range batch {
			if err := s.peekFor(ctx, &items[i]); err != nil {
				return err
			}
		}
	case len(batch) == 1:
		it := &items[batch[0]]
		d, err := s.checker.Check(ctx, it.req)
		if err != nil {
			return err
		}
		it.setOwn(d)
		requestOver = !d.Allowed
	default:
		reqs := make([]table.Request, len(batch))
		for k, i := range batch {
			reqs[k] = items[i].req
		}
		decs, allowed, err := s.checker.CheckAll(ctx, reqs)
		if err != nil {
			return err
		}
		for k, i := range batch {
			switch it := &items[i]; {
			case allowed || !decs[k].Allowed:
				it.setOwn(decs[k])
			default:
				it.setHeld(decs[k])
			}
		}
		requestOver = !allowed
	}
	for i := range items {
		it := &items[i]
		if it.kind != kindLimited || !it.shadow || it.refund || it.hits == 0 {
			continue
		}
		if requestOver {
			if err := s.peekFor(ctx, it); err != nil {
				return err
			}
			continue
		}
		d, err := s.checker.Check(ctx, it.req)
		if err != nil {
			return err
		}
		it.setOwn(d)
	}
	return nil
}

// peekFor answers it by a peek, consuming nothing.
func (s *Service) peekFor(ctx context.Context, it *item) error {
	r := it.req
	r.Hits = 0
	d, err := s.checker.Check(ctx, r)
	if err != nil {
		return err
	}
	it.setPeeked(d)
	return nil
}

// countAll counts items as the reference does: every fixed-window check
// counted whether or not it is over (one CheckAll under a limit no count
// reaches, compared with the real limit here), every other check on its
// own, consumed iff it fits.
func (s *Service) countAll(ctx context.Context, items []item) error {
	var onStack [stackItems]int
	batch := onStack[:0]
	for i := range items {
		it := &items[i]
		if it.kind != kindLimited {
			continue
		}
		switch {
		case it.refund:
			d, err := s.checker.Refund(ctx, it.req)
			if err != nil {
				return err
			}
			it.setPeek(d)
		case it.counted:
			batch = append(batch, i)
		default:
			d, err := s.checker.Check(ctx, it.req)
			if err != nil {
				return err
			}
			if it.hits == 0 {
				it.setPeek(d)
			} else {
				it.setOwn(d)
			}
		}
	}
	switch len(batch) {
	case 0:
	case 1:
		it := &items[batch[0]]
		d, err := s.checker.Check(ctx, it.req)
		if err != nil {
			return err
		}
		it.setCounted(d)
	default:
		reqs := make([]table.Request, len(batch))
		for k, i := range batch {
			reqs[k] = items[i].req
		}
		decs, _, err := s.checker.CheckAll(ctx, reqs)
		if err != nil {
			return err
		}
		for k, i := range batch {
			items[i].setCounted(decs[k])
		}
	}
	return nil
}

// statusParts are the messages of one descriptor's status, allocated
// together.
type statusParts struct {
	st  rlsv3.RateLimitResponse_DescriptorStatus
	lim rlsv3.RateLimitResponse_RateLimit
	dur durationpb.Duration
	mul wrapperspb.UInt32Value
}

// oneAnswer is the answer to a request of one descriptor, allocated in
// one piece.
type oneAnswer struct {
	resp     rlsv3.RateLimitResponse
	statuses [1]*rlsv3.RateLimitResponse_DescriptorStatus
	parts    [1]statusParts
}

// newAnswer returns an empty response with n statuses, and the parts to
// fill them from (parts[i] for Statuses[i]): three allocations, one when
// n is 1.
func newAnswer(n int) (*rlsv3.RateLimitResponse, []statusParts) {
	if n == 1 {
		a := &oneAnswer{}
		a.resp.Statuses = a.statuses[:]
		return &a.resp, a.parts[:]
	}
	return &rlsv3.RateLimitResponse{Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)}, make([]statusParts, n)
}

// answer builds the response to req from its items; shadowed reports an
// over-limit answer turned OK by the global shadow mode.
func (s *Service) answer(req *rlsv3.RateLimitRequest, items []item) (*rlsv3.RateLimitResponse, bool) {
	resp, parts := newAnswer(len(items))
	resp.OverallCode = rlsv3.RateLimitResponse_OK
	var most *rlsv3.RateLimitResponse_DescriptorStatus // the most restrictive, for the headers
	minRem := uint32(math.MaxUint32)
	for i := range items {
		it, p := &items[i], &parts[i]
		st := &p.st
		resp.Statuses[i] = st
		st.Code = rlsv3.RateLimitResponse_OK
		switch it.kind {
		case kindNone:
			continue
		case kindUnlimited:
			st.LimitRemaining = math.MaxUint32
			continue
		}
		l := it.m.limit
		p.lim.Name, p.lim.RequestsPerUnit, p.lim.Unit = l.Name, l.RequestsPerUnit, l.Unit
		p.dur.Seconds = s.resetSeconds(it)
		st.CurrentLimit, st.DurationUntilReset = &p.lim, &p.dur
		if l.multiplierSet {
			p.mul.Value = l.UnitMultiplier
			st.CurrentLimit.UnitMultiplier = &p.mul
		}
		if !it.over {
			st.LimitRemaining = uint32(min(max(it.rem, 0), math.MaxUint32))
		}
		if st.LimitRemaining < minRem {
			most, minRem = st, st.LimitRemaining
		}
		if it.over && !it.shadow {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			most, minRem = st, 0
		}
		resp.Statuses[i] = st
	}
	if s.opts.ResponseHeaders && most != nil {
		resp.ResponseHeadersToAdd = []*corev3.HeaderValue{
			{Key: s.opts.HeaderLimit, Value: strconv.FormatUint(uint64(most.CurrentLimit.RequestsPerUnit), 10)},
			{Key: s.opts.HeaderRemaining, Value: strconv.FormatUint(uint64(most.LimitRemaining), 10)},
			{Key: s.opts.HeaderReset, Value: strconv.FormatInt(most.DurationUntilReset.Seconds, 10)},
		}
	}
	if s.opts.ShadowMode && resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		resp.OverallCode = rlsv3.RateLimitResponse_OK
		return resp, true
	}
	return resp, false
}

// resetSeconds is the duration_until_reset of it in whole seconds: the
// time to the window's end for a fixed window, as the reference answers;
// for the other algorithms the time until a denied request would be
// admitted (at least 1 s), or until the bucket is empty again.
func (s *Service) resetSeconds(it *item) int64 {
	d := it.d
	r := d.ResetAfter
	switch {
	case it.req.Algorithm == table.FixedWindow && (r <= 0 || d.Full):
		scale := it.req.Scale
		now := s.opts.Clock().UnixNano()
		r = scale - time.Duration(now%int64(scale))
	case it.req.Algorithm != table.FixedWindow && it.over:
		r = max(d.RetryAfter, time.Second)
	}
	return int64((r + time.Second - 1) / time.Second)
}

// observe tells the Observer about the limited descriptors of a request,
// with the reference's arithmetic of hits within, near and over the limit.
func (s *Service) observe(domain string, items []item) {
	o := s.opts.Observer
	if o == nil {
		return
	}
	for i := range items {
		it := &items[i]
		if it.kind != kindLimited || it.refund {
			continue
		}
		ev := LimitEvent{Domain: domain, Key: s.keys.key(domain, it.m.statsKey), Hits: uint64(it.hits)}
		lim := it.lim
		before := max(it.before, 0)
		after := before + it.hits
		near := int64(math.Floor(float64(float32(lim) * float32(NearLimitRatio))))
		if it.over {
			if before >= lim {
				ev.OverLimit = uint64(it.hits)
			} else {
				ev.OverLimit = uint64(after - lim)
				ev.NearLimit = uint64(lim - max(near, before))
			}
			if it.shadow {
				ev.ShadowMode = ev.OverLimit
			}
		} else {
			ev.WithinLimit = uint64(it.hits)
			if after > near {
				if before >= near {
					ev.NearLimit = uint64(it.hits)
				} else {
					ev.NearLimit = uint64(after - near)
				}
			}
		}
		o.ObserveLimit(ev)
	}
}

// metricKeys bounds the distinct (domain, key) pairs reported.
type metricKeys struct {
	max  int64
	n    atomic.Int64
	seen sync.Map // of [2]string
}

// key returns key, or OtherMetricKey once max other pairs have been seen.
func (m *metricKeys) key(domain, key string) string {
	k := [2]string{domain, key}
	if _, ok := m.seen.Load(k); ok {
		return key
	}
	if m.n.Add(1) > m.max {
		m.n.Add(-1)
		return OtherMetricKey
	}
	if _, loaded := m.seen.LoadOrStore(k, struct{}{}); loaded {
		m.n.Add(-1)
	}
	return key
}
