// Top keys (Config.TopKeys): each shard keeps a topk.Sketch beside its
// table, made with the shard and again when a crash rebuilds it, and fed
// wherever the shard's checks are decided (serve, decideAll), holding
// sh.mu like the table. Top merges the shards' sketches: each read under
// its shard's lock, the ranking made after.

package actors

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/actors/topk"
	"github.com/ratelimitd/ratelimitd/table"
)

// TopKeys is a ranking of ids by hits or by denials over a window (see
// System.Top), and how far its counts can be trusted.
type TopKeys struct {
	Total uint64       // every hit (topk.Hits) or every denied hit (topk.Denials) counted in the window
	Bound uint64       // the most by which any Count exceeds the truth (when Sampled, the sampled weight)
	Keys  []topk.Entry // heaviest first
	// Sample is Config.TopKeysSample; Sampled, in a ranking by
	// topk.Hits, says whether a shard sampled its admitted checks in the
	// window (they came faster than TopKeysSampleAbove a second): if so,
	// Total and the counts are estimates, each admitted check picked
	// having counted Sample times (see topk.Sampler for their error). By
	// topk.Denials nothing is sampled.
	Sample  int
	Sampled bool
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

// DefaultTopKeysSample is Config.TopKeysSample when it is 0: under load,
// one admitted check in 32 is observed. Measured in alternating rounds at
// 1k keys (BenchmarkCheck/system+topkeys, millions of checks a second per
// shard), observing every check costs 11–15% of the checks/s without top
// keys; one in 32, 2–4%; one in 1024, about 1%, the cost of the choice.
const DefaultTopKeysSample = 32

// TopKeysSampleAbove is the rate of admitted checks, per second and per
// shard, above which a shard samples them for its top keys (see
// Config.TopKeysSample): below it, observing each costs the shard at most
// a few milliseconds of CPU a second (a few tens of nanoseconds each).
const TopKeysSampleAbove = 1 << 16

// newSampler returns the sampler of a shard of cfg, seeded at random.
func newSampler(cfg *Config) topk.Sampler {
	sm, err := topk.NewSampler(topk.SampleConfig{Rate: cfg.TopKeysSample, Above: TopKeysSampleAbove, Seed: rand.Uint64()})
	if err != nil {
		panic(fmt.Sprintf("actors: top keys: %v", err)) // withDefaults keeps the rate in topk's range
	}
	return sm
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
// CheckAll, when another check of the batch was the one denied. A check
// not denied is observed only if the shard's sampler picks it, with the
// weight it gives (Config.TopKeysSample).
func (sh *shard) observe(hash, tag uint64, req *table.Request, d *table.Decision, now time.Time) {
	hits := req.Hits
	if hits <= 0 {
		return // a peek counts nothing
	}
	// A caller that asked skips first and was told false asks again here
	// at no cost: the sampler's count stays 0 until Weigh.
	if sh.skips(req, d) {
		return
	}
	denied := !d.Allowed && !d.Full
	if !denied {
		hits = sh.sample.Weigh(hits, now)
	}
	label := req.Namespace
	if label == "" {
		label = sh.labels.of(&req.Policy)
	}
	if sh.top.ObserveFront(tag, label, hits, denied, now) {
		return // most repeats: the id's key is in the front
	}
	if hash == 0 {
		hash = idHash(req.ID)
	}
	sh.top.ObserveHashed(hash, tag, req.ID, label, hits, denied, now)
}

// skips reports whether observe would count nothing of req, decided d,
// for its sampler skips it (an admitted check of hits > 0), having
// counted it as skipped: a caller that asks first saves observe's call
// for most admitted checks.
func (sh *shard) skips(req *table.Request, d *table.Decision) bool {
	return req.Hits > 0 && (d.Allowed || d.Full) && sh.sample.Skip()
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
// above it, but for the hits of the admitted checks when they are sampled
// (TopKeys.Sampled), whose counts are estimates; an id longer than
// topk.IDBytes is shown by its first bytes.
// A shard that crashes starts its counts afresh.
//
// Each shard's sketch is read holding the shard, as briefly as a small
// batch; the ranking is made after. The sketches take fixed memory: at
// most 414,328 bytes per shard (topk.DefaultCapacity counters and a front
// of 512 ids), less above 8 shards (256 counters per summary in all, at
// least 8 per shard: 112,120 bytes). On the check path an admitted check
// the sampler skips costs a decrement; an observed one, of an id in its
// shard's front, a look at one 64-byte set of it, one new to it the move
// of that set's lightest id into the summaries; none allocates.
func (s *System) Top(m topk.Metric, w topk.Window, n int, now time.Time) (TopKeys, error) {
	if !s.cfg.TopKeys {
		return TopKeys{}, ErrNoTopKeys
	}
	v := views.Get().(*topk.View)
	defer views.Put(v)
	v.Reset()
	v.Metric, v.Window, v.Partitioned = m, w, true // an id has one shard
	since := now.Add(-time.Minute)
	if w == topk.FifteenMinutes {
		since = now.Add(-15 * time.Minute)
	}
	sampled := false
	for _, sh := range s.shards {
		sh.mu.Lock()
		v.Merge(sh.top, now)
		sampled = sampled || (m == topk.Hits && sh.sample.Sampled(since))
		sh.mu.Unlock()
	}
	return TopKeys{Total: v.Total(), Bound: v.Bound(), Keys: v.Top(n), Sample: s.cfg.TopKeysSample, Sampled: sampled}, nil
}
