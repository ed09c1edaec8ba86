// CheckEach's batch of independent checks: its requests are sorted by
// shard, and each shard's run is served as one batch of the shard, on the
// caller's goroutine when the shard is free (serveDirect), else queued for
// the owner in one push; the caller then waits for the runs it queued. One
// shard is held at a time, so a CheckEach never waits for two shards at
// once, and no shard waits for another's.

package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ratelimitd/ratelimitd/table"
)

// eachStack is how many requests a CheckEach sorts and tracks without
// allocating: a pipelined read of a client is usually shorter.
const eachStack = 64

// CheckEach decides a batch of independent checks in one pass: each
// request is counted on its own, as Check would count it, and decs[i] is
// the decision of reqs[i]. The requests of one shard are decided together,
// in the order of reqs, as one batch of that shard (one reading of the
// clock, one journal record), so a request sees the hits of the requests
// of its bucket before it; requests of different shards share nothing and
// are decided in any order. It takes any number of requests; len(decs)
// must be len(reqs), or CheckEach panics.
//
// A nil error means every request was decided. Otherwise the error is an
// errors.Join of one *table.IndexError per request that was not, in the
// order of reqs, wrapping why: a *table.FieldError (matching
// table.ErrInvalid) for an invalid request, which is not counted;
// ErrStopped; ctx.Err() for a request whose ctx ended before its shard
// took it, which is not counted; ErrUnavailable (ErrJournal included) as
// Check returns it. The other requests are decided, their decisions in
// decs; decs[i] of a failed request is left as it was. errors.Is matches
// the joined error against each of its causes.
func (s *System) CheckEach(ctx context.Context, reqs []table.Request, decs []table.Decision) error {
	if len(decs) != len(reqs) {
		panic(fmt.Sprintf("actors: CheckEach: %d decisions for %d requests", len(decs), len(reqs)))
	}
	if len(reqs) == 1 && s.cl == nil {
		// One request (a client's command that came alone) is decided as
		// Check decides it, without a call from the pool, the sorting or
		// the batch.
		var r table.Reservation
		if err := s.reserve(ctx, &reqs[0], &r); err != nil {
			return errors.Join(&table.IndexError{Index: 0, Err: err})
		}
		decs[0] = r.Decision
		return nil
	}
	var failed []error // of *table.IndexError
	fail := func(i int, err error) { failed = append(failed, &table.IndexError{Index: i, Err: err}) }
	// order holds shard<<32 | index of each valid request: sorted, it lists
	// them shard by shard, each shard's in their order.
	var orderBuf [eachStack]uint64
	order := orderBuf[:0]
	for i := range reqs {
		if err := reqs[i].Validate(); err != nil {
			fail(i, err)
			continue
		}
		order = append(order, uint64(s.shardIndexOf(reqs[i].ID))<<32|uint64(i))
	}
	if err := ctx.Err(); err != nil {
		for _, e := range order {
			fail(int(uint32(e)), err)
		}
		order = order[:0]
	}
	switch {
	case len(order) == 0:
	case s.cl != nil:
		s.checkEachRouted(ctx, order, reqs, decs, fail)
	default:
		s.checkEach(ctx, order, reqs, decs, fail)
	}
	if len(failed) == 0 {
		return nil
	}
	slices.SortFunc(failed, func(a, b error) int {
		return cmp.Compare(a.(*table.IndexError).Index, b.(*table.IndexError).Index)
	})
	return errors.Join(failed...)
}

// checkEachRouted decides the valid requests listed by order one by one,
// in the order of reqs, each routed to its vshard's owner as Check routes
// it: in cluster mode a shard of this member may hold vshards it no longer
// owns, so its batches cannot be served here unfenced.
func (s *System) checkEachRouted(ctx context.Context, order []uint64, reqs []table.Request, decs []table.Decision, fail func(int, error)) {
	for _, e := range order {
		i := int(uint32(e))
		c, err := s.call(ctx, opCheck, reqs[i])
		if err != nil {
			fail(i, err)
			continue
		}
		decs[i] = c.res.Decision
		s.release(c)
	}
}

// checkEach serves the valid requests listed by order (see CheckEach) and
// reports each one that fails.
func (s *System) checkEach(ctx context.Context, order []uint64, reqs []table.Request, decs []table.Decision, fail func(int, error)) {
	slices.Sort(order)
	var callBuf [eachStack]*call
	calls := callBuf[:0]
	for _, e := range order {
		c := s.calls.Get().(*call)
		c.op, c.req = opCheck, reqs[uint32(e)]
		calls = append(calls, c)
	}
	for start := 0; start < len(order); {
		end := start + 1
		for end < len(order) && order[end]>>32 == order[start]>>32 {
			end++
		}
		sh, run := s.shards[order[start]>>32], calls[start:end]
		served, err := s.serveDirect(ctx, sh, run...)
		if err == nil && !served {
			err = s.submit(sh, run...)
		}
		if err != nil {
			for k, c := range run {
				fail(int(uint32(order[start+k])), err)
				s.release(c)
				run[k] = nil
			}
		}
		start = end
	}
	// The runs queued are answered by their owners meanwhile; collect them.
	for k, c := range calls {
		if c == nil {
			continue
		}
		i := int(uint32(order[k]))
		if !c.direct {
			s.wait(ctx, c)
			if c.state.Load() == stateCancelled {
				fail(i, ctx.Err()) // a server may still look at c: it is not reused
				continue
			}
		}
		if c.err != nil {
			fail(i, c.err)
		} else {
			decs[i] = c.res.Decision
		}
		s.release(c)
	}
	clear(calls)
}
