// Package report holds what a comparison run measured and writes it out:
// RESULTS.md, with the machine, the versions, the commands, a table per
// section, ratios and the goals as PASS/MISS lines, and SVG charts under
// charts/ drawn with gonum.org/v1/plot. It computes nothing it was not
// given: every number comes from the run.
package report

import (
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/gobench"
	"github.com/ratelimitd/ratelimitd/bench/internal/scaling"
)

// LineHandoff is a cache line's time between two CPUs before a section.
type LineHandoff struct {
	Section string
	Time    time.Duration // 0: not measured (one CPU, or the probe timed out)
}

// Report is one run.
type Report struct {
	Mode     string // "short" or "full"
	Started  time.Time
	WallTime time.Duration
	Machine  Machine
	Versions []Version
	Commands []Command
	// LoadAvg is /proc/loadavg at the start and at the end of the run: how
	// busy the machine was besides this suite.
	LoadAvgStart, LoadAvgEnd string
	// LineHandoffs is how long a cache line took to pass between two
	// goroutines on two CPUs, measured before each section: how far apart
	// the machine's CPUs were then. A host may move a virtual machine's
	// CPUs between neighbouring cores and distant ones while it runs,
	// which changes every multi-core figure a section measures.
	LineHandoffs []LineHandoff
	Notes        []string

	// Sections; nil when not run (Skipped says why).
	HTTP     *HTTP
	RLS      *RLS
	Embedded *Embedded
	Memory   *Memory
	Sweep    *Sweep
	SweepLat *SweepLat
	Journal  *Journal
	InPkg    *InPkg
	RESP     *RESP
	Cluster  *Cluster
	Skipped  map[string]string // section name → why it was not run
}

// Machine describes the machine the run used.
type Machine struct {
	CPU        string
	Cores      int
	GOMAXPROCS int
	Kernel     string
	OS         string
	Go         string
	MemTotal   int64 // bytes
}

// Version is one peer's version.
type Version struct {
	Name, Version, How string
}

// Command is a command line and what it did.
type Command struct {
	What, Line string
}

// HTTP is section 1: every peer over HTTP, side by side.
type HTTP struct {
	Conns    int
	Rounds   int
	PerRound time.Duration
	Warmup   time.Duration
	Keys     int
	Peers    []HTTPPeer
}

// HTTPPeer is one peer's HTTP measurement.
type HTTPPeer struct {
	Name             string // as shown
	Short            string // chart label
	Ceiling          bool   // the bare handler
	Request          string // what one request is
	ChecksPerRequest int
	Requests         int64
	Elapsed          time.Duration
	P50, P99, P999   time.Duration
	ServerCPU        float64 // seconds during the measured rounds
	CPUSource        string  // how ServerCPU was read
	ClientCPU        float64 // seconds of the load client (this process)
	CDF              []CDFPoint
	// Error is why the peer has no numbers (skipped or failed).
	Error string
	// Verified is what the post-run check of the peer's counters found.
	Verified string
}

// CDFPoint is one point of a latency CDF.
type CDFPoint struct {
	Latency  time.Duration
	Fraction float64
}

// ReqPerSec returns requests per second.
func (p *HTTPPeer) ReqPerSec() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Requests) / p.Elapsed.Seconds()
}

// ChecksPerSec returns limit checks per second.
func (p *HTTPPeer) ChecksPerSec() float64 { return p.ReqPerSec() * float64(max(p.ChecksPerRequest, 1)) }

// CPUPer1kChecks returns the server's CPU seconds per 1,000 checks.
func (p *HTTPPeer) CPUPer1kChecks() float64 {
	checks := float64(p.Requests) * float64(max(p.ChecksPerRequest, 1))
	if checks == 0 {
		return 0
	}
	return p.ServerCPU / checks * 1000
}

// OK reports whether the peer has numbers.
func (p *HTTPPeer) OK() bool { return p.Error == "" && p.Requests > 0 }

// Embedded is section 2: in-process limiters side by side.
type Embedded struct {
	PerRun   time.Duration // per limiter, case and pass
	Passes   int
	Limiters []string // in column order, ratelimitd first
	Keys     []int
	Results  []EmbeddedResult
}

// EmbeddedResult is one limiter in one case.
type EmbeddedResult struct {
	Limiter     string
	Keys        int
	Dist        string
	Goroutines  int
	Checks      int64
	Elapsed     time.Duration
	AllocsPerOp float64
	Error       string
}

// PerSec returns checks per second.
func (r EmbeddedResult) PerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Checks) / r.Elapsed.Seconds()
}

// Memory is section 3a: memory per live bucket.
type Memory struct {
	Window     time.Duration
	Ratelimitd scaling.MemCurve
	Redis      scaling.MemCurve
	RedisError string // why Redis has no curve
}

// Sweep is section 3b: the sweep's cost.
type Sweep struct {
	VsExpired []scaling.SweepPoint // live fixed
	VsLive    []scaling.SweepPoint // expired fixed
}

// SweepLat is section 3c: check latency during a large sweep.
type SweepLat struct {
	scaling.SweepLatency
}

// Journal is section 3d: Check throughput per journal sync mode.
type Journal struct {
	Goroutines int
	Rounds     int
	PerRound   time.Duration
	Points     []scaling.JournalPoint
}

// InPkg is section 4: the ratelimitd module's own Go benchmarks, each
// package's `go test -bench` run as a child process in the module root.
type InPkg struct {
	// Runs are the invocations in the order they ran, with their results
	// summarized by family.
	Runs []gobench.Outcome
	// NotRun lists the command lines of the invocations the run's time
	// budget left no room for.
	NotRun []string
}

// Family returns the summary of the family with the given title, if a run
// has it.
func (p *InPkg) Family(title string) *gobench.Summary {
	if p == nil {
		return nil
	}
	for i := range p.Runs {
		for j := range p.Runs[i].Summaries {
			if s := &p.Runs[i].Summaries[j]; s.Title == title {
				return s
			}
		}
	}
	return nil
}
