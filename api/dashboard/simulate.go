package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

// Bounds of POST /simulate.
const (
	// MaxSimHits is the most hits one simulation may send (each is
	// checked by all four algorithms).
	MaxSimHits = 100_000
	// MaxSimSpan is the most virtual time one simulation may cover.
	MaxSimSpan = 24 * time.Hour
	// MaxSimBuckets is the most buckets of time an answer may have.
	MaxSimBuckets = 2000
	// defaultSimBuckets is about how many buckets an answer has when the
	// request names no bucket width.
	defaultSimBuckets = 200
	// maxSimBody is the largest request body.
	maxSimBody = 16 << 10
)

// The traffic shapes of POST /simulate, and the parameters each takes.
var simShapes = map[string][]string{
	"steady":   {"rate", "duration"},
	"burst":    {"hits", "at", "every", "duration"},
	"ramp":     {"from_rate", "to_rate", "duration"},
	"boundary": {"before", "after", "offset", "duration"},
	"poisson":  {"rate", "duration", "seed"},
}

// simAlgorithms are the algorithms every simulation runs, in answer order.
var simAlgorithms = []table.Algorithm{table.FixedWindow, table.SlidingWindow, table.TokenBucket, table.LeakyBucket}

// simulation is a validated POST /simulate request.
type simulation struct {
	policy   table.Policy
	shape    string
	arrivals []time.Duration // offsets from the start, ascending
	span     time.Duration   // the chart covers [0, span)
	bucket   time.Duration
}

// SimResult is the answer of POST /simulate: what each algorithm admitted
// and denied, per bucket of virtual time.
type SimResult struct {
	Selected   string         `json:"selected"` // the algorithm the request named
	Shape      string         `json:"shape"`
	Hits       int            `json:"hits"`        // hits sent
	DurationMs float64        `json:"duration_ms"` // virtual time covered
	BucketMs   int64          `json:"bucket_ms"`   // width of a bucket
	Offered    []int          `json:"offered"`     // hits sent per bucket
	Algorithms []SimAlgorithm `json:"algorithms"`  // fixed_window, sliding_window, token_bucket, leaky_bucket
}

// SimAlgorithm is one algorithm's part of a SimResult.
type SimAlgorithm struct {
	Algorithm string `json:"algorithm"`
	Policy    string `json:"policy"` // as table.Policy.String writes it
	Admitted  int    `json:"admitted"`
	Denied    int    `json:"denied"`
	// AdmittedPerBucket and DeniedPerBucket have one count per bucket.
	AdmittedPerBucket []int `json:"admitted_per_bucket"`
	DeniedPerBucket   []int `json:"denied_per_bucket"`
}

// simBase returns the virtual time a simulation starts at: a whole number
// of scales since the epoch, so that fixed windows start with it.
func simBase(scale time.Duration) time.Time {
	ms := scale.Milliseconds()
	const around = 1_700_000_000_000 // Unix ms, a fixed date: answers do not depend on the clock
	return time.UnixMilli((around + ms - 1) / ms * ms)
}

// run simulates s on a fresh table per algorithm: no live state is read or
// changed.
func (s *simulation) run() SimResult {
	n := int((s.span + s.bucket - 1) / s.bucket)
	res := SimResult{
		Selected:   s.policy.Algorithm.String(),
		Shape:      s.shape,
		Hits:       len(s.arrivals),
		DurationMs: float64(s.span) / float64(time.Millisecond),
		BucketMs:   s.bucket.Milliseconds(),
		Offered:    make([]int, n),
	}
	for _, t := range s.arrivals {
		res.Offered[t/s.bucket]++
	}
	base := simBase(s.policy.Scale)
	for _, alg := range simAlgorithms {
		p := s.policy
		p.Algorithm = alg
		a := SimAlgorithm{Algorithm: alg.String(), Policy: p.String(), AdmittedPerBucket: make([]int, n), DeniedPerBucket: make([]int, n)}
		tb := table.New(table.Config{})
		req := table.Request{ID: "simulated", Policy: p, Hits: 1}
		for _, t := range s.arrivals {
			if tb.Apply(req, base.Add(t)).Allowed {
				a.Admitted++
				a.AdmittedPerBucket[t/s.bucket]++
			} else {
				a.Denied++
				a.DeniedPerBucket[t/s.bucket]++
			}
		}
		res.Algorithms = append(res.Algorithms, a)
	}
	return res
}

// fieldError is a 400 naming the field at fault and the rule it broke.
type fieldError struct{ field, rule string }

func (e *fieldError) Error() string {
	if e.field == "" {
		return e.rule
	}
	return e.field + ": " + e.rule
}

func errField(field, format string, args ...any) *fieldError {
	return &fieldError{field: field, rule: fmt.Sprintf(format, args...)}
}

// object decodes a JSON object into its members, refusing a member not
// in allowed (named prefix+member) and a repeated one.
func object(raw json.RawMessage, prefix string, allowed ...string) (map[string]json.RawMessage, error) {
	name := strings.TrimSuffix(prefix, ".")
	if name == "" {
		name = "body"
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errField(strings.TrimSuffix(prefix, "."), "%s must be a JSON object", name)
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errField(strings.TrimSuffix(prefix, "."), "%s is not valid JSON", name)
		}
		key := tok.(string) // inside an object, a token before a value is its key
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errField(prefix+key, "is not valid JSON")
		}
		if !slices.Contains(allowed, key) {
			return nil, errField(prefix+key, "is not a field here; the fields are %s", strings.Join(allowed, ", "))
		}
		if _, dup := m[key]; dup {
			return nil, errField(prefix+key, "is given twice")
		}
		m[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, errField(strings.TrimSuffix(prefix, "."), "%s is not valid JSON", name)
	}
	return m, nil
}

// parseSimulation validates a POST /simulate body.
func parseSimulation(body []byte) (*simulation, error) {
	if !json.Valid(body) {
		return nil, errField("", "the body is not valid JSON")
	}
	top, err := object(body, "", "policy", "traffic", "bucket")
	if err != nil {
		return nil, err
	}
	s := &simulation{}
	if s.policy, err = parseSimPolicy(top["policy"]); err != nil {
		return nil, err
	}
	if err := s.parseTraffic(top["traffic"]); err != nil {
		return nil, err
	}
	if raw, ok := top["bucket"]; ok {
		if s.bucket, err = durationField(raw, "bucket"); err != nil {
			return nil, err
		}
		switch {
		case s.bucket < time.Millisecond || s.bucket%time.Millisecond != 0:
			return nil, errField("bucket", "must be a whole number of milliseconds, at least 1ms")
		case (s.span+s.bucket-1)/s.bucket > MaxSimBuckets:
			return nil, errField("bucket", "makes more than %d buckets of the duration (%v)", MaxSimBuckets, s.span)
		}
	} else {
		s.bucket = niceBucket(s.span)
	}
	return s, nil
}

func parseSimPolicy(raw json.RawMessage) (table.Policy, error) {
	var p table.Policy
	if raw == nil {
		return p, errField("policy", "is required")
	}
	m, err := object(raw, "policy.", "algorithm", "limit", "scale", "burst")
	if err != nil {
		return p, err
	}
	if v, ok := m["algorithm"]; ok {
		name, err := stringField(v, "policy.algorithm")
		if err != nil {
			return p, err
		}
		if p.Algorithm, err = table.ParseAlgorithm(name); err != nil {
			return p, prefixed("policy.", err)
		}
	}
	if v, ok := m["limit"]; !ok {
		return p, errField("policy.limit", "is required")
	} else if p.Limit, err = intField(v, "policy.limit"); err != nil {
		return p, err
	}
	if v, ok := m["scale"]; !ok {
		return p, errField("policy.scale", "is required")
	} else if p.Scale, err = durationField(v, "policy.scale"); err != nil {
		return p, err
	}
	if v, ok := m["burst"]; ok {
		if p.Burst, err = intField(v, "policy.burst"); err != nil {
			return p, err
		}
	}
	// Every algorithm must take the policy, since all four run.
	for _, alg := range simAlgorithms {
		q := p
		q.Algorithm = alg
		if err := q.Validate(); err != nil {
			return p, prefixed("policy.", err)
		}
	}
	return p, nil
}

// prefixed names a table.FieldError's field under prefix.
func prefixed(prefix string, err error) error {
	if fe, ok := err.(*table.FieldError); ok {
		return errField(prefix+fe.Field, "%s", fe.Message)
	}
	return errField(strings.TrimSuffix(prefix, "."), "%v", err)
}

func (s *simulation) parseTraffic(raw json.RawMessage) error {
	if raw == nil {
		return errField("traffic", "is required")
	}
	shapes := make([]string, 0, len(simShapes))
	for name := range simShapes {
		shapes = append(shapes, name)
	}
	slices.Sort(shapes)
	all := []string{"shape"}
	for _, name := range shapes {
		for _, f := range simShapes[name] {
			if !slices.Contains(all, f) {
				all = append(all, f)
			}
		}
	}
	m, err := object(raw, "traffic.", all...)
	if err != nil {
		return err
	}
	v, ok := m["shape"]
	if !ok {
		return errField("traffic.shape", "is required: one of %s", strings.Join(shapes, ", "))
	}
	if s.shape, err = stringField(v, "traffic.shape"); err != nil {
		return err
	}
	params, ok := simShapes[s.shape]
	if !ok {
		return errField("traffic.shape", "must be one of %s", strings.Join(shapes, ", "))
	}
	for k := range m {
		if k != "shape" && !slices.Contains(params, k) {
			return errField("traffic."+k, "is not a parameter of the %s shape, which takes %s", s.shape, strings.Join(params, ", "))
		}
	}
	t := trafficParams{m: m}
	var dur time.Duration
	if s.shape != "burst" && s.shape != "boundary" {
		if dur, err = t.duration("duration", 0, true); err != nil {
			return err
		}
	}
	switch s.shape {
	case "steady":
		err = s.steady(&t, dur)
	case "burst":
		err = s.burst(&t)
	case "ramp":
		err = s.ramp(&t, dur)
	case "boundary":
		err = s.boundary(&t)
	case "poisson":
		err = s.poisson(&t, dur)
	}
	return err
}

// trafficParams reads the parameters of a shape.
type trafficParams struct{ m map[string]json.RawMessage }

// duration reads a duration parameter, def when absent (an error when
// required), and checks it is in [0, MaxSimSpan] (> 0 for duration).
func (t *trafficParams) duration(name string, def time.Duration, required bool) (time.Duration, error) {
	v, ok := t.m[name]
	if !ok {
		if required {
			return 0, errField("traffic."+name, "is required")
		}
		return def, nil
	}
	d, err := durationField(v, "traffic."+name)
	switch {
	case err != nil:
		return 0, err
	case d < 0 || d > MaxSimSpan:
		return 0, errField("traffic."+name, "must be between 0 and %v", MaxSimSpan)
	case name == "duration" && d == 0:
		return 0, errField("traffic.duration", "must be more than 0")
	}
	return d, nil
}

// rate reads a rate parameter in hits per second, def when absent.
func (t *trafficParams) rate(name string, def float64, required bool) (float64, error) {
	v, ok := t.m[name]
	if !ok {
		if required {
			return 0, errField("traffic."+name, "is required")
		}
		return def, nil
	}
	r, err := floatField(v, "traffic."+name)
	if err == nil && (r < 0 || r > MaxSimHits) {
		err = errField("traffic."+name, "must be between 0 and %d hits per second", MaxSimHits)
	}
	return r, err
}

// count reads a number of hits, def when absent.
func (t *trafficParams) count(name string, def int64, required bool) (int64, error) {
	v, ok := t.m[name]
	if !ok {
		if required {
			return 0, errField("traffic."+name, "is required")
		}
		return def, nil
	}
	n, err := intField(v, "traffic."+name)
	if err == nil && (n < 0 || n > MaxSimHits) {
		err = errField("traffic."+name, "must be between 0 and %d", MaxSimHits)
	}
	return n, err
}

// add appends an arrival, failing, naming field, past MaxSimHits.
func (s *simulation) add(t time.Duration, field string) error {
	if len(s.arrivals) == MaxSimHits {
		return errField("traffic."+field, "sends more than %d hits over the duration", MaxSimHits)
	}
	s.arrivals = append(s.arrivals, t)
	return nil
}

// steady: rate hits per second, evenly spaced from 0.
func (s *simulation) steady(t *trafficParams, dur time.Duration) error {
	rate, err := t.rate("rate", 0, true)
	if err != nil {
		return err
	}
	if rate == 0 {
		return errField("traffic.rate", "must be more than 0")
	}
	s.span = dur
	for k := 0; ; k++ {
		if err := s.addAt(float64(k)/rate, "rate"); err != nil {
			return ignoreEnd(err)
		}
	}
}

// errEnd ends a shape's arrivals: the next one would fall after the span.
var errEnd = &fieldError{rule: "the end of the duration"}

// addAt appends an arrival secs seconds from the start, or returns errEnd
// if that is not before the span's end, in floating point first so that
// no huge value is converted.
func (s *simulation) addAt(secs float64, field string) error {
	if !(secs < s.span.Seconds()) {
		return errEnd
	}
	at := time.Duration(math.Round(secs * float64(time.Second)))
	if at >= s.span {
		return errEnd
	}
	return s.add(at, field)
}

func ignoreEnd(err error) error {
	if err == errEnd {
		return nil
	}
	return err
}

// burst: hits at once, at at, and again every every (0: once) until the
// duration (default: at + 2 × scale, for a single burst).
func (s *simulation) burst(t *trafficParams) error {
	hits, err := t.count("hits", 0, true)
	if err != nil {
		return err
	}
	if hits == 0 {
		return errField("traffic.hits", "must be at least 1")
	}
	at, err := t.duration("at", 0, false)
	if err != nil {
		return err
	}
	every, err := t.duration("every", 0, false)
	if err != nil {
		return err
	}
	def := at + 2*s.policy.Scale
	if _, given := t.m["duration"]; !given && (every > 0 || def > MaxSimSpan) {
		return errField("traffic.duration", "is required (for a single burst, the default is at + 2 × scale, which must be at most %v)", MaxSimSpan)
	}
	if s.span, err = t.duration("duration", def, false); err != nil {
		return err
	}
	if at >= s.span {
		return errField("traffic.at", "must be before the end of the duration (%v)", s.span)
	}
	for b := at; b < s.span; b += every {
		for range hits {
			if err := s.add(b, "hits"); err != nil {
				return err
			}
		}
		if every == 0 {
			break
		}
	}
	return nil
}

// ramp: the rate goes linearly from from_rate to to_rate over the
// duration; hit k comes when the expected count reaches k.
func (s *simulation) ramp(t *trafficParams, dur time.Duration) error {
	r0, err := t.rate("from_rate", 0, false)
	if err != nil {
		return err
	}
	r1, err := t.rate("to_rate", 0, true)
	if err != nil {
		return err
	}
	if r0 == 0 && r1 == 0 {
		return errField("traffic.to_rate", "must be more than 0 when from_rate is 0")
	}
	s.span = dur
	secs := dur.Seconds()
	a, b := (r1-r0)/(2*secs), r0 // expected hits by t seconds: a·t² + b·t
	for k := 0; ; k++ {
		// The root of a·t² + b·t = k, in a form stable for a ≥ 0 and a < 0.
		disc := b*b + 4*a*float64(k)
		if disc < 0 {
			return nil // a falling rate that never reaches k
		}
		var ts float64
		if den := b + math.Sqrt(disc); den > 0 {
			ts = 2 * float64(k) / den
		} else if k > 0 {
			return nil
		}
		if err := s.addAt(ts, "to_rate"); err != nil {
			return ignoreEnd(err)
		}
	}
}

// boundary: before hits at offset before the first window boundary
// (scale), after hits at offset after it; by default limit−1 and limit,
// offset scale/20, duration 2 × scale.
func (s *simulation) boundary(t *trafficParams) error {
	scale := s.policy.Scale
	before, err := t.count("before", max(s.policy.Limit-1, 0), false)
	if err != nil {
		return err
	}
	after, err := t.count("after", min(s.policy.Limit, MaxSimHits), false)
	if err != nil {
		return err
	}
	offset, err := t.duration("offset", scale/20, false)
	if err != nil {
		return err
	}
	switch {
	case offset <= 0 || offset > scale:
		return errField("traffic.offset", "must be more than 0 and at most the scale (%v)", scale)
	case before+after > MaxSimHits:
		return errField("traffic.after", "before + after must be at most %d", MaxSimHits)
	}
	_, given := t.m["duration"]
	if !given && 2*scale > MaxSimSpan {
		return errField("traffic.duration", "is required: the default, 2 × scale, is more than %v", MaxSimSpan)
	}
	if s.span, err = t.duration("duration", 2*scale, false); err != nil {
		return err
	}
	if scale+offset >= s.span {
		return errField("traffic.duration", "must be more than scale + offset (%v), when the second part comes", scale+offset)
	}
	for range before {
		s.arrivals = append(s.arrivals, scale-offset)
	}
	for range after {
		s.arrivals = append(s.arrivals, scale+offset)
	}
	return nil
}

// poisson: arrivals at rate per second on average, at exponentially
// distributed gaps drawn from seed.
func (s *simulation) poisson(t *trafficParams, dur time.Duration) error {
	rate, err := t.rate("rate", 0, true)
	if err != nil {
		return err
	}
	if rate == 0 {
		return errField("traffic.rate", "must be more than 0")
	}
	seed := uint64(1)
	if v, ok := t.m["seed"]; ok {
		n, err := intField(v, "traffic.seed")
		if err != nil {
			return err
		}
		if n < 0 {
			return errField("traffic.seed", "must not be negative")
		}
		seed = uint64(n)
	}
	s.span = dur
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	for ts := rng.ExpFloat64() / rate; ; ts += rng.ExpFloat64() / rate {
		if err := s.addAt(ts, "rate"); err != nil {
			return ignoreEnd(err)
		}
	}
}

// niceBucket returns a bucket width of 1, 2 or 5 × 10^k ms giving about
// defaultSimBuckets buckets over span.
func niceBucket(span time.Duration) time.Duration {
	want := span / defaultSimBuckets
	for b := time.Millisecond; ; b *= 10 {
		for _, m := range []time.Duration{1, 2, 5} {
			if b*m >= want {
				return b * m
			}
		}
	}
}

// The field parsers: each names its field in the error.

func stringField(raw json.RawMessage, field string) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errField(field, "must be a string")
	}
	return s, nil
}

func intField(raw json.RawMessage, field string) (int64, error) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, errField(field, "must be an integer")
	}
	return n, nil
}

func floatField(raw json.RawMessage, field string) (float64, error) {
	var f float64
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) || json.Unmarshal(raw, &f) != nil {
		return 0, errField(field, "must be a number")
	}
	return f, nil
}

// durationField reads an integer number of milliseconds or a Go duration
// string such as "1s" or "1m30s".
func durationField(raw json.RawMessage, field string) (time.Duration, error) {
	const rule = `must be a number of milliseconds or a duration such as "1s" or "1m30s"`
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, errField(field, rule)
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, errField(field, rule)
		}
		return d, nil
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
		return 0, errField(field, rule)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
