package actors

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/ratelimitd/ratelimitd/table"
)

// logSink collects a System's logs; it is safe for concurrent use.
type logSink struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// count returns how many log lines carry the message msg.
func (l *logSink) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), `msg="`+msg+`"`)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// poisonHook panics on the checks of id "poison", and on those of 7 hits.
func poisonHook(r table.Request) {
	if r.ID == "poison" || r.Hits == 7 {
		panic("poisoned request")
	}
}

// TestCallerCrashRebuildsTheShardItself: a batch that panics while its
// caller serves it (a single check, or a CheckAll) is answered with
// ErrUnavailable and its shard rebuilt by that caller, before it lets the
// shard go: the crash is counted, and the owner actor is never restarted
// for it.
func TestCallerCrashRebuildsTheShardItself(t *testing.T) {
	t.Parallel()
	const shards = 4
	for _, tc := range []struct {
		name  string
		crash func(s *System) error
		id    string // an id of the crashed shard, counted before the crash
	}{{
		name: "check",
		crash: func(s *System) error {
			_, err := s.Check(context.Background(), hit("poison", 10))
			return err
		},
		id: sameShard("poison", shards, 2)[1],
	}, {
		name: "batch",
		crash: func(s *System) error {
			a, b := orderedPair(shards)
			poisoned := hit(b, 10)
			poisoned.Hits = 7
			_, _, err := s.CheckAll(context.Background(), []table.Request{hit(a, 10), poisoned})
			return err
		},
		id: func() string { _, b := orderedPair(shards); return b }(),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs logSink
			s, err := Start(context.Background(), Config{Shards: shards, SweepInterval: -1, applyHook: poisonHook,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				mustCheck(t, s, hit(tc.id, 10))
			}
			if err := tc.crash(s); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("the crashing %s: got %v, want ErrUnavailable", tc.name, err)
			}
			if got := s.Stats().Restarts; got != 1 {
				t.Fatalf("restarts right after the crash: got %d, want 1", got)
			}
			if d := mustCheck(t, s, hit(tc.id, 10)); d.Count != 1 {
				t.Fatalf("%s after the crash: count %d, want 1 (its shard rebuilt, empty)", tc.id, d.Count)
			}
			if err := s.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := logs.count("shard crashed"); got != 1 {
				t.Errorf("%q logged %d times, want 1:\n%s", "shard crashed", got, &logs)
			}
			if got := logs.count("shard owner restarting"); got != 0 {
				t.Errorf("the owner was restarted %d times for its caller's crash, want 0:\n%s", got, &logs)
			}
		})
	}
}

// TestOwnerCrashRestartsTheOwner: a batch that panics while the owner
// serves it (with SyncAlways the owner serves every check) is answered with
// ErrUnavailable, the shard is rebuilt from its journal, and the owner's
// supervisor restarts it once; the shard serves on.
func TestOwnerCrashRestartsTheOwner(t *testing.T) {
	t.Parallel()
	const shards = 2
	id := sameShard("poison", shards, 2)[1]
	var logs logSink
	s, err := Start(context.Background(), Config{Shards: shards, DataDir: t.TempDir(), JournalSync: SyncAlways, SweepInterval: -1,
		applyHook: poisonHook, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		mustCheck(t, s, hit(id, 10))
	}
	if _, err := s.Check(context.Background(), hit("poison", 10)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the crashing check: got %v, want ErrUnavailable", err)
	}
	if d := mustCheck(t, s, hit(id, 10)); d.Count != 4 {
		t.Fatalf("%s after the crash: count %d, want 4 (3 journaled before it)", id, d.Count)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Restarts; got != 1 {
		t.Errorf("restarts: got %d, want 1", got)
	}
	if got := logs.count("shard owner restarting"); got != 1 {
		t.Errorf("owner restarts logged: %d, want 1:\n%s", got, &logs)
	}
}
