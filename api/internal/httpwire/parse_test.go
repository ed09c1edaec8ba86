package httpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

func TestParseQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw       string
		Mode      Mode
		want      table.Request
		wantRule  string
		wantField string
	}{
		{"id=a&scale=30000&limit=500", ModeCheck, table.Request{ID: "a", Policy: table.Policy{Scale: 30 * time.Second, Limit: 500}, Hits: 1}, "", ""},
		{"limit=5&hits=0&scale=1m30s&id=b%2Fc", ModeCheck, table.Request{ID: "b/c", Policy: table.Policy{Scale: 90 * time.Second, Limit: 5}}, "", ""},
		{"id=a&scale=1&limit=9223372036854775807&hits=9223372036854775807", ModeCheck, table.Request{ID: "a", Policy: table.Policy{Scale: time.Millisecond, Limit: math.MaxInt64}, Hits: math.MaxInt64}, "", ""},
		{"id=a&scale=1&limit=1&algorithm=", ModeCheck, table.Request{ID: "a", Policy: table.Policy{Scale: time.Millisecond, Limit: 1}, Hits: 1}, "", ""},
		{"id=a&scale=1s&limit=3&algorithm=token_bucket&burst=5", ModeCheck, table.Request{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 3, Algorithm: table.TokenBucket, Burst: 5}, Hits: 1}, "", ""},
		{"id=a&scale=1s&limit=3&algorithm=leaky_bucket&burst=0", ModeCheck, table.Request{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 3, Algorithm: table.LeakyBucket}, Hits: 1}, "", ""},
		{"id=a&scale=1s&limit=3&algorithm=sliding_window", ModeCheck, table.Request{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 3, Algorithm: table.SlidingWindow}, Hits: 1}, "", ""},
		{"id=a&rule=login", ModeCheck, table.Request{ID: "a", Hits: 1}, "login", ""},
		{"rule=login&hits=0&id=a", ModeCheck, table.Request{ID: "a"}, "login", ""},
		{"id=a&scale=1&limit=0", ModeCheck, table.Request{}, "", "limit"},
		{"id=a&scale=1&limit=1&x", ModeCheck, table.Request{}, "", "x"},
		{"id=a&scale=1&limit=1&id", ModeCheck, table.Request{}, "", "id"},
		{"id=%&scale=1&limit=1", ModeCheck, table.Request{}, "", "id"},
		{"id=a&scale=1&limit=1&burst=-1", ModeCheck, table.Request{}, "", "burst"},
		{"id=a&scale=1&limit=1&burst=1&burst=2", ModeCheck, table.Request{}, "", "burst"},
		{"id=a&rule=", ModeCheck, table.Request{}, "", "rule"},
		{"rule=x", ModeCheck, table.Request{}, "", "id"},
		{"id=a&rule=x&scale=1s", ModeCheck, table.Request{}, "", "scale"},
		{"id=a&rule=x&limit=1", ModeCheck, table.Request{}, "", "limit"},
		{"id=a&rule=x&algorithm=fixed_window", ModeCheck, table.Request{}, "", "algorithm"},
		{"id=a&rule=x&burst=0", ModeCheck, table.Request{}, "", "burst"},
		{"id=a&rule=x&rule=y", ModeCheck, table.Request{}, "", "rule"},
		{"id=a&scale=1s&limit=3&hits=-3", ModeRefund, table.Request{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 3}, Hits: 3}, "", ""},
		{"id=a&rule=x&hits=%2D9223372036854775807", ModeRefund, table.Request{ID: "a", Hits: math.MaxInt64}, "x", ""},
		{"id=a&scale=1s&limit=3", ModeRefund, table.Request{}, "", "hits"},
		{"id=a&scale=1s&limit=3&hits=3", ModeRefund, table.Request{}, "", "hits"},
		{"id=a&scale=1s&limit=3&hits=-0", ModeRefund, table.Request{}, "", "hits"},
		{"id=a&scale=1s&limit=3&hits=-", ModeRefund, table.Request{}, "", "hits"},
		{"id=a&scale=1s&limit=3&hits=--3", ModeRefund, table.Request{}, "", "hits"},
		{"id=a&scale=1s&limit=3&hits=-9223372036854775808", ModeRefund, table.Request{}, "", "hits"},
		{"id=a&rule=x", ModeRefund, table.Request{}, "", "hits"},
		{"id=a&scale=1s&limit=3&hits=-1", ModeCheck, table.Request{}, "", "hits"},
		{"id=a&scale=1s&limit=3", ModeReset, table.Request{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 3}}, "", ""},
		{"id=a&rule=x", ModeReset, table.Request{ID: "a"}, "x", ""},
		{"id=a&scale=1s&limit=3&hits=1", ModeReset, table.Request{}, "", "hits"},
		{"id=a", ModeBuckets, table.Request{ID: "a"}, "", ""},
		{"id=a&scale=1s", ModeBuckets, table.Request{}, "", "scale"},
		{"", ModeBuckets, table.Request{}, "", "id"},
	}
	for _, tt := range tests {
		got, err := ParseQuery(tt.raw, tt.Mode)
		if tt.wantField != "" {
			var fe *table.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.wantField {
				t.Errorf("parseQuery(%q, %d): got err %v, want a field error on %q", tt.raw, tt.Mode, err, tt.wantField)
			}
			continue
		}
		if err != nil || got.Req != tt.want || got.Rule != tt.wantRule {
			t.Errorf("parseQuery(%q, %d): got %+v rule %q, %v, want %+v rule %q", tt.raw, tt.Mode, got.Req, got.Rule, err, tt.want, tt.wantRule)
		}
	}
}

// TestParseQueryMessages pins down the wording of the new rules.
func TestParseQueryMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw  string
		Mode Mode
		want string
	}{
		{"id=a&rule=x&scale=1s", ModeCheck, "scale: must not be given with rule: it comes from the rule"},
		{"id=a&scale=1s&limit=3&hits=3", ModeRefund, "hits: must be negative on a refund: the hits to give back, e.g. -3"},
		{"id=a&scale=1s&limit=3", ModeRefund, "hits: must be negative on a refund: the hits to give back, e.g. -3"},
		{"id=a&scale=1s&limit=3&burst=x", ModeCheck, "burst: must be an integer between 0 and 9223372036854775807"},
	}
	for _, tt := range tests {
		_, err := ParseQuery(tt.raw, tt.Mode)
		if err == nil || err.Error() != tt.want {
			t.Errorf("parseQuery(%q, %d): got err %v, want %q", tt.raw, tt.Mode, err, tt.want)
		}
	}
}

func TestParseJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body      string
		Mode      Mode
		want      []table.Request // one for an object
		wantBatch bool
		wantField string
	}{
		{`{"id":"a","scale":30000,"limit":500}`, ModeCheck, []table.Request{{ID: "a", Policy: table.Policy{Scale: 30 * time.Second, Limit: 500}, Hits: 1}}, false, ""},
		{`{"id":"a","scale":"30s","limit":500,"hits":0}`, ModeCheck, []table.Request{{ID: "a", Policy: table.Policy{Scale: 30 * time.Second, Limit: 500}}}, false, ""},
		{`{"id":"a","scale":1,"limit":1,"algorithm":"fixed_window"}`, ModeCheck, []table.Request{{ID: "a", Policy: table.Policy{Scale: time.Millisecond, Limit: 1}, Hits: 1}}, false, ""},
		{`{"id":"a","scale":1000,"limit":3,"algorithm":"token_bucket","burst":7}`, ModeCheck, []table.Request{{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 3, Algorithm: table.TokenBucket, Burst: 7}, Hits: 1}}, false, ""},
		{`{"id":"a","rule":"r"}`, ModeCheck, []table.Request{{ID: "a", Hits: 1}}, false, ""},
		{`[{"id":"a","scale":1000,"limit":3},{"id":"b","rule":"r","hits":2}]`, ModeCheck, []table.Request{{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 3}, Hits: 1}, {ID: "b", Hits: 2}}, true, ""},
		{` [ {"id":"a","scale":1000,"limit":3} ] `, ModeCheck, []table.Request{{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 3}, Hits: 1}}, true, ""},
		{`{"id":"a","scale":1000,"limit":3,"hits":-3}`, ModeRefund, []table.Request{{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 3}, Hits: 3}}, false, ""},
		{`{"id":"a","scale":1,"limit":1,"hits":-0}`, ModeCheck, nil, false, "hits"},
		{`{"id":"a","scale":1,"limit":1}]`, ModeCheck, nil, false, "body"},
		{`{"id":"a","scale":1,"limit":1`, ModeCheck, nil, false, "body"},
		{`{"id":"a","scale":1,"limit":1,"Hits":1}`, ModeCheck, nil, false, "Hits"},
		{`{"id":"a","scale":1,"limit":1,"burst":1.5}`, ModeCheck, nil, false, "burst"},
		{`{"id":"a","scale":1,"limit":1,"burst":"1"}`, ModeCheck, nil, false, "burst"},
		{`{"id":"a","rule":5}`, ModeCheck, nil, false, "rule"},
		{`{"":1}`, ModeCheck, nil, false, "body"},
		{`[{"id":"a","scale":1000,"limit":3,"":1}]`, ModeCheck, nil, false, "body"},
		{`{"id":"a","rule":"r","limit":5}`, ModeCheck, nil, false, "limit"},
		{`[]`, ModeCheck, nil, false, "checks"},
		{`[{"id":"a","scale":1000,"limit":3},{"id":"b","scale":1000}]`, ModeCheck, nil, false, "checks[1].limit"},
		{`[{"id":"a","scale":1000,"limit":3},5]`, ModeCheck, nil, false, "checks[1]"},
		{`[{"id":"a","scale":1000,"limit":3},{"id":"b","scale":1000,"limit":3,"x":1}]`, ModeCheck, nil, false, "checks[1].x"},
		{`[{"id":"a","scale":1000,"limit":3}`, ModeCheck, nil, false, "body"},
		{`[{"id":"a","scale":1000,"limit":3},]`, ModeCheck, nil, false, "body"},
		{`[{"id":"a","scale":1000,"limit":3}] []`, ModeCheck, nil, false, "body"},
		{`[{"id":"a","scale":1000,"limit":3}]`, ModeRefund, nil, false, "body"},
		{`{"id":"a","scale":1000,"limit":3,"hits":3}`, ModeRefund, nil, false, "hits"},
		{`{"id":"a","scale":1000,"limit":3,"hits":-3.0}`, ModeRefund, nil, false, "hits"},
		{`{"id":"a","scale":1000,"limit":3,"hits":"-3"}`, ModeRefund, nil, false, "hits"},
	}
	for _, tt := range tests {
		got, err := parseJSON(strings.NewReader(tt.body), tt.Mode)
		if tt.wantField != "" {
			var fe *table.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.wantField {
				t.Errorf("parseJSON(%q): got err %v, want a field error on %q", tt.body, err, tt.wantField)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseJSON(%q): got err %v, want %+v", tt.body, err, tt.want)
			continue
		}
		ps := []Params{got.One}
		if tt.wantBatch {
			ps = got.Batch
		} else if got.Batch != nil {
			t.Errorf("parseJSON(%q): got a batch, want one object", tt.body)
		}
		if len(ps) != len(tt.want) {
			t.Errorf("parseJSON(%q): got %d checks, want %d", tt.body, len(ps), len(tt.want))
			continue
		}
		for i := range ps {
			if ps[i].Req != tt.want[i] {
				t.Errorf("parseJSON(%q)[%d]: got %+v, want %+v", tt.body, i, ps[i].Req, tt.want[i])
			}
		}
	}
}

func TestParseJSONBatchSize(t *testing.T) {
	t.Parallel()
	elem := `{"id":"a","scale":1000,"limit":3}`
	batch := func(n int) string { return "[" + strings.Repeat(elem+",", n-1) + elem + "]" }
	got, err := parseJSON(strings.NewReader(batch(table.MaxBatch)), ModeCheck)
	if err != nil || len(got.Batch) != table.MaxBatch {
		t.Errorf("batch of %d: got %d checks, %v, want them all", table.MaxBatch, len(got.Batch), err)
	}
	_, err = parseJSON(strings.NewReader(batch(table.MaxBatch+1)), ModeCheck)
	var fe *table.FieldError
	if !errors.As(err, &fe) || fe.Field != "checks" || fe.Message != "must hold 1 to 1000 checks" {
		t.Errorf("batch of %d: got err %v, want checks: must hold 1 to 1000 checks", table.MaxBatch+1, err)
	}
	if n := len(batch(table.MaxBatch)); n > MaxBodyBytes {
		t.Errorf("a batch of %d small checks takes %d bytes, over MaxBodyBytes %d", table.MaxBatch, n, MaxBodyBytes)
	}
}

// testRules is the rule set the resolve tests and fuzzers check against.
func testRules(t testing.TB) *rules.Set {
	t.Helper()
	set, err := rules.NewSet([]rules.Rule{
		{Name: "login", Policy: table.Policy{Scale: 30 * time.Second, Limit: 5}},
		{Name: "tb", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: time.Second, Limit: 10, Burst: 20}},
		{Name: "zero", Policy: table.Policy{Scale: time.Second, Limit: 0}},
		{Name: "shadow", Policy: table.Policy{Scale: time.Second, Limit: 1}, Shadow: true},
		{Name: "toolong", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: table.MaxScale, Limit: 1, Burst: 2}},
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestResolve(t *testing.T) {
	t.Parallel()
	set := testRules(t)
	empty, err := rules.NewSet(nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		raw       string
		set       *rules.Set
		want      table.Request
		wantRule  string
		wantField string
		wantErr   string
	}{
		{"ad hoc", "id=a&scale=1s&limit=2", set, table.Request{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 2}, Hits: 1}, "", "", ""},
		{"ad hoc without rules", "id=a&scale=1s&limit=2", nil, table.Request{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 2}, Hits: 1}, "", "", ""},
		{"rule", "id=a&rule=login&hits=2", set, table.Request{ID: "a", Policy: table.Policy{Scale: 30 * time.Second, Limit: 5}, Hits: 2, Namespace: "login"}, "login", "", ""},
		{"rule with burst", "id=a&rule=tb", set, table.Request{ID: "a", Policy: table.Policy{Scale: time.Second, Limit: 10, Burst: 20, Algorithm: table.TokenBucket}, Hits: 1, Namespace: "tb"}, "tb", "", ""},
		{"rule limit 0", "id=a&rule=zero", set, table.Request{ID: "a", Policy: table.Policy{Scale: time.Second}, Hits: 1, Namespace: "zero"}, "zero", "", ""},
		{"unknown rule", "id=a&rule=nope", set, table.Request{}, "", "rule", "rule: is not a configured rule"},
		{"no store", "id=a&rule=login", nil, table.Request{}, "", "rule", "rule: no rules are configured"},
		{"empty set", "id=a&rule=login", empty, table.Request{}, "", "rule", "rule: is not a configured rule"},
		{"rule the table cannot take", "id=a&rule=toolong", set, table.Request{}, "", "rule", ""},
	}
	for _, tt := range tests {
		p, err := ParseQuery(tt.raw, ModeCheck)
		if err != nil {
			t.Fatalf("%s: parseQuery(%q): %v", tt.name, tt.raw, err)
		}
		got, rule, err := Resolve(&p, tt.set)
		if tt.wantField != "" {
			var fe *table.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.wantField || (tt.wantErr != "" && err.Error() != tt.wantErr) {
				t.Errorf("%s: got err %v, want a field error on %q (%q)", tt.name, err, tt.wantField, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want || rule.Name != tt.wantRule {
			t.Errorf("%s: got %+v rule %q, %v, want %+v rule %q", tt.name, got, rule.Name, err, tt.want, tt.wantRule)
		}
	}
}

// checkParsed is the property both parsers keep, after resolve against
// testRules: a valid Request (with a positive limit when ad hoc, in the
// rule's namespace when by rule), or a *table.FieldError naming a field.
// For modeBuckets, a valid id and nothing else.
func checkParsed(t *testing.T, in string, md Mode, set *rules.Set, p Params, err error) {
	t.Helper()
	if md == ModeBuckets && err == nil {
		if p.Req.ID == "" || len(p.Req.ID) > table.MaxIDLen || !utf8.ValidString(p.Req.ID) || p.Rule != "" || p.seen != seenID {
			t.Fatalf("%q: got buckets parameters %+v, want an id alone", in, p)
		}
		return
	}
	var req table.Request
	var rule rules.Rule
	if err == nil {
		req, rule, err = Resolve(&p, set)
	}
	if err != nil {
		var fe *table.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("%q: got error %T %v, want a *table.FieldError", in, err, err)
		}
		if fe.Message == "" || fe.Field == "" {
			t.Fatalf("%q: got field error %+v without a field or rule", in, fe)
		}
		if !errors.Is(err, table.ErrInvalid) {
			t.Fatalf("%q: got error %v not matching table.ErrInvalid", in, err)
		}
		if req != (table.Request{}) {
			t.Fatalf("%q: got request %+v with error %v, want the zero Request", in, req, err)
		}
		return
	}
	// The one fault left to the Checker is the one tableErr reports.
	if verr, terr := req.Validate(), p.tableErr(); fmt.Sprint(verr) != fmt.Sprint(terr) {
		t.Fatalf("%q: got request %+v failing Validate with %v, want %v (tableErr)", in, req, verr, terr)
	}
	switch {
	case p.Rule == "" && (req.Limit <= 0 || req.Namespace != ""):
		t.Fatalf("%q: got ad-hoc request %+v, want a positive limit and no namespace", in, req)
	case p.Rule != "" && (req.Namespace != rule.Name || rule.Name != p.Rule):
		t.Fatalf("%q: got request %+v by rule %q, want it in namespace %q", in, req, rule.Name, p.Rule)
	}
}

var querySeeds = []string{
	"",
	"id=a&scale=30000&limit=500",
	"id=a&scale=30s&limit=500&hits=0&algorithm=fixed_window",
	"id=a%20b+c&scale=1m30s&limit=5&hits=2",
	"id=&scale=0&limit=0",
	"id=a&id=b",
	"id=a&scale=1.5ms&limit=1",
	"id=a&scale=99999999999999999999&limit=9223372036854775808",
	"id=a&scale=1000&limit=-1&hits=1.5",
	"id=%zz&scale=1000&limit=1",
	"%zz=1",
	"=1&&&",
	"id=a;b&scale=1000&limit=1",
	"foo=bar",
	"id=\xff\x00&scale=1&limit=1",
	"id=a&scale=1s&limit=3&algorithm=token_bucket&burst=5",
	"id=a&scale=8784h&limit=1&algorithm=leaky_bucket&burst=9223372036854775807",
	"id=a&scale=1s&limit=3&algorithm=sliding_window&burst=-1",
	"id=a&rule=login",
	"id=a&rule=login&scale=1s",
	"id=a&rule=nope&hits=0",
	"id=a&rule=toolong",
	"id=a&rule=&rule=",
	"id=a&ru%6Ce=tb",
	"id=%ff&scale=1000&limit=1",
	"id=%c3%28&scale=1000&limit=1",
	"id=a%ed%a0%80&rule=login",
	"id=%ef%bf%bd&scale=1000&limit=1",
	"id=%f0%9f%98%80&rule=login",
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range querySeeds {
		f.Add(s, uint8(ModeCheck))
		f.Add(s+"&hits=-2", uint8(ModeRefund))
	}
	f.Add("id=a&rule=login", uint8(ModeReset))
	f.Add("id=a", uint8(ModeBuckets))
	set := testRules(f)
	f.Fuzz(func(t *testing.T, raw string, m uint8) {
		md := Mode(m) % (ModeBuckets + 1)
		p, err := ParseQuery(raw, md)
		checkParsed(t, raw, md, set, p, err)
		if err != nil {
			return
		}
		if md == ModeRefund && p.Req.Hits <= 0 {
			t.Fatalf("%q: got refund of %d hits, want a positive number", raw, p.Req.Hits)
		}
		// Agree with url.ParseQuery wherever it accepts the query.
		vals, uerr := url.ParseQuery(raw)
		if uerr != nil {
			return
		}
		if got := vals["id"]; len(got) != 1 || got[0] != p.Req.ID {
			t.Fatalf("%q: got id %q, url.ParseQuery has %q", raw, p.Req.ID, got)
		}
		if got := vals["rule"]; (len(got) == 1) != (p.Rule != "") || len(got) == 1 && got[0] != p.Rule {
			t.Fatalf("%q: got rule %q, url.ParseQuery has %q", raw, p.Rule, got)
		}
		for k, v := range vals {
			if len(v) != 1 {
				t.Fatalf("%q: accepted %d values of %q", raw, len(v), k)
			}
		}
	})
}

var jsonSeeds = []string{
	`{"id":"a","scale":30000,"limit":500}`,
	`{"id":"a","scale":"30s","limit":500,"hits":0,"algorithm":"fixed_window"}`,
	`{"id":"a\u0000\n\"","scale":"1m30s","limit":5,"hits":2}`,
	`{"id":"a","scale":1.5,"limit":1e3}`,
	`{"id":"a","scale":-1,"limit":-1,"hits":-1}`,
	`{"id":"a","id":"b"}`,
	`{"foo":1}`,
	`{"id":"a","scale":1000,"limit":1}{}`,
	`{"id":"a","scale":1000,"limit":1} x`,
	`{"id":`,
	`[]`,
	`null`,
	``,
	`{"id":null,"scale":null,"limit":null,"hits":null,"algorithm":null,"burst":null,"rule":null}`,
	`{"id":"a","scale":99999999999999999999,"limit":9223372036854775808}`,
	"{\"id\":\"\xff\",\"scale\":1,\"limit\":1}",
	`{"id":"a","scale":1000,"limit":3,"algorithm":"token_bucket","burst":5}`,
	`{"id":"a","rule":"login","hits":-3}`,
	`{"id":"a","rule":"tb","burst":1}`,
	`[{"id":"a","scale":1000,"limit":3},{"id":"b","rule":"login"}]`,
	`[{"id":"a","scale":1000,"limit":3},{"id":"b","rule":"nope"}]`,
	`[{"id":"a","scale":1000,"limit":3},[]]`,
	`[{"id":"a","scale":1000,"limit":3}`,
	`[{}]`,
	`[[{"id":"a"}]]`,
	`{""`,
	`[{"":1}]`,
	`{"id":"\udc00","scale":1000,"limit":3}`,
	`{"id":"\ud83d\ude00","rule":"login","hits":-1}`,
	"[{\"id\":\"a\",\"rule\":\"login\"},{\"id\":\"\x80\",\"rule\":\"login\"}]",
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s), uint8(ModeCheck))
		f.Add([]byte(s), uint8(ModeRefund))
	}
	set := testRules(f)
	f.Fuzz(func(t *testing.T, body []byte, m uint8) {
		md := Mode(m) % (ModeBuckets + 1)
		got, err := parseJSON(bytes.NewReader(body), md)
		if err == nil && !json.Valid(body) {
			t.Fatalf("%q: accepted invalid JSON as %+v", body, got)
		}
		if got.Batch == nil {
			checkParsed(t, string(body), md, set, got.One, err)
			return
		}
		if md != ModeCheck {
			t.Fatalf("%q: got a batch in mode %d, want batches on check_rate only", body, md)
		}
		if len(got.Batch) < 1 || len(got.Batch) > table.MaxBatch {
			t.Fatalf("%q: got a batch of %d, want 1 to %d", body, len(got.Batch), table.MaxBatch)
		}
		for _, p := range got.Batch {
			checkParsed(t, string(body), md, set, p, nil)
		}
	})
}
