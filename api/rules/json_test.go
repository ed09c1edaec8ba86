package rules

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/table"
)

func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	in := []Rule{
		{
			Name:   "login",
			Policy: table.Policy{Scale: 30 * time.Second, Limit: 5, Burst: 10},
			Shadow: true,
			Match:  Match{Prefix: "/api/login", Method: "POST", Host: "example.com"},
		},
		{Name: "by-name", Policy: table.Policy{Scale: 90 * time.Minute, Limit: 0}},
		{Name: "ms", Policy: table.Policy{Scale: 1500 * time.Millisecond, Limit: 3}, Match: Match{Prefix: "/"}},
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	const want = `[{"name":"login","algorithm":"fixed_window","scale":"30s","limit":5,"burst":10,"shadow":true,"match":{"prefix":"/api/login","method":"POST","host":"example.com"}},` +
		`{"name":"by-name","algorithm":"fixed_window","scale":"1h30m","limit":0,"burst":0,"shadow":false},` +
		`{"name":"ms","algorithm":"fixed_window","scale":"1.5s","limit":3,"burst":0,"shadow":false,"match":{"prefix":"/"}}]`
	if string(data) != want {
		t.Errorf("got  %s\nwant %s", data, want)
	}
	var got []Rule
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Errorf("got %+v, want %+v", got, in)
	}
}

func TestJSONUnmarshal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want Rule
	}{
		{"minimal", `{"name":"a","scale":"1s","limit":1}`, Rule{Name: "a", Policy: table.Policy{Scale: time.Second, Limit: 1}}},
		{"scale in ms", `{"name":"a","scale":30000,"limit":1}`, Rule{Name: "a", Policy: table.Policy{Scale: 30 * time.Second, Limit: 1}}},
		{"scale in ms string", `{"name":"a","scale":"30000","limit":1}`, Rule{Name: "a", Policy: table.Policy{Scale: 30 * time.Second, Limit: 1}}},
		{"nulls are absent", `{"name":"a","scale":"1s","limit":1,"burst":null,"shadow":null,"match":null,"algorithm":null}`, Rule{Name: "a", Policy: table.Policy{Scale: time.Second, Limit: 1}}},
		{"normalised", `{"name":"a","algorithm":"fixed_window","scale":"1m","limit":1,"match":{"prefix":"/X","method":"get","host":"A.example:80"}}`,
			Rule{Name: "a", Policy: table.Policy{Algorithm: table.FixedWindow, Scale: time.Minute, Limit: 1}, Match: Match{Prefix: "/X", Method: "GET", Host: "a.example"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got Rule
			if err := json.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestJSONStrict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want Error
	}{
		{"unknown field", `{"name":"a","scale":"1s","limit":1,"bogus":1}`, Error{Index: -1, Name: "a", Field: "bogus"}},
		{"field in wrong case", `{"Name":"a","scale":"1s","limit":1}`, Error{Index: -1, Field: "Name"}},
		{"unknown match field", `{"name":"a","scale":"1s","limit":1,"match":{"prefix":"/","path":"/"}}`, Error{Index: -1, Name: "a", Field: "match.path"}},
		{"not an object", `[1]`, Error{Index: -1}},
		{"missing name", `{"scale":"1s","limit":1}`, Error{Index: -1, Field: "name"}},
		{"missing scale", `{"name":"a","limit":1}`, Error{Index: -1, Name: "a", Field: "scale"}},
		{"missing limit", `{"name":"a","scale":"1s"}`, Error{Index: -1, Name: "a", Field: "limit"}},
		{"name not a string", `{"name":1,"scale":"1s","limit":1}`, Error{Index: -1, Field: "name"}},
		{"bad name", `{"name":"A","scale":"1s","limit":1}`, Error{Index: -1, Name: "A", Field: "name"}},
		{"scale garbage", `{"name":"a","scale":"soon","limit":1}`, Error{Index: -1, Name: "a", Field: "scale"}},
		{"scale float", `{"name":"a","scale":1.5,"limit":1}`, Error{Index: -1, Name: "a", Field: "scale"}},
		{"scale zero", `{"name":"a","scale":0,"limit":1}`, Error{Index: -1, Name: "a", Field: "scale"}},
		{"scale not whole ms", `{"name":"a","scale":"1500us","limit":1}`, Error{Index: -1, Name: "a", Field: "scale"}},
		{"scale bool", `{"name":"a","scale":true,"limit":1}`, Error{Index: -1, Name: "a", Field: "scale"}},
		{"limit string", `{"name":"a","scale":"1s","limit":"1"}`, Error{Index: -1, Name: "a", Field: "limit"}},
		{"limit negative", `{"name":"a","scale":"1s","limit":-1}`, Error{Index: -1, Name: "a", Field: "limit"}},
		{"limit exponent", `{"name":"a","scale":"1s","limit":1e3}`, Error{Index: -1, Name: "a", Field: "limit"}},
		{"burst negative", `{"name":"a","scale":"1s","limit":1,"burst":-1}`, Error{Index: -1, Name: "a", Field: "burst"}},
		{"shadow string", `{"name":"a","scale":"1s","limit":1,"shadow":"true"}`, Error{Index: -1, Name: "a", Field: "shadow"}},
		{"algorithm unknown", `{"name":"a","algorithm":"leaky","scale":"1s","limit":1}`, Error{Index: -1, Name: "a", Field: "algorithm"}},
		{"algorithm number", `{"name":"a","algorithm":0,"scale":"1s","limit":1}`, Error{Index: -1, Name: "a", Field: "algorithm"}},
		{"match not an object", `{"name":"a","scale":"1s","limit":1,"match":"/api"}`, Error{Index: -1, Name: "a", Field: "match"}},
		{"match without prefix", `{"name":"a","scale":"1s","limit":1,"match":{"method":"GET"}}`, Error{Index: -1, Name: "a", Field: "match.prefix"}},
		{"prefix without slash", `{"name":"a","scale":"1s","limit":1,"match":{"prefix":"api"}}`, Error{Index: -1, Name: "a", Field: "match.prefix"}},
		{"bad method", `{"name":"a","scale":"1s","limit":1,"match":{"prefix":"/","method":"G T"}}`, Error{Index: -1, Name: "a", Field: "match.method"}},
		{"host not a string", `{"name":"a","scale":"1s","limit":1,"match":{"prefix":"/","host":1}}`, Error{Index: -1, Name: "a", Field: "match.host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Rule{Name: "untouched"}
			err := json.Unmarshal([]byte(tt.in), &got)
			checkError(t, err, tt.want)
			if got.Name != "untouched" {
				t.Errorf("got %+v after an error, want the rule unchanged", got)
			}
		})
	}
}
