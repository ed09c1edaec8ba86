package report

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/ratelimitd/ratelimitd/bench/internal/scaling"
)

// drawCharts draws every chart the report has data for into dir and
// returns their file names.
func drawCharts(dir string, r *Report) ([]string, error) {
	type chart struct {
		file string
		draw func() (*plot.Plot, vg.Length, vg.Length, error)
	}
	var cs []chart
	if h := r.HTTP; h != nil && len(okPeers(h)) > 0 {
		cs = append(cs,
			chart{"http_throughput.svg", func() (*plot.Plot, vg.Length, vg.Length, error) { return httpBars(h) }},
			chart{"http_latency_cdf.svg", func() (*plot.Plot, vg.Length, vg.Length, error) { return latencyCDF(h) }})
	}
	if s := r.RLS; s != nil && len(okPeers(&HTTP{Peers: s.Peers})) > 0 {
		cs = append(cs, chart{"rls_throughput.svg", func() (*plot.Plot, vg.Length, vg.Length, error) { return rlsBars(s) }})
	}
	if e := r.Embedded; e != nil && len(e.Results) > 0 {
		cs = append(cs, chart{"embedded_throughput.svg", func() (*plot.Plot, vg.Length, vg.Length, error) { return embeddedBars(e) }})
	}
	if m := r.Memory; m != nil && len(m.Ratelimitd.Points)+len(m.Redis.Points) > 0 {
		cs = append(cs, chart{"memory_per_bucket.svg", func() (*plot.Plot, vg.Length, vg.Length, error) { return memoryCurve(m) }})
	}
	if s := r.Sweep; s != nil {
		if len(s.VsExpired) > 0 {
			cs = append(cs, chart{"sweep_vs_expired.svg", func() (*plot.Plot, vg.Length, vg.Length, error) { return sweepVsExpired(s) }})
		}
		if len(s.VsLive) > 0 {
			cs = append(cs, chart{"sweep_vs_live.svg", func() (*plot.Plot, vg.Length, vg.Length, error) { return sweepVsLive(s) }})
		}
	}
	if x := r.RESP; hasRESPRuns(x) {
		cs = append(cs, chart{"resp_throughput.svg", func() (*plot.Plot, vg.Length, vg.Length, error) { return respBars(x) }})
	}
	var files []string
	for _, c := range cs {
		p, w, h, err := c.draw()
		if err != nil {
			return files, fmt.Errorf("chart %s: %w", c.file, err)
		}
		if err := save(p, w, h, filepath.Join(dir, c.file)); err != nil {
			return files, fmt.Errorf("chart %s: %w", c.file, err)
		}
		files = append(files, c.file)
	}
	return files, nil
}

// save writes p as an SVG. Its text is set in Liberation Serif, which is
// metric-compatible with Times New Roman, the usual fallback of viewers
// that lack it (embedding the fonts would add 0.5 MB per chart).
func save(p *plot.Plot, w, h vg.Length, path string) error {
	return p.Save(w, h, path)
}

// humanTicks are logarithmic ticks labelled 1k, 10k, 1M rather than 1e+06;
// over less than three decades the 2s and 5s are labelled too.
type humanTicks struct{}

func (humanTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	narrow := hi/lo < 1000
	for i, t := range ts {
		if t.Label != "" {
			ts[i].Label = human(t.Value)
			continue
		}
		m := t.Value / math.Pow(10, math.Floor(math.Log10(t.Value)+1e-9))
		if narrow && (math.Abs(m-2) < 1e-6 || math.Abs(m-5) < 1e-6) {
			ts[i].Label = human(t.Value)
		}
	}
	return ts
}

// linearTicks are ticks at a round step (1, 2 or 5 × 10^k) giving about
// five labelled ticks, labelled without trailing zeros.
type linearTicks struct{}

func (linearTicks) Ticks(lo, hi float64) []plot.Tick {
	if hi <= lo {
		return nil
	}
	mag := math.Pow(10, math.Floor(math.Log10((hi-lo)/5)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if (hi-lo)/(m*mag) <= 6 {
			step = m * mag
			break
		}
	}
	var ts []plot.Tick
	for k := math.Ceil(lo / step); k*step <= hi+step*1e-9; k++ {
		ts = append(ts, plot.Tick{Value: k * step, Label: human(k * step)})
	}
	return ts
}

// human formats a tick value: 0.5, 20, 1k, 10k, 1M.
func human(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func okPeers(h *HTTP) []*HTTPPeer {
	var ps []*HTTPPeer
	for i := range h.Peers {
		if h.Peers[i].OK() {
			ps = append(ps, &h.Peers[i])
		}
	}
	return ps
}

// palette is a fixed color per series index.
func palette(i int) color.Color { return plotutil.Color(i) }

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	return p
}

// httpBars: requests per second per peer.
func httpBars(h *HTTP) (*plot.Plot, vg.Length, vg.Length, error) {
	ps := okPeers(h)
	p := newPlot(fmt.Sprintf("HTTP requests/s, %d keep-alive connections, loopback", h.Conns), "", "requests per second")
	vals := make(plotter.Values, len(ps))
	names := make([]string, len(ps))
	for i, pe := range ps {
		vals[i] = pe.ReqPerSec()
		names[i] = pe.Short
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(40))
	if err != nil {
		return nil, 0, 0, err
	}
	bars.Color = palette(0)
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.NominalX(names...)
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: barTops(vals), Labels: rateLabels(vals)})
	if err != nil {
		return nil, 0, 0, err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].XAlign = draw.XCenter
	}
	p.Add(labels)
	p.X.Min, p.X.Max = -0.6, float64(len(vals))-0.4
	p.Y.Min = 0
	p.Y.Max *= 1.12
	p.Y.Tick.Marker = linearTicks{}
	return p, 7 * vg.Inch, 4 * vg.Inch, nil
}

func barTops(vals plotter.Values) plotter.XYs {
	xys := make(plotter.XYs, len(vals))
	for i, v := range vals {
		xys[i] = plotter.XY{X: float64(i), Y: v}
	}
	return xys
}

func rateLabels(vals plotter.Values) []string {
	ls := make([]string, len(vals))
	for i, v := range vals {
		ls[i] = rate(v)
	}
	return ls
}

// latencyCDF: the fraction of requests answered within a latency, per peer.
func latencyCDF(h *HTTP) (*plot.Plot, vg.Length, vg.Length, error) {
	p := newPlot("HTTP latency CDF (client side, under saturation)", "latency (ms, log scale)", "fraction of requests")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = humanTicks{}
	p.Y.Min, p.Y.Max = 0, 1
	p.Y.Tick.Marker = linearTicks{}
	for i, pe := range okPeers(h) {
		xys := make(plotter.XYs, 0, len(pe.CDF))
		for _, c := range pe.CDF {
			if ms := float64(c.Latency) / 1e6; ms > 0 {
				xys = append(xys, plotter.XY{X: ms, Y: c.Fraction})
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, 0, 0, err
		}
		l.Color = palette(i)
		l.Width = vg.Points(1.5)
		l.Dashes = plotutil.Dashes(i)
		p.Add(l)
		p.Legend.Add(pe.Short, l)
	}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(-10), vg.Points(10)
	return p, 7 * vg.Inch, 4.5 * vg.Inch, nil
}

// embeddedBars: checks per second, grouped by case, a bar per limiter.
func embeddedBars(e *Embedded) (*plot.Plot, vg.Length, vg.Length, error) {
	type key struct {
		keys       int
		dist       string
		goroutines int
	}
	var cases []key
	for _, k := range e.Keys {
		for _, c := range e.cases(k) {
			cases = append(cases, key{k, c.dist, c.goroutines})
		}
	}
	p := newPlot("Embedded checks/s (millions), per limiter", "keys / distribution / goroutines", "million checks per second")
	n := len(e.Limiters)
	w := vg.Points(max(4, 60/float64(n)))
	for li, name := range e.Limiters {
		vals := make(plotter.Values, len(cases))
		for ci, c := range cases {
			if r := e.find(name, c.keys, c.dist, c.goroutines); r != nil && r.Error == "" {
				vals[ci] = r.PerSec() / 1e6
			}
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, 0, 0, err
		}
		bars.Color = palette(li)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(float64(li)-float64(n-1)/2)
		p.Add(bars)
		p.Legend.Add(name, bars)
	}
	names := make([]string, len(cases))
	for i, c := range cases {
		d := c.dist
		switch {
		case strings.HasPrefix(d, "zipf"):
			d = "zipf"
		case d == "uniform":
			d = "unif"
		}
		names[i] = fmt.Sprintf("%s/%s/%d", count(c.keys), d, c.goroutines)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(cases))-0.4
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(10)
	p.Y.Min = 0
	p.Y.Max *= 1.45
	p.Y.Tick.Marker = linearTicks{}
	width := vg.Length(max(7, 1.0*float64(len(cases)))) * vg.Inch
	return p, width, 4.5 * vg.Inch, nil
}

// memoryCurve: bytes per live bucket against live buckets.
func memoryCurve(m *Memory) (*plot.Plot, vg.Length, vg.Length, error) {
	p := newPlot("Memory per live bucket", "live buckets (log scale)", "bytes per bucket (log scale)")
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = humanTicks{}, humanTicks{}
	for i, s := range []struct {
		name  string
		curve []memXY
	}{{"ratelimitd (Go heap after GC)", memXYs(m.Ratelimitd.Points)}, {"Redis (used_memory)", memXYs(m.Redis.Points)}} {
		if len(s.curve) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(s.curve))
		for j, c := range s.curve {
			xys[j] = plotter.XY{X: c.x, Y: c.y}
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, 0, 0, err
		}
		l.Color, pts.Color = palette(i), palette(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	p.Legend.Top = true
	p.Legend.XOffs = vg.Points(-10)
	return p, 7 * vg.Inch, 4.5 * vg.Inch, nil
}

type memXY struct{ x, y float64 }

func memXYs(pts []scaling.MemPoint) []memXY {
	xy := make([]memXY, 0, len(pts))
	for _, p := range pts {
		if p.PerBucket > 0 {
			xy = append(xy, memXY{float64(p.Buckets), p.PerBucket})
		}
	}
	return xy
}

// sweepVsExpired: the time of one sweep against the buckets it deleted.
func sweepVsExpired(s *Sweep) (*plot.Plot, vg.Length, vg.Length, error) {
	live := s.VsExpired[0].Live
	p := newPlot(fmt.Sprintf("Sweep time against expired buckets (%s live beside them)", count(live)),
		"expired buckets deleted (log scale)", "sweep time, ms (log scale)")
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = humanTicks{}, humanTicks{}
	xys := make(plotter.XYs, 0, len(s.VsExpired))
	for _, pt := range s.VsExpired {
		if pt.Took > 0 {
			xys = append(xys, plotter.XY{X: float64(pt.Expired), Y: float64(pt.Took) / 1e6})
		}
	}
	if err := addLine(p, xys, 0, "table.DeleteExpired"); err != nil {
		return nil, 0, 0, err
	}
	p.Legend.Top, p.Legend.Left = true, true
	return p, 7 * vg.Inch, 4.5 * vg.Inch, nil
}

// sweepVsLive: the cost per deleted bucket against the live buckets.
func sweepVsLive(s *Sweep) (*plot.Plot, vg.Length, vg.Length, error) {
	exp := s.VsLive[0].Expired
	p := newPlot(fmt.Sprintf("Sweep cost per deleted bucket against live buckets (%s expired)", count(exp)),
		"live buckets (log scale)", "ns per deleted bucket")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = humanTicks{}
	xys := make(plotter.XYs, 0, len(s.VsLive))
	top := 0.0
	for _, pt := range s.VsLive {
		xys = append(xys, plotter.XY{X: float64(pt.Live), Y: pt.NsPerDeleted()})
		top = max(top, pt.NsPerDeleted())
	}
	if err := addLine(p, xys, 1, "table.DeleteExpired"); err != nil {
		return nil, 0, 0, err
	}
	p.Y.Min, p.Y.Max = 0, top*1.4
	p.Y.Tick.Marker = linearTicks{}
	p.Legend.Top = true
	p.Legend.XOffs = vg.Points(-10)
	return p, 7 * vg.Inch, 4.5 * vg.Inch, nil
}

func addLine(p *plot.Plot, xys plotter.XYs, i int, name string) error {
	l, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	l.Color, pts.Color = palette(i), palette(i)
	pts.Shape = plotutil.Shape(i)
	p.Add(l, pts)
	p.Legend.Add(name, l, pts)
	return nil
}
