package clock

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// slewStep is the monotonic time between two readings in the slew tests;
// it divides anchorAge, so the clock re-anchors exactly every anchorAge.
const slewStep = 10 * time.Millisecond

// slewScenario moves the wall clock against the monotonic one: the wall
// reads slewBase + m + offset(m) at monotonic time m.
type slewScenario struct {
	name   string
	offset func(m time.Duration) time.Duration
	// settle, if not 0, is when the offset last changes; from then on the
	// readings must reach the wall within the slew bound.
	settle time.Duration
	total  time.Duration // how long the scenario runs, in monotonic time
	// maxOff, if not 0, bounds |wall − reading| over the whole run.
	maxOff time.Duration
	logs   []string // the log lines the clock must write, in order
}

// slewBase is half a second past a second boundary: 1 s fixed windows end
// halfway between the re-anchorings, where a step is seen.
var slewBase = time.Date(2026, 3, 1, 12, 0, 0, 500_000_000, time.UTC)

// stepAt returns an offset of 0 before at and of off from at on.
func stepAt(at, off time.Duration) func(time.Duration) time.Duration {
	return func(m time.Duration) time.Duration {
		if m >= at {
			return off
		}
		return 0
	}
}

// stepThenBack returns an offset of off in [at, back) and 0 elsewhere.
func stepThenBack(at, back, off time.Duration) func(time.Duration) time.Duration {
	return func(m time.Duration) time.Duration {
		if m >= at && m < back {
			return off
		}
		return 0
	}
}

func abs(d time.Duration) time.Duration { return max(d, -d) }

// runSlew drives a System clock with the scenario's wall clock and a real
// table with its readings: a fixed-window key of 3 hits per second is kept
// at its limit, and every reading peeks at it. It checks that
//
//   - no reading goes back, and between two readings the clock advances by
//     the monotonic time between them within the slew rate (1 ± 1/slewDiv);
//   - the key, once denied with ResetAfter r at monotonic time m, is denied
//     until m + r·slewDiv/(slewDiv+1) (no step reopens its window) and allowed
//     again by m + r·slewDiv/(slewDiv−1) (no step freezes it longer);
//   - after the offset settles at s, with the readings off the wall by e,
//     they equal the wall from s + 2·anchorAge + slewDiv·|e| on: a second for
//     the step to be seen, a second's worth of slewing the wrong way, then
//     the slew;
//   - the clock logs exactly the scenario's lines;
//   - UnixNano reads Now().UnixNano().
func runSlew(t *testing.T, sc slewScenario) {
	t.Helper()
	var mono time.Duration
	wall := func() time.Time { return slewBase.Add(mono + sc.offset(mono)) }
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{} // the handler's own clock: not the one under test
		}
		return a
	}}))
	c := newSystemClock(wall, func() time.Duration { return mono }, WithLogger(log))

	tab := table.New(table.Config{})
	req := table.Request{ID: "k", Policy: table.Policy{Scale: time.Second, Limit: 3}, Hits: 1}
	peek := req
	peek.Hits = 0
	var (
		filledAt  time.Duration // monotonic time the key reached its limit
		reset     time.Duration // its ResetAfter then
		windows   int
		caughtUp  time.Duration = -1 // from when the readings must equal the wall
		longest   time.Duration      // the longest any window stayed shut
		reported  = map[string]bool{}
		prev      = c.Now()
		firstFail = func(kind, format string, args ...any) {
			t.Helper()
			if !reported[kind] {
				reported[kind] = true
				t.Errorf(format, args...)
			}
		}
	)
	fill := func(now time.Time) {
		for range req.Limit + 1 {
			if d := tab.Apply(req, now); !d.Allowed {
				filledAt, reset = mono, d.ResetAfter
				windows++
				return
			}
		}
		t.Fatalf("at %v: %d hits admitted of a limit of %d", mono, req.Limit+1, req.Limit)
	}
	fill(prev)
	for mono = slewStep; mono <= sc.total; mono += slewStep {
		// UnixNano reads what Now reads, whichever of the two is the one
		// that re-anchors (they take turns from one anchorAge to the next).
		var now time.Time
		var ns int64
		if mono/anchorAge%2 == 0 {
			now = c.Now()
			ns = c.UnixNano()
		} else {
			ns = c.UnixNano()
			now = c.Now()
		}
		if ns != now.UnixNano() {
			firstFail("unixnano", "at %v: UnixNano read %d, want Now().UnixNano() %d", mono, ns, now.UnixNano())
		}
		if adv := now.Sub(prev); adv*slewDiv < slewStep*(slewDiv-1) || adv*slewDiv > slewStep*(slewDiv+1) {
			firstFail("rate", "at %v: the clock advanced %v in %v of monotonic time, want within 1/%d of it", mono, adv, slewStep, slewDiv)
		}
		prev = now
		off := wall().Sub(now)
		if sc.maxOff > 0 && abs(off) > sc.maxOff {
			firstFail("offset", "at %v: the reading is %v off the wall, want at most %v", mono, off, sc.maxOff)
		}
		if sc.settle > 0 && mono == sc.settle {
			caughtUp = sc.settle + 2*anchorAge + slewDiv*abs(off)
			if caughtUp >= sc.total {
				t.Fatalf("the scenario ends at %v, before the readings must have caught up at %v", sc.total, caughtUp)
			}
		}
		if caughtUp >= 0 && mono >= caughtUp && off != 0 {
			firstFail("catch-up", "at %v: the reading is %v off the wall, want 0 from %v on", mono, off, caughtUp)
		}

		e := mono - filledAt
		d := tab.Apply(peek, now)
		switch {
		case d.Allowed && e*(slewDiv+1) < reset*slewDiv:
			firstFail("reopened", "at %v: the window shut at %v for %v reopened after %v, want at least %v", mono, filledAt, reset, e, reset*slewDiv/(slewDiv+1))
		case !d.Allowed && e*(slewDiv-1) >= reset*slewDiv:
			firstFail("frozen", "at %v: the window shut at %v for %v is still shut after %v, want open by %v", mono, filledAt, reset, e, reset*slewDiv/(slewDiv-1))
		}
		if d.Allowed {
			longest = max(longest, e)
			fill(now)
		}
	}
	// A window lasts at most a second and a twentieth (and a step): so many
	// cycles show that the key was kept at its limit throughout.
	if want := int(sc.total / (time.Second*slewDiv/(slewDiv-1) + slewStep)); windows < want {
		t.Errorf("%d windows filled in %v, want at least %d", windows, sc.total, want)
	}
	if limit := time.Second * slewDiv / (slewDiv - 1); longest > limit+slewStep {
		t.Errorf("a window stayed shut for %v, want at most %v", longest, limit+slewStep)
	}
	var got []string
	if s := strings.TrimSpace(logs.String()); s != "" {
		got = strings.Split(s, "\n")
	}
	if strings.Join(got, "\n") != strings.Join(sc.logs, "\n") {
		t.Errorf("logs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(sc.logs, "\n"))
	}
}

// TestSystemClockSlewsAcrossSteps: after the wall clock steps an hour
// forward or back, and is put right ten seconds later, the readings never go
// back nor jump, no window reopens early and none stays shut longer than the
// slew allows, and the readings reach the wall again within the bound.
func TestSystemClockSlewsAcrossSteps(t *testing.T) {
	t.Parallel()
	const msg = `level=WARN msg="wall clock stepped; slewing to it"`
	for _, sc := range []slewScenario{{
		name:   "forward an hour, then back",
		offset: stepThenBack(3*time.Second, 13*time.Second, time.Hour),
		settle: 13 * time.Second,
		total:  30 * time.Second,
		logs: []string{
			msg + " step=1h0m0s offset=1h0m0s catch_up=20h0m0s",
			msg + " step=-1h0m0s offset=-500ms catch_up=10s",
		},
	}, {
		name:   "back an hour, then forward",
		offset: stepThenBack(3*time.Second, 13*time.Second, -time.Hour),
		settle: 13 * time.Second,
		total:  30 * time.Second,
		logs: []string{
			msg + " step=-1h0m0s offset=-1h0m0s catch_up=20h0m0s",
			msg + " step=1h0m0s offset=500ms catch_up=10s",
		},
	}, {
		name:   "forward a minute for good",
		offset: stepAt(3*time.Second+10*time.Millisecond, time.Minute),
		settle: 3*time.Second + 10*time.Millisecond,
		total:  25 * time.Minute,
		logs:   []string{msg + " step=1m0s offset=1m0s catch_up=20m0s"},
	}, {
		name:   "back a minute for good",
		offset: stepAt(3*time.Second+10*time.Millisecond, -time.Minute),
		settle: 3*time.Second + 10*time.Millisecond,
		total:  25 * time.Minute,
		logs:   []string{msg + " step=-1m0s offset=-1m0s catch_up=20m0s"},
	}} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runSlew(t, sc)
		})
	}
}

// TestSystemClockAbsorbsDrift: the wall clock drifting at NTP's largest slew
// rate (500 ppm) either way, or stepping a few milliseconds, is followed
// without a log line, with the readings never more than the drift of one
// anchorAge off the wall, and a small step absorbed within the bound.
func TestSystemClockAbsorbsDrift(t *testing.T) {
	t.Parallel()
	const ppm500 = 2000 // 500 ppm is one part in 2,000
	for _, sc := range []slewScenario{{
		name:   "gaining 500 ppm",
		offset: func(m time.Duration) time.Duration { return m / ppm500 },
		total:  20 * time.Second,
		maxOff: anchorAge / ppm500,
	}, {
		name:   "losing 500 ppm",
		offset: func(m time.Duration) time.Duration { return -m / ppm500 },
		total:  20 * time.Second,
		maxOff: anchorAge / ppm500,
	}, {
		name:   "stepping 3 ms forward",
		offset: stepAt(2500*time.Millisecond, 3*time.Millisecond),
		settle: 2500 * time.Millisecond,
		total:  10 * time.Second,
		maxOff: 3 * time.Millisecond,
	}, {
		name:   "stepping 3 ms back",
		offset: stepAt(2500*time.Millisecond, -3*time.Millisecond),
		settle: 2500 * time.Millisecond,
		total:  10 * time.Second,
		maxOff: 3 * time.Millisecond,
	}} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runSlew(t, sc)
		})
	}
}
