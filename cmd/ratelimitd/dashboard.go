package main

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/topk"
	"github.com/ratelimitd/ratelimitd/api"
	"github.com/ratelimitd/ratelimitd/api/dashboard"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/metrics"
	"github.com/ratelimitd/ratelimitd/api/resp"
	"github.com/ratelimitd/ratelimitd/api/rls"
	"github.com/ratelimitd/ratelimitd/api/rules"
)

// dashData is the live dashboard's part of the daemon: what the checks
// record for it (the traffic series, check latencies, each rule's
// traffic), sweep rounds, and its mounting on the admin listener, in
// front of the admin API. A nil *dashData is the dashboard off: every
// method then leaves things as they are.
type dashData struct {
	traffic   dashboard.TrafficRing
	latencies dashboard.Latencies
	rules     ruleTraffic
	sweeps    sweepStats
	topKeys   bool
	// topKeysSample is --top-keys-sample (actors.Config.TopKeysSample).
	topKeysSample int
}

// newDashData returns the dashboard's data, or nil when it is off: no
// admin API (--admin-token-file) to serve it, or --dashboard=false.
func newDashData(cfg *config) *dashData {
	if cfg.adminTokenFile == "" || !cfg.dashboard.on {
		return nil
	}
	return &dashData{topKeys: cfg.dashboard.topKeys, topKeysSample: cfg.dashboard.topKeysSample}
}

// configureActors has the actor system track top keys (--top-keys) and
// tell the dashboard of its sweep rounds.
func (d *dashData) configureActors(acfg *actors.Config) {
	if d == nil {
		return
	}
	acfg.TopKeys, acfg.TopKeysSample = d.topKeys, d.topKeysSample
	acfg.SweepObserver = sweepFanout{next: acfg.SweepObserver, stats: &d.sweeps}
}

// recorder returns what the transports record their checks in: the
// metrics, and with the dashboard on, its traffic, latencies and rules too.
func (d *dashData) recorder(prom *metrics.Metrics) httpapi.Metrics {
	if d == nil {
		return prom
	}
	return dashRecorder{Metrics: prom, d: d}
}

// mount returns the admin listener's handler: the dashboard in front of
// the admin API (next), which serves every path the dashboard does not.
func (d *dashData) mount(next http.Handler, cfg *config, tokens func() []string, sys *actors.System, rs *ruleSet, prom *metrics.Metrics, log *slog.Logger) (http.Handler, error) {
	if d == nil {
		return next, nil
	}
	opts := dashboard.Options{
		Tokens:         tokens,
		Traffic:        &d.traffic,
		Rules:          rulesPanel{store: rs.store, traffic: &d.rules},
		Health:         &healthPanel{sys: sys, cfg: cfg, d: d},
		Next:           next,
		Logger:         log,
		OnTokenFailure: prom.TokenFailures("dashboard"),
	}
	if d.topKeys {
		opts.Top = topKeysPanel{sys}
	}
	h, err := dashboard.New(opts)
	if err != nil {
		return nil, err
	}
	log.Info("dashboard on the admin listener", "path", dashboard.PathPage, "top_keys", d.topKeys)
	return h, nil
}

// dashRecorder is the metrics, which it embeds, and the dashboard's data:
// every check a transport answers is counted in both.
type dashRecorder struct {
	*metrics.Metrics
	d *dashData
}

var (
	_ httpapi.Metrics  = dashRecorder{}
	_ api.RuleRecorder = dashRecorder{}
)

// Checked implements api.Recorder.
func (r dashRecorder) Checked(res api.Result, start time.Time) {
	r.Metrics.Checked(res, start)
	now := time.Now()
	r.d.traffic.Record(trafficResult(res), now)
	r.d.latencies.Record(now.Sub(start), now)
}

// CheckedRule implements api.RuleRecorder.
func (r dashRecorder) CheckedRule(rule string, res api.Result) {
	r.d.rules.record(rule, trafficResult(res), time.Now())
}

// trafficResult is how the dashboard counts a transport's result: a
// full-table refusal is a denial, bad input an error.
func trafficResult(res api.Result) dashboard.Result {
	switch res {
	case api.ResultAllowed:
		return dashboard.Allowed
	case api.ResultDenied, api.ResultFull:
		return dashboard.Denied
	case api.ResultShadowDenied:
		return dashboard.ShadowDenied
	}
	return dashboard.Error
}

// respObserver returns obs, and with the dashboard on, obs that also
// counts the result of every check command (CL.THROTTLE, RL.CHECK,
// RL.RULE; not refunds, not the connection's other commands) in the
// live traffic.
func (d *dashData) respObserver(obs resp.Observer) resp.Observer {
	if d == nil {
		return obs
	}
	return dashRESP{Observer: obs, d: d}
}

// dashRESP is a resp.Observer, which it embeds, that also feeds the
// dashboard's traffic.
type dashRESP struct {
	resp.Observer
	d *dashData
}

// Command implements resp.Observer.
func (o dashRESP) Command(name string, res resp.Result) {
	o.Observer.Command(name, res)
	switch name {
	case "cl.throttle", "rl.check", "rl.rule":
	default:
		return
	}
	var r dashboard.Result
	switch res {
	case resp.ResultAllowed:
		r = dashboard.Allowed
	case resp.ResultDenied, resp.ResultFull:
		r = dashboard.Denied
	case resp.ResultShadowDenied:
		r = dashboard.ShadowDenied
	case resp.ResultInvalid, resp.ResultError:
		r = dashboard.Error
	default: // noauth: not a check
		return
	}
	o.d.traffic.Record(r, time.Now())
}

// rlsObserver returns obs, and with the dashboard on, obs that also
// counts every ShouldRateLimit call (one result per call, as a batch of
// check_rate is one) in the live traffic and its check latencies.
func (d *dashData) rlsObserver(obs rls.Observer) rls.Observer {
	if d == nil {
		return obs
	}
	return dashRLS{Observer: obs, d: d}
}

// dashRLS is an rls.Observer, which it embeds, that also feeds the
// dashboard's traffic and latencies.
type dashRLS struct {
	rls.Observer
	d *dashData
}

// ObserveCall implements rls.Observer.
func (o dashRLS) ObserveCall(ev rls.CallEvent) {
	o.Observer.ObserveCall(ev)
	r := dashboard.Error
	switch {
	case ev.Outcome == rls.OutcomeOK && ev.GlobalShadow:
		r = dashboard.ShadowDenied
	case ev.Outcome == rls.OutcomeOK:
		r = dashboard.Allowed
	case ev.Outcome == rls.OutcomeOverLimit:
		r = dashboard.Denied
	}
	now := time.Now()
	o.d.traffic.Record(r, now)
	o.d.latencies.Record(ev.Latency, now)
}

// clusterHealth is the cluster part of the health panel: every member
// in this member's view (each holds a live lease) and its vshards.
func clusterHealth(cs actors.ClusterStatus) *dashboard.ClusterHealth {
	h := &dashboard.ClusterHealth{Self: cs.Member, VShards: cs.VShards}
	for _, m := range cs.Members {
		h.Members = append(h.Members, dashboard.ClusterMember{ID: m.ID, Address: m.Addr, Alive: true, VShards: m.VShards})
	}
	return h
}

// ruleTraffic counts each named rule's checks per second and result, a
// dashboard.TrafficRing (28,800 bytes) per rule that has been checked;
// rulesPanel forgets the rings of rules that are gone.
type ruleTraffic struct {
	rings sync.Map // rule name → *dashboard.TrafficRing
}

func (t *ruleTraffic) record(rule string, r dashboard.Result, now time.Time) {
	v, ok := t.rings.Load(rule)
	if !ok {
		v, _ = t.rings.LoadOrStore(rule, new(dashboard.TrafficRing))
	}
	v.(*dashboard.TrafficRing).Record(r, now)
}

// totals returns the rule's checks of the n whole seconds before now.
func (t *ruleTraffic) totals(rule string, now time.Time, n int) dashboard.Second {
	v, ok := t.rings.Load(rule)
	if !ok {
		return dashboard.Second{}
	}
	return v.(*dashboard.TrafficRing).Totals(now, n)
}

// retain forgets the rules keep refuses.
func (t *ruleTraffic) retain(keep func(rule string) bool) {
	t.rings.Range(func(k, _ any) bool {
		if !keep(k.(string)) {
			t.rings.Delete(k)
		}
		return true
	})
}

// ruleRateSeconds is the span of the rules panel's rates.
const ruleRateSeconds = 10

// rulesPanel is the rules panel's data: the rules in force, with their
// rates over the last ruleRateSeconds whole seconds.
type rulesPanel struct {
	store   *rules.Store
	traffic *ruleTraffic
}

// Rules implements dashboard.Rules.
func (p rulesPanel) Rules(now time.Time) []dashboard.RuleStats {
	set := p.store.Current()
	p.traffic.retain(func(name string) bool { _, ok := set.Get(name); return ok })
	list := set.Rules()
	out := make([]dashboard.RuleStats, 0, len(list))
	for _, r := range list {
		s := p.traffic.totals(r.Name, now, ruleRateSeconds)
		per := func(n uint64) float64 { return float64(n) / ruleRateSeconds }
		out = append(out, dashboard.RuleStats{
			Name: r.Name, Policy: r.Policy.String(), Shadow: r.Shadow, Over: ruleRateSeconds * time.Second,
			ChecksPerSec:       per(s.Allowed + s.Denied + s.ShadowDenied),
			DeniedPerSec:       per(s.Denied),
			ShadowDeniedPerSec: per(s.ShadowDenied),
		})
	}
	return out
}

// topKeysPanel is the top keys panel's data: the actor system's sketches.
type topKeysPanel struct{ sys *actors.System }

// Top implements dashboard.TopKeys.
func (p topKeysPanel) Top(by dashboard.TopBy, w dashboard.TopWindow, n int, now time.Time) dashboard.TopList {
	m, win := topk.Hits, topk.Minute
	if by == dashboard.ByDenials {
		m = topk.Denials
	}
	if w == dashboard.Window15m {
		win = topk.FifteenMinutes
	}
	tk, err := p.sys.Top(m, win, n, now)
	if err != nil {
		return dashboard.TopList{} // the top keys are off: mount offers no panel then
	}
	list := dashboard.TopList{Total: tk.Total, Bound: tk.Bound, Sample: tk.Sample, Sampled: tk.Sampled, Keys: make([]dashboard.TopKey, len(tk.Keys))}
	for i, k := range tk.Keys {
		list.Keys[i] = dashboard.TopKey{ID: k.ID, Truncated: k.Truncated, Label: k.Label, Count: k.Count, Min: k.Min}
	}
	return list
}

// sweepStats counts the actor system's sweep rounds and keeps the last
// one's duration.
type sweepStats struct {
	rounds atomic.Int64
	last   atomic.Int64 // ns
}

// sweepFanout tells stats, then next (the metrics), of every sweep round.
type sweepFanout struct {
	next  actors.SweepObserver
	stats *sweepStats
}

var _ actors.SweepObserver = sweepFanout{}

// SweepDone implements actors.SweepObserver.
func (f sweepFanout) SweepDone(r actors.SweepReport) {
	f.stats.rounds.Add(1)
	f.stats.last.Store(int64(r.Duration))
	if f.next != nil {
		f.next.SweepDone(r)
	}
}

// journalUsageTTL is how long the health panel reuses a reading of the
// data directory, however many pages poll it.
const journalUsageTTL = time.Second

// healthPanel is the health panel's data: the actor system's counters, the
// flags, the dashboard's own counts, and the data directory's files.
type healthPanel struct {
	sys *actors.System
	cfg *config
	d   *dashData

	mu      sync.Mutex // guards the reading below
	readAt  time.Time
	bytes   int64
	lastSnp time.Time
}

// Health implements dashboard.Health.
func (p *healthPanel) Health(now time.Time) dashboard.HealthReport {
	st := p.sys.Stats()
	q, _ := p.d.latencies.Quantile(now, 0.5, 0.99)
	rep := dashboard.HealthReport{
		Shards: st.Shards, Buckets: st.Buckets, MaxBuckets: int64(p.cfg.maxBuckets),
		FullDenials: st.Rejections, Evictions: st.Evictions, Restarts: st.Restarts,
		SweepRounds: p.d.sweeps.rounds.Load(), SweepLast: time.Duration(p.d.sweeps.last.Load()),
		CheckP50: q[0], CheckP99: q[1],
	}
	if p.cfg.dataDir != "" {
		bytes, snap := p.journalUsage(now)
		rep.Journal = &dashboard.JournalHealth{
			SyncMode: p.cfg.journalSync.String(), Bytes: bytes, LastSnapshot: snap,
			Snapshots: st.Snapshots, SnapshotErrors: st.SnapshotErrors, Errors: st.JournalErrors, TornTails: st.TornTails,
		}
	}
	if cs, ok := p.sys.ClusterStatus(); ok {
		rep.Cluster = clusterHealth(cs)
	}
	return rep
}

// journalUsage returns the bytes of the journals' segments and snapshots
// in the data directory, and the time the newest snapshot was written
// (zero: none), read again at most every journalUsageTTL.
func (p *healthPanel) journalUsage(now time.Time) (int64, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.readAt.IsZero() && now.Sub(p.readAt) < journalUsageTTL && !now.Before(p.readAt) {
		return p.bytes, p.lastSnp
	}
	p.readAt = now
	p.bytes, p.lastSnp = readJournalUsage(p.cfg.dataDir)
	return p.bytes, p.lastSnp
}

// readJournalUsage sums the sizes of the segments (seg-*.log) and
// snapshots (snap-*.snap) in the shard directories of dataDir and returns
// the newest snapshot's modification time. Files it cannot read are left
// out.
func readJournalUsage(dataDir string) (bytes int64, lastSnapshot time.Time) {
	dirs, _ := filepath.Glob(filepath.Join(dataDir, "shard-*"))
	for _, dir := range dirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			name := e.Name()
			snap := strings.HasPrefix(name, "snap-") && strings.HasSuffix(name, ".snap")
			if !snap && !(strings.HasPrefix(name, "seg-") && strings.HasSuffix(name, ".log")) {
				continue
			}
			info, err := e.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			bytes += info.Size()
			if snap && info.ModTime().After(lastSnapshot) {
				lastSnapshot = info.ModTime()
			}
		}
	}
	return bytes, lastSnapshot
}
