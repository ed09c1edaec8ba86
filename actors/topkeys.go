// Top keys (Config.TopKeys): each shard keeps a topk.Sketch beside its
// table, made with the shard and again when a crash rebuilds it, and fed
// wherever the shard's checks are decided (serve, decideAll), holding
// sh.mu like the table. Top merges the shards' sketches: each read under
// its shard's lock, the ranking made after.

package actors

import (
	"fmt"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/topk"
	"github.com/ratelimitd/ratelimitd/table"
)

// TopKeys is a ranking of ids by hits or by denials over a window (see
// System.Top), and how far its counts can be trusted.
type TopKeys struct {
	Total uint64       // every hit (topk.Hits) or every denied hit (topk.Denials) counted in the window
	Bound uint64       // the most by which any Count exceeds the truth
	Keys  []topk.Entry // heaviest first
}

// topKeysCounters is how many counters each summary holds, all shards
// together: a shard's share, kept within [minTopKeysCapacity,
// topk.DefaultCapacity]. Ids are hashed to shards, so a Count's error is
// its own shard's, at most that shard's total over its capacity: more
// shards, each seeing less, need fewer counters each for the same bound.
const (
	topKeysCounters    = 256
	minTopKeysCapacity = 8
)

// topKeysFront is the size of a shard sketch's front (topk.Config.Front)
// per counter of a summary: the ids a shard saw last, counted there until
// they leave, so that a repeated id costs a probe of one set of the front.
const topKeysFront = 16

// topKeysCapacity is the topk.Config.Capacity of each of shards sketches.
func topKeysCapacity(shards int) int {
	return min(max((topKeysCounters+shards-1)/shards, minTopKeysCapacity), topk.DefaultCapacity)
}

// newSketch returns an empty sketch for a shard of cfg.
func newSketch(cfg *Config) *topk.Sketch {
	c := topKeysCapacity(cfg.Shards)
	sk, err := topk.New(topk.Config{Capacity: c, Front: topKeysFront * c})
	if err != nil {
		panic(fmt.Sprintf("actors: top keys: %v", err)) // the capacity is within topk's range
	}
	return sk
}

// observe counts the check req, decided d at now, in the shard's top keys,
// holding sh.mu; hash is idHash(req.ID), or 0 for a call made without it
// (the hash is then computed here, only if the sketch's front does not hold
// the id, the one case that needs it), and tag the table's hash of the id
// (table.Hash: seeded, and computed for the check anyway), which the
// sketch's front knows the id by. A check by rule is labelled with the
// rule's name (req.Namespace), an ad-hoc one with its policy. Its hits
// count as denied when its own limit denied them: not when the table was
// full (d.Full, a shortage of room, not the id's doing), nor, in a
// CheckAll, when another check of the batch was the one denied.
func (sh *shard) observe(hash, tag uint64, req *table.Request, d *table.Decision, now time.Time) {
	if req.Hits <= 0 {
		return // a peek counts nothing
	}
	label := req.Namespace
	if label == "" {
		label = sh.labels.of(&req.Policy)
	}
	denied := !d.Allowed && !d.Full
	if sh.top.ObserveFront(tag, label, req.Hits, denied, now) {
		return // most repeats: the id's key is in the front
	}
	if hash == 0 {
		hash = idHash(req.ID)
	}
	sh.top.ObserveHashed(hash, tag, req.ID, label, req.Hits, denied, now)
}

// maxPolicyLabels bounds the labels a shard keeps; past it they are all
// dropped and made again as needed.
const maxPolicyLabels = 1024

// policyLabels names the ad-hoc policies of a shard's checks for its top
// keys: Policy.String allocates, so each policy's text is made once and
// kept (the sketch keeps labels by reference), the last one looked up
// without a map lookup, as most checks of a shard share a few policies.
type policyLabels struct {
	last  table.Policy
	text  string // of last; "" before the first lookup
	known map[table.Policy]string
}

// of returns the label of p.
func (l *policyLabels) of(p *table.Policy) string {
	// Field by field: the struct's == is a call to memequal.
	if p.Scale == l.last.Scale && p.Limit == l.last.Limit && p.Algorithm == l.last.Algorithm && p.Burst == l.last.Burst && l.text != "" {
		return l.text
	}
	s, ok := l.known[*p]
	if !ok {
		if l.known == nil || len(l.known) >= maxPolicyLabels {
			l.known = make(map[table.Policy]string)
		}
		s = p.String()
		l.known[*p] = s
	}
	l.last, l.text = *p, s
	return s
}

// views recycles the topk.Views of Top, so that merging a shard's sketch
// under its lock does not grow one.
var views = sync.Pool{New: func() any { return new(topk.View) }}

// Top returns at most n ids (every candidate when n < 0), heaviest first,
// ranked by m over the window w ending at now, with the label each was
// checked under: a rule's name, or an ad-hoc policy in its text form
// (table.Policy.String). It needs Config.TopKeys (else ErrNoTopKeys).
//
// Every check of hits > 0 counts its hits by topk.Hits, admitted or not;
// by topk.Denials only the hits its own limit denied, not those refused
// for a full table (Stats.Rejections counts those) nor those of a
// CheckAll refused for another of its checks. Refunds, resets and peeks
// count nothing. Counts are topk's: at least the truth and at most Bound
// above it; an id longer than topk.IDBytes is shown by its first bytes.
// A shard that crashes starts its counts afresh.
//
// Each shard's sketch is read holding the shard, as briefly as a small
// batch; the ranking is made after. The sketches take fixed memory: at
// most 414,328 bytes per shard (topk.DefaultCapacity counters and a front
// of 512 ids), less above 8 shards (256 counters per summary in all, at
// least 8 per shard: 112,120 bytes). On the check path an id in its
// shard's front costs a look at one 64-byte set of it, one new to it the
// move of that set's lightest id into the summaries; neither allocates.
func (s *System) Top(m topk.Metric, w topk.Window, n int, now time.Time) (TopKeys, error) {
	if !s.cfg.TopKeys {
		return TopKeys{}, ErrNoTopKeys
	}
	v := views.Get().(*topk.View)
	defer views.Put(v)
	v.Reset()
	v.Metric, v.Window, v.Partitioned = m, w, true // an id has one shard
	for _, sh := range s.shards {
		sh.mu.Lock()
		v.Merge(sh.top, now)
		sh.mu.Unlock()
	}
	return TopKeys{Total: v.Total(), Bound: v.Bound(), Keys: v.Top(n)}, nil
}
