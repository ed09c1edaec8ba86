package dashboard

import (
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// topAnswer is the JSON of GET /top.
type topAnswer struct {
	By      TopBy     `json:"by"`
	Window  TopWindow `json:"window"`
	Total   uint64    `json:"total"`
	Bound   uint64    `json:"bound"`
	Sample  int       `json:"sample"`
	Sampled bool      `json:"sampled"`
	Keys    []topKey  `json:"keys"`
}

type topKey struct {
	ID        string `json:"id"`
	Truncated bool   `json:"truncated,omitempty"`
	Label     string `json:"label"`
	Count     uint64 `json:"count"`
	Min       uint64 `json:"min"`
}

// top answers GET /top?by=hits|denials&window=1m|15m&n=1..MaxTopN.
func (h *Handler) top(w http.ResponseWriter, q url.Values, now time.Time) {
	if !onlyParams(w, q, "by", "window", "n") {
		return
	}
	by, window, n := ByHits, Window1m, DefaultTopN
	if v, ok := q["by"]; ok {
		by = TopBy(v[0])
		if by != ByHits && by != ByDenials {
			writeError(w, http.StatusBadRequest, "by", "by: must be hits or denials")
			return
		}
	}
	if v, ok := q["window"]; ok {
		window = TopWindow(v[0])
		if window != Window1m && window != Window15m {
			writeError(w, http.StatusBadRequest, "window", "window: must be 1m or 15m")
			return
		}
	}
	if v, ok := q["n"]; ok {
		var err error
		if n, err = strconv.Atoi(v[0]); err != nil || n < 1 || n > MaxTopN {
			writeError(w, http.StatusBadRequest, "n", "n: must be an integer from 1 to "+strconv.Itoa(MaxTopN))
			return
		}
	}
	if h.opts.Top == nil {
		notAvailable(w, "top keys")
		return
	}
	list := h.opts.Top.Top(by, window, n, now)
	ans := topAnswer{By: by, Window: window, Total: list.Total, Bound: list.Bound, Sample: list.Sample, Sampled: list.Sampled, Keys: make([]topKey, 0, min(len(list.Keys), n))}
	for _, k := range list.Keys[:min(len(list.Keys), n)] {
		ans.Keys = append(ans.Keys, topKey(k))
	}
	writeJSON(w, http.StatusOK, ans)
}

// trafficAnswer is the JSON of GET /dashboard/traffic: one array per
// series, as the chart takes them.
type trafficAnswer struct {
	Now          int64    `json:"now"` // Unix seconds; the last second is now−1
	T            []int64  `json:"t"`   // Unix seconds, ascending
	Allowed      []uint64 `json:"allowed"`
	Denied       []uint64 `json:"denied"`
	ShadowDenied []uint64 `json:"shadow_denied"`
	Errors       []uint64 `json:"errors"`
}

// traffic answers GET /dashboard/traffic[?since=UNIX]: the whole seconds
// after since (all SeriesSeconds without it).
func (h *Handler) traffic(w http.ResponseWriter, q url.Values, now time.Time) {
	if !onlyParams(w, q, "since") {
		return
	}
	since := int64(-1 << 62)
	if v, ok := q["since"]; ok {
		var err error
		if since, err = strconv.ParseInt(v[0], 10, 64); err != nil || since < 0 {
			writeError(w, http.StatusBadRequest, "since", "since: must be a Unix time in seconds, an integer ≥ 0")
			return
		}
	}
	if h.opts.Traffic == nil {
		notAvailable(w, "traffic")
		return
	}
	ans := trafficAnswer{Now: now.Unix(), T: []int64{}, Allowed: []uint64{}, Denied: []uint64{}, ShadowDenied: []uint64{}, Errors: []uint64{}}
	for _, s := range h.opts.Traffic.AppendSeconds(make([]Second, 0, SeriesSeconds), now) {
		if s.Unix <= since {
			continue
		}
		ans.T = append(ans.T, s.Unix)
		ans.Allowed = append(ans.Allowed, s.Allowed)
		ans.Denied = append(ans.Denied, s.Denied)
		ans.ShadowDenied = append(ans.ShadowDenied, s.ShadowDenied)
		ans.Errors = append(ans.Errors, s.Errors)
	}
	writeJSON(w, http.StatusOK, ans)
}

// rulesAnswer is the JSON of GET /dashboard/rules.
type rulesAnswer struct {
	Rules []ruleAnswer `json:"rules"`
}

type ruleAnswer struct {
	Name               string  `json:"name"`
	Policy             string  `json:"policy"`
	Shadow             bool    `json:"shadow"`
	OverMs             int64   `json:"over_ms"`
	ChecksPerSec       float64 `json:"checks_per_sec"`
	DeniedPerSec       float64 `json:"denied_per_sec"`
	ShadowDeniedPerSec float64 `json:"shadow_denied_per_sec"`
}

func (h *Handler) rules(w http.ResponseWriter, now time.Time) {
	if h.opts.Rules == nil {
		notAvailable(w, "rules")
		return
	}
	ans := rulesAnswer{Rules: []ruleAnswer{}}
	for _, r := range h.opts.Rules.Rules(now) {
		ans.Rules = append(ans.Rules, ruleAnswer{r.Name, r.Policy, r.Shadow, r.Over.Milliseconds(), r.ChecksPerSec, r.DeniedPerSec, r.ShadowDeniedPerSec})
	}
	writeJSON(w, http.StatusOK, ans)
}

// healthAnswer is the JSON of GET /dashboard/health; durations in
// milliseconds, times in Unix milliseconds (0: never).
type healthAnswer struct {
	Shards      int            `json:"shards"`
	Buckets     int64          `json:"buckets"`
	MaxBuckets  int64          `json:"max_buckets"`
	BucketsPct  float64        `json:"buckets_pct"` // Buckets as a share of MaxBuckets
	FullDenials int64          `json:"full_denials"`
	Evictions   int64          `json:"evictions"`
	Restarts    int64          `json:"restarts"`
	SweepRounds int64          `json:"sweep_rounds"`
	SweepLastMs float64        `json:"sweep_last_ms"`
	CheckP50Ms  float64        `json:"check_p50_ms"`
	CheckP99Ms  float64        `json:"check_p99_ms"`
	Journal     *journalAnswer `json:"journal"`
	Cluster     *clusterAnswer `json:"cluster,omitempty"`
}

type journalAnswer struct {
	SyncMode       string `json:"sync_mode"`
	Bytes          int64  `json:"bytes"`
	LastSnapshotMs int64  `json:"last_snapshot_ms"`
	Snapshots      int64  `json:"snapshots"`
	SnapshotErrors int64  `json:"snapshot_errors"`
	Errors         int64  `json:"errors"`
	TornTails      int64  `json:"torn_tails"`
}

type clusterAnswer struct {
	Self    string          `json:"self"`
	VShards int             `json:"vshards"`
	Members []ClusterMember `json:"members"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (h *Handler) health(w http.ResponseWriter, now time.Time) {
	if h.opts.Health == nil {
		notAvailable(w, "health")
		return
	}
	r := h.opts.Health.Health(now)
	ans := healthAnswer{
		Shards: r.Shards, Buckets: r.Buckets, MaxBuckets: r.MaxBuckets,
		FullDenials: r.FullDenials, Evictions: r.Evictions, Restarts: r.Restarts,
		SweepRounds: r.SweepRounds, SweepLastMs: ms(r.SweepLast),
		CheckP50Ms: ms(r.CheckP50), CheckP99Ms: ms(r.CheckP99),
	}
	if r.MaxBuckets > 0 {
		ans.BucketsPct = 100 * float64(r.Buckets) / float64(r.MaxBuckets)
	}
	if j := r.Journal; j != nil {
		ans.Journal = &journalAnswer{SyncMode: j.SyncMode, Bytes: j.Bytes, Snapshots: j.Snapshots, SnapshotErrors: j.SnapshotErrors, Errors: j.Errors, TornTails: j.TornTails}
		if !j.LastSnapshot.IsZero() {
			ans.Journal.LastSnapshotMs = j.LastSnapshot.UnixMilli()
		}
	}
	if c := r.Cluster; c != nil {
		ans.Cluster = &clusterAnswer{Self: c.Self, VShards: c.VShards, Members: c.Members}
		if ans.Cluster.Members == nil {
			ans.Cluster.Members = []ClusterMember{}
		}
	}
	writeJSON(w, http.StatusOK, ans)
}

// simulate answers POST /simulate.
func (h *Handler) simulate(w http.ResponseWriter, r *http.Request) {
	// JSON only: a cross-site form cannot send it without a preflight.
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != contentJSON {
		writeError(w, http.StatusUnsupportedMediaType, "", "the body must be JSON, sent with Content-Type: application/json")
		return
	}
	body, ok := readBody(w, r, maxSimBody)
	if !ok {
		return
	}
	sim, err := parseSimulation(body)
	if err != nil {
		writeFieldError(w, err)
		return
	}
	select {
	case h.sims <- struct{}{}:
		defer func() { <-h.sims }()
	case <-r.Context().Done():
		writeError(w, http.StatusServiceUnavailable, "", "gave up waiting for a simulation slot")
		return
	}
	writeJSON(w, http.StatusOK, sim.run())
}
