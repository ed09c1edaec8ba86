package dashboard

import "time"

// The dashboard reads its data through these small interfaces, so that it
// depends on no part of the rate limiter: the wiring backs them (with
// TrafficRing, with package actors/topk, with actors.System's counters).
// Every method must be safe for concurrent use and quick: it is called on
// every refresh of every open page, about once a second.

// Traffic is the live traffic series. *TrafficRing is one.
type Traffic interface {
	// AppendSeconds appends the counts of the SeriesSeconds whole seconds
	// before now's second, oldest first.
	AppendSeconds(dst []Second, now time.Time) []Second
}

// TopBy is what top keys are ranked by.
type TopBy string

// The rankings of GET /top?by=.
const (
	ByHits    TopBy = "hits"    // hits asked for, admitted or not
	ByDenials TopBy = "denials" // hits denied
)

// TopWindow is the span of time top keys are counted over.
type TopWindow string

// The windows of GET /top?window=.
const (
	Window1m  TopWindow = "1m"
	Window15m TopWindow = "15m"
)

// TopKeys ranks ids. The wiring backs it with package actors/topk: one
// Sketch per shard, merged on read.
type TopKeys interface {
	// Top returns at most n keys ranked by by over window, heaviest first.
	Top(by TopBy, window TopWindow, n int, now time.Time) TopList
}

// TopList is a ranking of keys and how far its counts can be trusted.
type TopList struct {
	Total uint64 // the weight counted in the window: every hit, or every denied hit
	Bound uint64 // the most by which any Count can exceed the truth (when Sampled: the sampled weight)
	Keys  []TopKey
	// Sample is the rate at which admitted checks are sampled under load,
	// and Sampled whether some in the window were: then Total and the
	// counts are estimates (never for denials).
	Sample  int
	Sampled bool
}

// TopKey is one id (under one rule or policy) of a TopList.
type TopKey struct {
	ID        string // the id, or its first bytes if Truncated
	Truncated bool   // the id was longer than the sketch keeps
	Label     string // the rule's name, or the ad-hoc policy, it was checked under
	Count     uint64 // at least the true count, at most Bound more
	Min       uint64 // at most the true count
}

// Rules reports each configured rule's traffic.
type Rules interface {
	// Rules returns every rule, in the order to show them.
	Rules(now time.Time) []RuleStats
}

// RuleStats is one rule's policy and rates (per second, over a recent span
// the provider chooses and names in Over).
type RuleStats struct {
	Name   string        // the rule's name
	Policy string        // its limit in table.Policy's text form, e.g. 100/1m0s/token_bucket
	Shadow bool          // a shadow rule counts and reports but never denies
	Over   time.Duration // the span the rates are measured over
	// ChecksPerSec counts every check of the rule; DeniedPerSec those it
	// denied; ShadowDeniedPerSec those a shadow rule would have denied.
	ChecksPerSec, DeniedPerSec, ShadowDeniedPerSec float64
}

// Health reports how the rate limiter itself is doing.
type Health interface {
	Health(now time.Time) HealthReport
}

// HealthReport is the health panel's data. Zero fields are shown as such;
// Journal and Cluster are nil when there is no journal (no data directory)
// or no cluster.
type HealthReport struct {
	Shards     int
	Buckets    int64 // live buckets, all shards
	MaxBuckets int64 // the cap on them (--max-buckets)
	// FullDenials counts checks denied because the table was full;
	// Evictions, buckets evicted to make room (evict-oldest).
	FullDenials, Evictions int64
	Restarts               int64 // shard owners restarted after a crash
	SweepRounds            int64
	SweepLast              time.Duration // how long the last sweep round took
	CheckP50, CheckP99     time.Duration // check latency
	Journal                *JournalHealth
	Cluster                *ClusterHealth
}

// JournalHealth is the journal part of a HealthReport.
type JournalHealth struct {
	SyncMode       string    // none, interval or always
	Bytes          int64     // on disk, segments and snapshots
	LastSnapshot   time.Time // zero: none written since start
	Snapshots      int64
	SnapshotErrors int64
	Errors         int64 // batches the journal failed to take or flush
	TornTails      int64 // torn tails cut at recovery
}

// ClusterHealth is the cluster part of a HealthReport.
type ClusterHealth struct {
	Self    string // this member's id
	VShards int    // virtual shards in the cluster
	Members []ClusterMember
}

// ClusterMember is one member of the cluster.
type ClusterMember struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Alive   bool   `json:"alive"`
	VShards int    `json:"vshards"` // virtual shards it owns
}
