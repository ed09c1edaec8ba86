package actors

import (
	"fmt"
	"testing"
)

// addrs returns n member ids that differ only in their port, as members on
// one host do.
func addrs(host string, port, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s:%d", host, port+i)
	}
	return ids
}

func TestPlacementSpreadIsFairOnNearIdenticalAddresses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		host string
		port int
	}{{"127.0.0.1", 12000}, {"127.0.0.1", 7946}, {"127.0.0.1", 8090}, {"127.0.0.1", 40001}, {"localhost", 9000}} {
		for _, n := range []int{3, 5} {
			ms := addrs(tc.host, tc.port, n)
			p := place(ms, 1024)
			counts := map[string]int{}
			for v := range 1024 {
				counts[p.of(v)]++
			}
			fair := 1024.0 / float64(n)
			for _, m := range ms {
				if c := float64(counts[m]); c < 0.85*fair || c > 1.15*fair {
					t.Errorf("%d members from %s:%d: %s holds %v of 1024 vshards, outside ±15%% of %.0f (all: %v)", n, tc.host, tc.port, m, c, fair, counts)
				}
			}
		}
	}
}

func TestPlacementJoinMovesOnlyToTheNewcomerAndLeaveOnlyTheLeavers(t *testing.T) {
	t.Parallel()
	three := addrs("127.0.0.1", 7000, 3)
	four := append(three[:3:3], "127.0.0.1:7003")
	before, after := place(three, 1024), place(four, 1024)
	moved := 0
	for v := range 1024 {
		if a, b := before.of(v), after.of(v); a != b {
			moved++
			if b != "127.0.0.1:7003" {
				t.Fatalf("vshard %d moved from %s to %s on a join, not to the newcomer", v, a, b)
			}
		}
	}
	if moved < 200 || moved > 312 {
		t.Fatalf("a join moved %d vshards, want about 256 (1024/4 ± 15%%)", moved)
	}
	// The newcomer leaves again: exactly its vshards move, each back.
	back := place(three, 1024)
	for v := range 1024 {
		if after.of(v) != "127.0.0.1:7003" && after.of(v) != back.of(v) {
			t.Fatalf("vshard %d of %s moved when another member left", v, after.of(v))
		}
		if back.of(v) != before.of(v) {
			t.Fatalf("vshard %d: placement is not a function of the members", v)
		}
	}
}

func TestPlacementIgnoresOrderAndDuplicates(t *testing.T) {
	t.Parallel()
	a := place([]string{"b", "a", "c"}, 64)
	b := place([]string{"c", "a", "b", "a"}, 64)
	for v := range 64 {
		if a.of(v) != b.of(v) {
			t.Fatalf("vshard %d: %s vs %s", v, a.of(v), b.of(v))
		}
	}
	if p := place(nil, 4); p.of(2) != "" {
		t.Fatalf("no members: got owner %q, want none", p.of(2))
	}
}
