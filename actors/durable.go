// Durability: the data directory, and each shard's journal — recovered at
// Start (one goroutine per shard, before any serves), appended to and
// committed at the end of every batch (persist), snapshotted from a
// goroutine of the shard's (maybeSnapshot, which shares only a Frozen copy
// of the table and the SnapshotWriter), and read again to rebuild a crashed
// shard (rebuild), or, while it cannot be read, stood in for by a temporary
// table whose changes are logged for replay. Past Start, everything here
// runs holding sh.mu, but for the snapshot writer.

package actors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
	"github.com/ratelimitd/ratelimitd/table/journal"
)

// SyncMode says when a shard's journal is flushed to disk (msync).
type SyncMode = journal.SyncMode

// The sync modes.
const (
	// SyncNone leaves writing to the OS page cache: survives a crash or
	// kill -9 of the process, not a power loss or kernel crash.
	SyncNone = journal.SyncNone
	// SyncInterval flushes every Config.JournalSyncInterval: a power loss
	// loses at most that much. The default.
	SyncInterval = journal.SyncInterval
	// SyncAlways flushes each batch before any of its checks is answered
	// (group commit): an answered hit survives a power loss.
	SyncAlways = journal.SyncAlways
)

// ParseSyncMode returns the SyncMode named s: "none", "interval" or "always".
func ParseSyncMode(s string) (SyncMode, error) { return journal.ParseSyncMode(s) }

// JournalErrorPolicy says what a shard does while its journal fails (a full
// disk, an I/O error on msync).
type JournalErrorPolicy int

// The policies.
const (
	// FailClosed answers the checks of every batch the journal could not
	// take with ErrJournal (HTTP 503 with Retry-After): no hit is admitted
	// that a crash could forget. The default.
	FailClosed JournalErrorPolicy = iota
	// FailOpen answers from memory, as if there were no journal, until the
	// journal works again; a crash meanwhile forgets those hits.
	FailOpen
)

// String returns "closed" or "open".
func (p JournalErrorPolicy) String() string {
	if p == FailOpen {
		return "open"
	}
	return "closed"
}

// ParseJournalErrorPolicy returns the policy named s: "closed" or "open".
func ParseJournalErrorPolicy(s string) (JournalErrorPolicy, error) {
	switch s {
	case "closed":
		return FailClosed, nil
	case "open":
		return FailOpen, nil
	}
	return 0, fmt.Errorf("%w: journal error policy %q: must be closed or open", ErrConfig, s)
}

// Defaults of the journal settings.
const (
	// DefaultSegmentSize is the size of a shard's journal segments: 8 MiB,
	// half the journal's own default (journal.DefaultSegmentSize), since a
	// System keeps a journal, with a whole segment allocated, per shard.
	DefaultSegmentSize = 8 << 20
	// DefaultSnapshotThreshold is the journal size of a shard past which it
	// writes a snapshot.
	DefaultSnapshotThreshold = 32 << 20
)

// Every record of a batch fits in a journal segment of the smallest size
// (this does not compile otherwise), so no batch can be refused as too large.
const _ = uint(journal.MinSegmentSize - journal.SegmentOverhead - table.MaxRecordBytes)

// meta is the data directory's description of itself, in DataDir/META.
type meta struct {
	Format int `json:"format"`
	Shards int `json:"shards"`
}

const (
	metaFile   = "META"
	metaFormat = 1
)

// shardDir is the journal directory of shard i.
func shardDir(dataDir string, i int) string {
	return filepath.Join(dataDir, fmt.Sprintf("shard-%03d", i))
}

// openData locks the data directory and settles the number of shards: the
// directory's own when Config.Shards is 0, and an error when they differ
// (an id's shard depends on the count, so a journal cannot change hands).
func openData(cfg *Config, explicitShards bool) (*journal.DirLock, error) {
	lock, err := journal.LockDir(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("actors: data directory: %w", err)
	}
	fail := func(err error) (*journal.DirLock, error) {
		_ = lock.Unlock()
		return nil, err
	}
	path := filepath.Join(cfg.DataDir, metaFile)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := writeMeta(cfg.DataDir, meta{Format: metaFormat, Shards: cfg.Shards}); err != nil {
			return fail(err)
		}
		return lock, nil
	case err != nil:
		return fail(fmt.Errorf("actors: data directory: %w", err))
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil || m.Format != metaFormat || m.Shards < 1 || m.Shards > MaxShards {
		return fail(fmt.Errorf("%w: %s is not a ratelimitd data directory description (format %d, %d shards expected)", ErrConfig, path, metaFormat, cfg.Shards))
	}
	if m.Shards != cfg.Shards {
		if explicitShards {
			return fail(fmt.Errorf("%w: data directory %s holds %d shards, but %d were asked for; start with %d shards (or an empty data directory)", ErrConfig, cfg.DataDir, m.Shards, cfg.Shards, m.Shards))
		}
		cfg.Shards = m.Shards
	}
	return lock, nil
}

// writeMeta writes DataDir/META atomically.
func writeMeta(dir string, m meta) error {
	b, _ := json.Marshal(m)
	if err := journal.WriteFileAtomic(dir, metaFile, append(b, '\n')); err != nil {
		return fmt.Errorf("actors: data directory: %w", err)
	}
	return nil
}

// recover opens the journal of sh and replays it into a new table, leaving
// out the buckets expired at now.
func (sh *shard) recover(cfg *Config, now time.Time) (*table.Table, journal.Recovery, error) {
	t := table.New(cfg.tableConfig(true))
	j, rec, err := journal.OpenTails(shardDir(cfg.DataDir, sh.index), journal.Options{
		Sync:         cfg.JournalSync,
		SyncInterval: cfg.JournalSyncInterval,
		SegmentSize:  cfg.SegmentSize,
		Repair:       cfg.JournalRepair,
		RollAhead:    true, // no segment creation or msync under the shard lock at a roll
		// 7 bytes of frame per record, not 16 and an alignment to 8; a
		// bucket's first repeat hit in a segment appends its count with a
		// tail, where its later hits are written in place
		// (table.ChangesTo).
		SegmentFormat: 3,
		Logger:        cfg.Logger.With("shard", sh.index),
	}, func(p, tail []byte) error { return t.RestoreTail(p, tail, now) })
	if err != nil {
		return nil, rec, fmt.Errorf("actors: shard %d: recover: %w", sh.index, err)
	}
	t.RestoreDone() // the journal's references are the old table's: the new one binds its own
	sh.j = j
	sh.tornTails.Add(int64(rec.TornTails))
	sh.buckets.Store(int64(t.Len()))
	return t, rec, nil
}

// recoverAll recovers every shard in parallel, before any serves, and logs
// what each found. At most GOMAXPROCS at once: a recovery is CPU work, and
// a page fault of its mappings holds its proc, so more would only take
// turns, each evicting the other's table from the caches.
func recoverAll(cfg *Config, shards []*shard) error {
	start := time.Now()
	errs := make([]error, len(shards))
	sem := make(chan struct{}, max(1, min(len(shards), runtime.GOMAXPROCS(0))))
	var wg sync.WaitGroup
	for i, sh := range shards {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			t, rec, err := sh.recover(cfg, cfg.Clock.Now())
			if err != nil {
				errs[i] = err
				return
			}
			sh.table = t
			if rec.SnapshotRecords+rec.SegmentRecords > 0 || rec.TornTails > 0 || rec.Repaired {
				cfg.Logger.Info("shard recovered", "shard", sh.index, "buckets", t.Len(),
					"snapshot", rec.Snapshot, "snapshot_records", rec.SnapshotRecords,
					"segments", rec.Segments, "segment_records", rec.SegmentRecords,
					"torn_tails", rec.TornTails, "bytes_dropped", rec.BytesDropped,
					"repaired", rec.Repaired, "duration", rec.Duration)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err // Start's teardown closes the journals opened
	}
	var buckets int64
	for _, sh := range shards {
		buckets += sh.buckets.Load()
	}
	cfg.Logger.Info("journal recovered", "dir", cfg.DataDir, "shards", len(shards), "buckets", buckets,
		"sync", cfg.JournalSync, "duration", time.Since(start).Round(time.Millisecond))
	return nil
}

// rebuildRetry is how long a shard whose journal could not be reopened
// waits before it tries again (at its next batch).
const rebuildRetry = time.Second

// maxUnjournaled bounds the changes a shard keeps, to replay them, while it
// serves from a temporary table without a journal.
const maxUnjournaled = 1 << 16

// loggedOp is a change made to a temporary table: what to replay on the
// table rebuilt from the journal.
type loggedOp struct {
	op  op
	req table.Request
	now time.Time
}

// keepUnjournaled logs the change k made to the temporary table at now, be
// it answered (FailOpen) or refused (FailClosed): either way it counts, as
// it would had the journal only failed to take it.
func (sh *shard) keepUnjournaled(k *call, now time.Time) {
	switch {
	case k.op == opBuckets || k.op == opCheck && k.req.Hits == 0:
		return // changes nothing
	case len(sh.unjournaled) >= maxUnjournaled:
		sh.lost++
		return
	}
	sh.unjournaled = append(sh.unjournaled, loggedOp{op: k.op, req: k.req, now: now})
}

// replayUnjournaled applies ops, in order and at their times, to t. A
// refund gives back only hits that a replayed check counted on t: the
// temporary table could refund no others, and t must not lose a hit its
// journal holds.
func replayUnjournaled(t *table.Table, ops []loggedOp) {
	credit := make(map[table.Request]int64) // hits counted on t by a replayed check, by request less Hits
	for i := range ops {
		o := &ops[i]
		key := o.req
		key.Hits = 0
		switch o.op {
		case opCheck:
			if t.Apply(o.req, o.now).Allowed {
				credit[key] += o.req.Hits
			}
		case opRefund:
			if n := min(o.req.Hits, credit[key]); n > 0 {
				req := o.req
				req.Hits = n
				t.Refund(req, o.now)
				credit[key] -= n
			}
		case opReset:
			t.Reset(o.req, o.now)
			delete(credit, key)
		case opResetID:
			t.ResetID(o.req.Namespace, o.req.ID, o.now)
			for k := range credit {
				if k.ID == o.req.ID && k.Namespace == o.req.Namespace {
					delete(credit, k)
				}
			}
		}
	}
}

// reopen rebuilds the table of sh from its journal, holding sh.mu, and
// replays on it the changes made to a temporary table meanwhile. If
// the journal cannot be read, the shard serves without it from a
// temporary table (a new one if it has none) and tries again at its first
// batch rebuildRetry later: a journal error is never permanent.
func (sh *shard) reopen(cfg *Config, now time.Time) {
	from := now
	if len(sh.unjournaled) > 0 {
		from = sh.unjournaled[0].now // the replay starts at the first of them
	}
	t, rec, err := sh.recover(cfg, from)
	if err != nil {
		sh.serveWithoutJournal(cfg, err, now)
		return
	}
	// Taken before the replay, so that a replay that panics is not retried.
	ops, lost := sh.unjournaled, sh.lost
	sh.unjournaled, sh.lost = nil, 0
	replayUnjournaled(t, ops)
	if lost > 0 {
		cfg.Logger.Error("changes made while the journal could not be read are forgotten",
			"shard", sh.index, "changes", lost, "kept", len(ops))
	}
	sh.table, sh.broken, sh.seen = t, nil, table.Stats{}
	cfg.Logger.Warn("shard owner rebuilt its table from the journal", "shard", sh.index,
		"buckets", t.Len(), "records", rec.SnapshotRecords+rec.SegmentRecords,
		"replayed_from_memory", len(ops), "duration", rec.Duration)
}

// serveWithoutJournal has sh, whose journal cannot be read (err), serve
// from a temporary table (a new one if it has none) until a retry, at its
// first batch from rebuildRetry on, reads it; holding sh.mu.
func (sh *shard) serveWithoutJournal(cfg *Config, err error, now time.Time) {
	if sh.broken == nil {
		cfg.Logger.Error("shard owner could not rebuild its table from the journal; serving without it until it can",
			"shard", sh.index, "err", err, "policy", cfg.OnJournalError, "retry", rebuildRetry)
	} else {
		cfg.Logger.Debug("journal still cannot be reopened", "shard", sh.index, "err", err)
	}
	sh.broken, sh.retryAt = err, now.Add(rebuildRetry)
	if sh.table == nil {
		sh.table = table.New(cfg.tableConfig(false))
	}
}

// rebuild replaces the table of a crashed shard, holding sh.mu: with an
// empty one without a data directory, else with the journal's (see reopen).
// A rebuild that panics is a journal that cannot be read, so that a crash
// never escapes to the goroutine that was serving the shard.
func (sh *shard) rebuild(cfg *Config) {
	if cfg.DataDir == "" {
		sh.table = table.New(cfg.tableConfig(false))
		sh.seen = table.Stats{}
		return
	}
	now := cfg.Clock.Now()
	defer func() {
		if r := recover(); r != nil {
			sh.closeJournal(cfg)
			sh.serveWithoutJournal(cfg, fmt.Errorf("actors: shard %d: rebuild: panic: %v", sh.index, r), now)
		}
	}()
	// The crashed table's snapshot writer must finish with the journal
	// files before they are read again.
	sh.snapshots.Wait()
	sh.snapshotting = false
	sh.closeJournal(cfg)
	sh.seen, sh.failing = table.Stats{}, false
	sh.table = nil // it may be inconsistent, even a temporary one
	if cfg.rebuildHook != nil {
		cfg.rebuildHook()
	}
	sh.reopen(cfg, now)
}

// closeJournal closes the journal of sh, if it has one open, holding sh.mu.
func (sh *shard) closeJournal(cfg *Config) {
	if sh.j == nil {
		return
	}
	if err := sh.j.Close(); err != nil {
		cfg.Logger.Error("journal close failed", "shard", sh.index, "err", err)
	}
	sh.j = nil
}

// closeJournals flushes and closes every shard's journal.
func closeJournals(shards []*shard, cfg *Config) {
	for _, sh := range shards {
		sh.snapshots.Wait()
		sh.mu.Lock()
		if n := len(sh.unjournaled) + sh.lost; n > 0 {
			cfg.Logger.Error("changes made while the journal could not be read were never journaled", "shard", sh.index, "changes", n, "err", sh.broken)
		}
		sh.closeJournal(cfg)
		sh.mu.Unlock()
	}
}

// snapshotDone tells an owner that a snapshot of its table was written (or
// failed), so it can stop sharing the table's pages with it; a message, so
// that the writer never waits for the shard.
type snapshotDone struct {
	table  *table.Table
	frozen *table.Frozen
	err    error
}

// persist, holding sh.mu, writes the buckets the batch changed to the
// journal and ends the batch (Commit: in SyncAlways mode, the msync of the
// group commit). It returns the error the batch's checks must be answered
// with, or nil. taken is the number of calls the batch took.
func (sh *shard) persist(cfg *Config, taken int) error {
	j := sh.j
	if j == nil {
		switch {
		case sh.broken == nil: // no data directory
		case taken == 0: // nothing to refuse or to count
		case cfg.OnJournalError == FailClosed:
			sh.failedClosed.Add(1)
			return fmt.Errorf("%w: %w: %w", ErrUnavailable, ErrJournal, sh.broken)
		default:
			sh.failedOpen.Add(1)
		}
		return nil
	}
	err := sh.table.ChangesTo(j)
	if cerr := j.Commit(); err == nil {
		err = cerr
	}
	if err == nil {
		if sh.failing {
			sh.failing = false
			cfg.Logger.Info("journal works again", "shard", sh.index, "seq", j.Seq())
		}
		return nil
	}
	sh.journalErrors.Add(1)
	if !sh.failing {
		sh.failing = true
		cfg.Logger.Error("journal failed", "shard", sh.index, "err", err,
			"policy", cfg.OnJournalError, "unjournaled_buckets", sh.table.Pending())
	}
	if cfg.OnJournalError == FailOpen {
		sh.failedOpen.Add(1)
		return nil
	}
	sh.failedClosed.Add(1)
	return fmt.Errorf("%w: %w: %w", ErrUnavailable, ErrJournal, err)
}

// maybeSnapshot starts a snapshot of the table when the journal has grown
// past the threshold: a copy-on-write Frozen copy is written out by a
// goroutine of the shard while the shard goes on serving. It runs holding
// sh.mu.
func (sh *shard) maybeSnapshot(cfg *Config) {
	j := sh.j
	if j == nil || sh.snapshotting || sh.failing || j.Size() < cfg.SnapshotThreshold {
		return
	}
	w, err := j.StartSnapshot()
	if err != nil {
		sh.snapshotErrors.Add(1)
		cfg.Logger.Error("snapshot failed to start", "shard", sh.index, "err", err)
		return
	}
	sh.snapshotting = true
	t, f := sh.table, sh.table.Freeze(cfg.Clock.Now())
	root, pid := sh.root, sh.pid
	sh.snapshots.Go(func() {
		err := f.Records(w.Append)
		if err == nil {
			err = w.Commit()
		} else {
			err = errors.Join(err, w.Abort())
		}
		root.Send(pid, snapshotDone{table: t, frozen: f, err: err})
	})
}

// snapshotted handles a snapshotDone, holding sh.mu.
func (sh *shard) snapshotted(cfg *Config, m snapshotDone) {
	if m.table != sh.table {
		return // a table from before a crash
	}
	buckets := m.frozen.Len()
	sh.table.Thaw(m.frozen)
	sh.snapshotting = false
	if m.err != nil {
		sh.snapshotErrors.Add(1)
		cfg.Logger.Error("snapshot failed", "shard", sh.index, "err", m.err)
		return
	}
	sh.snapshotsTaken.Add(1)
	cfg.Logger.Debug("snapshot written", "shard", sh.index, "buckets", buckets, "seq", sh.j.Seq())
}
