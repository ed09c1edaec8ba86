package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

func TestParseQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw       string
		want      table.Request
		wantField string
	}{
		{"id=a&scale=30000&limit=500", table.Request{ID: "a", Scale: 30 * time.Second, Limit: 500, Hits: 1}, ""},
		{"limit=5&hits=0&scale=1m30s&id=b%2Fc", table.Request{ID: "b/c", Scale: 90 * time.Second, Limit: 5}, ""},
		{"id=a&scale=1&limit=9223372036854775807&hits=9223372036854775807", table.Request{ID: "a", Scale: time.Millisecond, Limit: math.MaxInt64, Hits: math.MaxInt64}, ""},
		{"id=a&scale=1&limit=1&algorithm=", table.Request{ID: "a", Scale: time.Millisecond, Limit: 1, Hits: 1}, ""},
		{"id=a&scale=1&limit=0", table.Request{}, "limit"},
		{"id=a&scale=1&limit=1&x", table.Request{}, "x"},
		{"id=a&scale=1&limit=1&id", table.Request{}, "id"},
		{"id=%&scale=1&limit=1", table.Request{}, "id"},
	}
	for _, tt := range tests {
		got, err := parseQuery(tt.raw)
		if tt.wantField != "" {
			var fe *table.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.wantField {
				t.Errorf("parseQuery(%q): got err %v, want a field error on %q", tt.raw, err, tt.wantField)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseQuery(%q): got %+v, %v, want %+v", tt.raw, got, err, tt.want)
		}
	}
}

func TestParseJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body      string
		want      table.Request
		wantField string
	}{
		{`{"id":"a","scale":30000,"limit":500}`, table.Request{ID: "a", Scale: 30 * time.Second, Limit: 500, Hits: 1}, ""},
		{`{"id":"a","scale":"30s","limit":500,"hits":0}`, table.Request{ID: "a", Scale: 30 * time.Second, Limit: 500}, ""},
		{`{"id":"a","scale":1,"limit":1,"algorithm":"fixed_window"}`, table.Request{ID: "a", Scale: time.Millisecond, Limit: 1, Hits: 1}, ""},
		{`{"id":"a","scale":1,"limit":1,"hits":-0}`, table.Request{}, "hits"},
		{`{"id":"a","scale":1,"limit":1}]`, table.Request{}, "body"},
		{`{"id":"a","scale":1,"limit":1`, table.Request{}, "body"},
		{`{"id":"a","scale":1,"limit":1,"Hits":1}`, table.Request{}, "Hits"},
	}
	for _, tt := range tests {
		got, err := parseJSON(strings.NewReader(tt.body))
		if tt.wantField != "" {
			var fe *table.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.wantField {
				t.Errorf("parseJSON(%q): got err %v, want a field error on %q", tt.body, err, tt.wantField)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseJSON(%q): got %+v, %v, want %+v", tt.body, got, err, tt.want)
		}
	}
}

// checkParsed is the property both parsers keep: a valid Request with a
// positive limit, or a *table.FieldError naming a field.
func checkParsed(t *testing.T, in string, req table.Request, err error) {
	t.Helper()
	if err != nil {
		var fe *table.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("%q: got error %T %v, want a *table.FieldError", in, err, err)
		}
		if fe.Rule == "" {
			t.Fatalf("%q: got field error %+v without a rule", in, fe)
		}
		if !errors.Is(err, table.ErrInvalid) {
			t.Fatalf("%q: got error %v not matching table.ErrInvalid", in, err)
		}
		if req != (table.Request{}) {
			t.Fatalf("%q: got request %+v with error %v, want the zero Request", in, req, err)
		}
		return
	}
	if verr := req.Validate(); verr != nil {
		t.Fatalf("%q: got request %+v failing Validate: %v", in, req, verr)
	}
	if req.Limit <= 0 {
		t.Fatalf("%q: got limit %d, want positive", in, req.Limit)
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
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range querySeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		req, err := parseQuery(raw)
		checkParsed(t, raw, req, err)
		if err != nil {
			return
		}
		// Agree with url.ParseQuery wherever it accepts the query.
		vals, uerr := url.ParseQuery(raw)
		if uerr != nil {
			return
		}
		if got := vals["id"]; len(got) != 1 || got[0] != req.ID {
			t.Fatalf("%q: got id %q, url.ParseQuery has %q", raw, req.ID, got)
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
	`{"id":null,"scale":null,"limit":null,"hits":null,"algorithm":null}`,
	`{"id":"a","scale":99999999999999999999,"limit":9223372036854775808}`,
	"{\"id\":\"\xff\",\"scale\":1,\"limit\":1}",
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseJSON(bytes.NewReader(body))
		checkParsed(t, string(body), req, err)
		if err == nil && !json.Valid(body) {
			t.Fatalf("%q: accepted invalid JSON as %+v", body, req)
		}
	})
}
