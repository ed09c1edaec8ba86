package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/keys"
)

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"--save", "", "--dir", "/tmp/a b", "it's"})
	if want := `--save '' --dir '/tmp/a b' 'it'\''s'`; got != want {
		t.Errorf("shellJoin = %s, want %s", got, want)
	}
}

func TestCDF(t *testing.T) {
	lat := make([]time.Duration, 1000)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Microsecond
	}
	pts := cdf(lat)
	if len(pts) != 104 {
		t.Fatalf("%d points, want 104", len(pts))
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].Fraction <= pts[i-1].Fraction || pts[i].Latency < pts[i-1].Latency {
			t.Fatalf("point %d %+v does not follow %+v", i, pts[i], pts[i-1])
		}
	}
	if first, last := pts[0], pts[len(pts)-1]; first.Latency != time.Microsecond || last.Latency != time.Millisecond || last.Fraction != 1 {
		t.Errorf("first %+v, last %+v", first, last)
	}
	if cdf(nil) != nil {
		t.Error("cdf(nil) != nil")
	}
}

func TestRequests(t *testing.T) {
	paths := getPaths()
	if len(paths) != httpKeys || paths[7] != "/check_rate?id=user-7&scale=3600000&limit=1000000000000" {
		t.Errorf("getPaths: %d paths, [7] = %q", len(paths), paths[7])
	}
	seen := map[string]bool{}
	for _, b := range batchBodies() {
		var checks []struct {
			ID    string `json:"id"`
			Scale int64  `json:"scale"`
			Limit int64  `json:"limit"`
		}
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatal(err)
		}
		if len(checks) != batchSize {
			t.Fatalf("a batch of %d checks, want %d", len(checks), batchSize)
		}
		for _, c := range checks {
			if seen[c.ID] || c.Scale != httpScaleMs || c.Limit != httpLimit {
				t.Errorf("check %+v repeated or wrong", c)
			}
			seen[c.ID] = true
		}
	}
	if len(seen) != httpKeys || !seen[keys.ID(0)] || !seen[keys.ID(httpKeys-1)] {
		t.Errorf("batches cover %d ids, want all %d", len(seen), httpKeys)
	}
	if g := gubernatorBodies(); len(g) != httpKeys {
		t.Errorf("%d gubernator bodies", len(g))
	}
}
