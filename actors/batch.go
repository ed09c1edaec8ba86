// CheckAll's batch across shards: it holds every shard of its requests at
// once (each shard's sh.mu, taken in ascending order), decides them all and
// keeps the changes only if every request is admitted. It runs on the
// caller's goroutine, like a caller serving itself, and touches a shard
// only while it holds that shard's lock.

package actors

import (
	"context"

	"github.com/ratelimitd/ratelimitd/table"
)

// hold locks every shard of held, in ascending order. If the System is
// stopping, it locks none and returns ErrStopped.
func (s *System) hold(held []*shard) error {
	for i, sh := range held {
		sh.acquire(context.Background()) // a batch waits for every shard
		if sh.stopped {
			for _, h := range held[:i+1] {
				h.mu.Unlock()
			}
			return ErrStopped
		}
	}
	return nil
}

// decideAll decides the requests of a batch on the shards held, which it
// releases, and journals what was kept; tags[i] is the hash of reqs[i].ID
// in its shard's table (Table.Hash). See CheckAll.
//
// With wins (cluster mode), each check's Reservation.Window goes there.
func (s *System) decideAll(held []*shard, order, tags []uint64, reqs []table.Request, decs []table.Decision, wins []int64) (allowed bool, err error) {
	now := s.cfg.Clock.Now()
	allowed = true
	// Where the batch is, for a panic to be handled: held[cur] is being
	// worked on (and is the one repaired); before it, tables were begun
	// (phase 0) or their units ended (phase 1); from released on, shards
	// are still held.
	cur, phase, released := 0, 0, 0
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		for i := released; i < len(held); i++ {
			sh := held[i]
			switch {
			case i == cur:
				sh.repair(&s.cfg, r, len(reqs))
			case phase == 0 && i < cur:
				sh.table.Rollback()
			case phase == 1 && i > cur:
				// The outcome is decided: the other shards get it too.
				if allowed {
					sh.table.Commit()
				} else {
					sh.table.Rollback()
				}
			}
			sh.mu.Unlock()
		}
		allowed, err = false, ErrUnavailable
	}()
	var takenBuf [allStack]int
	taken := takenBuf[:0] // requests per shard
	if len(held) > allStack {
		taken = make([]int, 0, len(held))
	}
	taken = taken[:len(held)]
	next := 0
	for ; cur < len(held); cur++ {
		sh := held[cur]
		if sh.broken != nil && !now.Before(sh.retryAt) {
			sh.reopen(&s.cfg, now)
		}
		t := sh.table
		t.Begin()
		for ; next < len(order) && s.shards[order[next]>>32] == sh; next++ {
			i := uint32(order[next])
			if s.cfg.applyHook != nil {
				s.cfg.applyHook(reqs[i])
			}
			tag := tags[i]
			if wins != nil {
				var r table.Reservation
				t.ReserveHashedTo(&r, &reqs[i], tag, now)
				decs[i], wins[i] = r.Decision, r.Window
			} else {
				t.ApplyHashedTo(&decs[i], &reqs[i], tag, now)
			}
			if sh.top != nil {
				sh.observe(0, tag, &reqs[i], &decs[i], now) // idHash only if the front misses
			}
			allowed = allowed && decs[i].Allowed
			taken[cur]++
		}
	}
	for cur, phase = 0, 1; cur < len(held); cur++ {
		if allowed {
			held[cur].table.Commit()
		} else {
			held[cur].table.Rollback()
		}
	}
	if allowed {
		for _, e := range order {
			if sh := s.shards[e>>32]; sh.broken != nil {
				sh.keepUnjournaled(&call{op: opCheck, req: reqs[uint32(e)]}, now)
			}
		}
	}
	for cur, phase = 0, 2; cur < len(held); cur++ {
		sh := held[cur]
		if ferr := sh.finish(&s.cfg, taken[cur]); ferr != nil && err == nil {
			err = ferr
		}
		released++
		sh.mu.Unlock()
	}
	return allowed, err
}
