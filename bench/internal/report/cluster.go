package report

import (
	"fmt"
	"time"
)

// Cluster is section 6: cluster mode over HTTP against a single node, and
// the cost of a handoff.
type Cluster struct {
	Members  int
	Conns    int
	Rounds   int
	PerRound time.Duration
	Warmup   time.Duration
	Keys     int
	// Peers: the single node, one member of the cluster loaded alone, and
	// every member round-robin, ServerCPU summed over all the members.
	Peers []HTTPPeer
	// Forwarded and Batches are the checks the members forwarded, and the
	// batches that carried them, during the cluster's rounds (one member
	// and round-robin, their warm-ups included).
	Forwarded, Batches int64
	// Direct is one member loaded alone with the ids it owns against the
	// ids the other members own, in alternating rounds of their own.
	Direct  *DirectForward
	Handoff *Handoff
	Error   string // why the section has no numbers
}

// DirectForward is the cost of a forwarded check against a local one,
// measured on the same members: one member loaded alone, once with the
// ids it decides itself and once with the ids the others own, the server
// CPU summed over every member.
type DirectForward struct {
	LocalIDs, ForwardedIDs int // of the section's ids
	// Peers: ShortLocalIDs and ShortForwardedIDs.
	Peers []HTTPPeer
	// Forwarded and Batches are the checks the loaded member forwarded,
	// and the batches that carried them, during these rounds.
	Forwarded, Batches int64
	Error              string
}

// Cluster peer roles, as HTTPPeer.Short.
const (
	ShortSingle     = "single node"
	ShortOneMember  = "one member"
	ShortRoundRobin = "round-robin"

	ShortLocalIDs     = "local ids"
	ShortForwardedIDs = "forwarded ids"
)

// peer returns d's peer with the given Short label, if it has numbers.
func (d *DirectForward) peer(short string) *HTTPPeer {
	if d == nil {
		return nil
	}
	return peerOf(d.Peers, short)
}

// Cost is the CPU per forwarded check ÷ the CPU per local check, both
// summed over the members, and the checks per forwarded batch.
func (d *DirectForward) Cost() (x, perBatch float64, ok bool) {
	l, f := d.peer(ShortLocalIDs), d.peer(ShortForwardedIDs)
	if l == nil || f == nil || l.CPUPer1kChecks() == 0 || f.CPUPer1kChecks() == 0 {
		return 0, 0, false
	}
	if d.Batches > 0 {
		perBatch = float64(d.Forwarded) / float64(d.Batches)
	}
	return f.CPUPer1kChecks() / l.CPUPer1kChecks(), perBatch, true
}

// Handoff is the cost of moving vshards with their buckets: a member that
// held every vshard hands its share to a member that joins.
type Handoff struct {
	Buckets  int           // buckets held before the join
	VShards  int64         // vshards handed off
	Moved    int64         // buckets they carried
	Handoffs int64         // handoff batches
	Time     time.Duration // fence to commit, summed over the batches
	Error    string
}

// Peer returns the cluster peer with the given Short label, if it has numbers.
func (c *Cluster) Peer(short string) *HTTPPeer {
	if c == nil {
		return nil
	}
	return peerOf(c.Peers, short)
}

// ForwardedShare is the share of the cluster's checks that were forwarded.
func (c *Cluster) ForwardedShare() float64 {
	one, rr := c.Peer(ShortOneMember), c.Peer(ShortRoundRobin)
	if one == nil || rr == nil || one.Requests+rr.Requests == 0 {
		return 0
	}
	return min(float64(c.Forwarded)/float64(one.Requests+rr.Requests), 1)
}

// DerivedForwardCost is the CPU of a forwarded check ÷ the CPU of a local
// one as the round-robin rows imply it, taking the single node's CPU per
// check for a local check's: the round-robin CPU per check is that plus,
// for the share forwarded, the cost of forwarding. Three members and the
// single node do not run alike on shared cores, so this is an estimate;
// Direct measures the cost on the same members.
func (c *Cluster) DerivedForwardCost() (float64, bool) {
	single, rr := c.Peer(ShortSingle), c.Peer(ShortRoundRobin)
	share := c.ForwardedShare()
	if single == nil || rr == nil || share == 0 || single.CPUPer1kChecks() == 0 {
		return 0, false
	}
	local := single.CPUPer1kChecks()
	return (local + (rr.CPUPer1kChecks()-local)/share) / local, true
}

// GoalClusterForward is the goal of a forwarded check's cost.
const GoalClusterForward = "cluster-forward"

func clusterGoal(c *Cluster) Goal {
	g := Goal{ID: GoalClusterForward, Name: "cluster mode: a forwarded check costs ≤ 2× the CPU of a local check (one member loaded alone, the ids other members own against the ids it owns, CPU summed over the members)", Target: "≤ 2×", Status: NotMeasured}
	if c == nil || c.Direct == nil {
		return g
	}
	if x, per, ok := c.Direct.Cost(); ok {
		g.Status = status(x <= 2)
		g.Measured = fmt.Sprintf("%.3f vs %.3f CPU s per 1k checks, %.1f checks per forwarded batch: %.2f×",
			c.Direct.peer(ShortForwardedIDs).CPUPer1kChecks(), c.Direct.peer(ShortLocalIDs).CPUPer1kChecks(), per, x)
		if y, ok := c.DerivedForwardCost(); ok {
			g.Measured += fmt.Sprintf(" (derived from round-robin over %d members against the single node: %.2f×)", c.Members, y)
		}
	}
	return g
}

func perBatch(c *Cluster) float64 {
	if c.Batches == 0 {
		return 0
	}
	return float64(c.Forwarded) / float64(c.Batches)
}

func (b *md) clusterSection(r *Report) {
	b.p("## 6. Cluster mode")
	b.p("")
	if b.skipped(r, "cluster") || r.Cluster == nil {
		return
	}
	c := r.Cluster
	if c.Error != "" {
		b.p("Not run: %s.", c.Error)
		b.p("")
		return
	}
	b.p("A single-node daemon, and %d daemons in one cluster (a real etcd, `--cluster-etcd`, 1024 vshards), all on these cores;", c.Members)
	b.p("the load client as in section 1 (%d connections, %s ids, a %s warm-up, %d rounds of %s, rotating). \"one member\" loads one", c.Conns, count(c.Keys), c.Warmup, c.Rounds, c.PerRound)
	b.p("member only; \"round-robin\" spreads the connections over every member. Most checks are forwarded to the member")
	b.p("that owns their vshard; the server CPU of the cluster rows is summed over all its members.")
	b.p("")
	b.table([]string{"", "req/s", "p50", "p99", "p99.9", "server CPU s per 1k checks", "÷ single node"}, peerRows(c.Peers, c.Peer(ShortSingle)))
	b.p("During the cluster's rounds (warm-ups included) the members forwarded %s checks in %s batches: %.1f checks per batch (%.0f%% of the checks).",
		count(int(c.Forwarded)), count(int(c.Batches)), perBatch(c), 100*c.ForwardedShare())
	if x, ok := c.DerivedForwardCost(); ok {
		b.p("Derived from these rows, a forwarded check costs %.2f× the CPU of a local one (the round-robin CPU per check taken as the single node's plus, for the share forwarded, the forwarding's).", x)
	}
	b.p("")
	if d := c.Direct; d != nil {
		b.directSection(c, d)
	}
	if h := c.Handoff; h != nil {
		b.p("Handoff: a member holding %s buckets in all 1024 vshards hands its share to a member that joins.", count(h.Buckets))
		switch {
		case h.Error != "":
			b.p("Not measured: %s.", h.Error)
		case h.VShards > 0 && h.Moved > 0:
			b.p("%d vshards with %s buckets moved in %d handoffs, %s from fence to commit in all: %s per vshard, %s per 100k buckets,",
				h.VShards, count(int(h.Moved)), h.Handoffs, dur(h.Time), dur(h.Time/time.Duration(h.VShards)), dur(time.Duration(float64(h.Time)*1e5/float64(h.Moved))))
			b.p("%s per handoff (a moving vshard's pause).", dur(h.Time/time.Duration(max(h.Handoffs, 1))))
		}
		b.p("")
	}
}

// directSection reports a forwarded check's cost measured on the same
// members.
func (b *md) directSection(c *Cluster, d *DirectForward) {
	b.p("Forwarded against local on the same members: member 0 loaded alone (%d connections), in alternating rounds as above,", c.Conns)
	b.p("once with the %d of the %s ids whose vshards it owns and once with the %d the other members own; the server", d.LocalIDs, count(c.Keys), d.ForwardedIDs)
	b.p("CPU is summed over all %d members in both.", c.Members)
	b.p("")
	if d.Error != "" {
		b.p("Not measured: %s.", d.Error)
		b.p("")
		return
	}
	b.table([]string{"", "req/s", "p50", "p99", "p99.9", "server CPU s per 1k checks", "÷ its own ids"}, peerRows(d.Peers, d.peer(ShortLocalIDs)))
	if x, per, ok := d.Cost(); ok {
		b.p("A forwarded check costs %.2f× the CPU of a local one; member 0 forwarded %s checks in %s batches in these rounds, warm-ups included (%.1f per batch).",
			x, count(int(d.Forwarded)), count(int(d.Batches)), per)
	}
	b.p("")
}

// peerRows are the table rows of cluster peers, each one's CPU per check
// divided by base's (if base has numbers).
func peerRows(peers []HTTPPeer, base *HTTPPeer) [][]string {
	var rows [][]string
	for i := range peers {
		p := &peers[i]
		if !p.OK() {
			rows = append(rows, []string{p.Name, "—", "—", "—", "—", "—", "not run: " + p.Error})
			continue
		}
		ratio := "—"
		if base != nil {
			ratio = fmt.Sprintf("%.2f×", p.CPUPer1kChecks()/base.CPUPer1kChecks())
		}
		rows = append(rows, []string{p.Name, rate(p.ReqPerSec()), dur(p.P50), dur(p.P99), dur(p.P999), fmt.Sprintf("%.3f", p.CPUPer1kChecks()), ratio})
	}
	return rows
}
