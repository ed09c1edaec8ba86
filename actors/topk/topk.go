package topk

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"time"
	"unsafe"
)

// Window is the span of time a View covers.
type Window uint8

// The windows.
const (
	// Minute covers the last minute: the current 20-second interval and
	// the two before it, so between 40 and 60 seconds of the past.
	Minute Window = iota
	// FifteenMinutes covers the last 15 minutes: the current 20-second
	// interval and the 44 before it, so between 14m40s and 15m of the past.
	FifteenMinutes
)

// String returns the wire name of w: "1m" or "15m".
func (w Window) String() string {
	switch w {
	case Minute:
		return "1m"
	case FifteenMinutes:
		return "15m"
	}
	return fmt.Sprintf("window(%d)", uint8(w))
}

// Metric is what a View ranks ids by.
type Metric uint8

// The metrics.
const (
	// Hits ranks ids by the hits they asked for, admitted or not.
	Hits Metric = iota
	// Denials ranks ids by the hits they were denied.
	Denials
)

// String returns the wire name of m: "hits" or "denials".
func (m Metric) String() string {
	switch m {
	case Hits:
		return "hits"
	case Denials:
		return "denials"
	}
	return fmt.Sprintf("metric(%d)", uint8(m))
}

// The ring of intervals, and how many of them each window reads.
const (
	width         = 20 * time.Second
	slots         = int64(15 * time.Minute / width)
	minuteSlots   = int64(time.Minute / width)
	quarterSlots  = slots
	summaryBlocks = 2 * int(slots) // a summary per metric per interval
)

// DefaultCapacity is Config.Capacity when it is 0.
const DefaultCapacity = 32

// MaxCapacity is the largest Config.Capacity.
const MaxCapacity = 4096

// ErrConfig is matched (errors.Is) by the error New returns for a Config
// out of range.
var ErrConfig = errors.New("topk: invalid config")

// Config sizes a Sketch. The zero value is ready to use.
type Config struct {
	// Capacity is the number of counters of each summary (one per metric
	// per interval): 0 means DefaultCapacity; at most MaxCapacity. A View's
	// counts are at most Total/Capacity above the truth.
	Capacity int
	// Front, if positive, gives the Sketch a front of at least that many
	// keys (a power of two, at most MaxFront; 112 bytes each): the keys
	// observed last, each counted there until it leaves (see the package
	// documentation). It makes repeated ids cheaper to observe and leaves
	// every guarantee as it is; 0 means none.
	Front int
}

// interval is one interval of the ring: a summary per metric.
type interval struct {
	stamp         int64 // the interval's number, floor(unix ns / width); noStamp when unused
	hits, denials summary
}

const noStamp = math.MinInt64

// Sketch tracks the heaviest ids, by hits and by denials, over the last
// minute and the last 15 minutes, in memory fixed at New whatever the
// number of ids (see Bytes). It is not safe for concurrent use and needs no
// lock of its own: it is meant to live in a shard and be called while the
// shard's lock is held, like the shard's table.
type Sketch struct {
	capacity int
	// The ring: interval number i in ivs[i mod slots].
	ivs    [slots]interval
	latest int64     // the newest interval number written to
	until  int64     // Unix ns at which interval latest ends
	cur    *interval // interval latest
	// One allocation each for every summary's counters, entries, index
	// and marks.
	counts []uint64
	ents   []entry
	index  []uint64
	atMin  []uint64
	// The front (Config.Front): its sets, and the keys of their ways
	// (set i's in frontKeys[i*frontWays:]); frontSets is the number of
	// sets less one (see frontSetOf).
	front     []frontSet
	frontKeys []frontKey
	frontSets int
	// seed makes Observe's tags (see ObserveHashed) and the labels'
	// part of them; lastMix is lastLabel's (labelMix), once mixed is set.
	seed      maphash.Seed
	lastLabel string
	lastMix   uint64
	mixed     bool
}

// New returns an empty Sketch; the error, for a Config out of range,
// matches ErrConfig.
func New(cfg Config) (*Sketch, error) {
	k := cfg.Capacity
	switch {
	case k == 0:
		k = DefaultCapacity
	case k < 0 || k > MaxCapacity:
		return nil, fmt.Errorf("%w: Capacity %d is not in [1, %d]", ErrConfig, cfg.Capacity, MaxCapacity)
	}
	if cfg.Front < 0 || cfg.Front > MaxFront {
		return nil, fmt.Errorf("%w: Front %d is not in [0, %d]", ErrConfig, cfg.Front, MaxFront)
	}
	ix, words := indexSize(k), (k+63)/64
	s := &Sketch{
		capacity: k,
		latest:   noStamp,
		seed:     maphash.MakeSeed(),
		until:    math.MinInt64,
		counts:   make([]uint64, summaryBlocks*k),
		ents:     make([]entry, summaryBlocks*k),
		index:    make([]uint64, summaryBlocks*ix),
		atMin:    make([]uint64, summaryBlocks*words),
	}
	if cfg.Front > 0 {
		size := frontSize(cfg.Front)
		s.front = make([]frontSet, size/frontWays)
		s.frontKeys = make([]frontKey, size)
		s.frontSets = size/frontWays - 1
	}
	n := 0
	for i := range s.ivs {
		iv := &s.ivs[i]
		iv.stamp = noStamp
		for _, sm := range []*summary{&iv.hits, &iv.denials} {
			sm.counts = s.counts[n*k : (n+1)*k : (n+1)*k]
			sm.ents = s.ents[n*k : (n+1)*k : (n+1)*k]
			sm.index = s.index[n*ix : (n+1)*ix : (n+1)*ix]
			sm.atMin = s.atMin[n*words : (n+1)*words : (n+1)*words]
			n++
		}
	}
	return s, nil
}

// indexSize returns the slots of a summary's index: a power of two at
// least twice the counters, so probes stay short.
func indexSize(k int) int {
	n := 1
	for n < 2*k {
		n <<= 1
	}
	return n
}

// Capacity returns the counters of each summary.
func (s *Sketch) Capacity() int { return s.capacity }

// Bytes returns the memory a Sketch holds, fixed at New: the summaries'
// counters, entries and indexes, and the Sketch itself. Labels are the
// caller's strings, kept by reference, and not counted.
func (s *Sketch) Bytes() int {
	return int(unsafe.Sizeof(*s)) +
		len(s.counts)*int(unsafe.Sizeof(s.counts[0])) +
		len(s.ents)*int(unsafe.Sizeof(s.ents[0])) +
		len(s.index)*int(unsafe.Sizeof(s.index[0])) +
		len(s.atMin)*int(unsafe.Sizeof(s.atMin[0])) +
		s.frontBytes()
}

// Observe counts hits for the key (id, label) at now: all of them by Hits,
// and, if denied, all of them by Denials too. hits ≤ 0 (a peek) counts
// nothing. The label names the limit the id was checked under (a rule's
// name, a policy): the same id under two labels is two keys. The Sketch
// keeps label itself, not a copy, so it should be a string that lives on
// anyway (a rule's name); it copies at most IDBytes bytes of id.
//
// A key already tracked costs one hash of the id (two with a front: the
// tag, under a seed of the Sketch's) and, per summary, a probe and an
// addition; a new key also takes over the smallest counter (see the
// package documentation). Observe never allocates. A now earlier than one
// already seen counts in the latest interval, so a clock stepping back
// never reopens one.
func (s *Sketch) Observe(id, label string, hits int64, denied bool, now time.Time) {
	var tag uint64
	if s.front != nil {
		tag = maphash.String(s.seed, id)
	}
	s.ObserveHashed(Hash(id), tag, id, label, hits, denied, now)
}

// ObserveFront is the fast path of ObserveHashed, for a key the front
// holds: if hits > 0, now falls in the latest interval, label is the one
// observed last and the key of tag and label is in the front, it counts
// the observation there, as ObserveHashed would, and returns true; else it
// changes nothing and returns false, and the caller observes by
// ObserveHashed. So ObserveFront, then ObserveHashed if it declined, is
// ObserveHashed alone, made without reading the id or its hash: a caller
// that computes them only then saves that work on most repeats.
func (s *Sketch) ObserveFront(tag uint64, label string, hits int64, denied bool, now time.Time) bool {
	if hits <= 0 || s.front == nil || now.UnixNano() >= s.until || !s.mixed || !sameString(label, s.lastLabel) {
		return false
	}
	return s.frontHit(s.frontSetOf(tag), tag^s.lastMix, uint64(hits), denied)
}

// ObserveHashed is Observe for a caller that has hashed id already: hash
// must be Hash(id), which it saves computing again, and tag a seeded
// 64-bit hash of id (such as maphash under a seed of the caller's), by
// which the front tells keys apart without reading their ids. Ids under
// one tag are one key of the front, so tag must not be a hash that ids
// can be chosen to collide under; it need not stay the same for an id
// (two tags of one id are two keys of the front, which the summaries
// merge). Hash is not seeded, so ids made to collide can lengthen a
// probe of a summary, never beyond its index (twice its counters).
func (s *Sketch) ObserveHashed(hash, tag uint64, id, label string, hits int64, denied bool, now time.Time) {
	if hits <= 0 {
		return
	}
	iv := s.cur
	if ns := now.UnixNano(); ns >= s.until {
		iv = s.current(ns)
	}
	if s.front != nil {
		si := s.frontSetOf(tag)
		tag ^= s.labelMix(label)
		if s.frontHit(si, tag, uint64(hits), denied) {
			return // most repeats: one line read, no probe made
		}
		s.frontAdd(iv, &probe{hash: hash, id: id, label: label}, si, tag, uint64(hits), denied)
		return
	}
	s.summariesAdd(iv, &probe{hash: hash, id: id, label: label}, uint64(hits), denied)
}

// current returns the interval of now (or of the latest one written, if
// later), emptied first if it held an older one.
func (s *Sketch) current(ns int64) *interval {
	if ns < s.until {
		return s.cur // most calls: no division
	}
	s.flushFront() // the front's weights are the latest interval's
	i := floorDiv(ns, int64(width))
	s.latest = i
	s.until = math.MaxInt64
	if i < math.MaxInt64/int64(width) {
		s.until = (i + 1) * int64(width)
	}
	iv := &s.ivs[mod(i, slots)]
	if iv.stamp != i {
		iv.stamp = i
		iv.hits.reset()
		iv.denials.reset()
	}
	s.cur = iv
	return iv
}

// span returns how many intervals w covers.
func (w Window) span() int64 {
	if w == FifteenMinutes {
		return quarterSlots
	}
	return minuteSlots
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
