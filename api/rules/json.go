package rules

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/ratelimitd/ratelimitd/table"
)

// jsonRule is the JSON form of a Rule, as MarshalJSON writes it.
type jsonRule struct {
	Name      string     `json:"name"`
	Algorithm string     `json:"algorithm"`
	Scale     string     `json:"scale"`
	Limit     int64      `json:"limit"`
	Burst     int64      `json:"burst"`
	Shadow    bool       `json:"shadow"`
	Key       string     `json:"key,omitempty"`
	Match     *jsonMatch `json:"match,omitempty"`
}

// jsonMatch is the JSON form of a Match.
type jsonMatch struct {
	Prefix string `json:"prefix"`
	Method string `json:"method,omitempty"`
	Host   string `json:"host,omitempty"`
}

// MarshalJSON encodes r as a JSON object with the field names of the rules
// file, for example
//
//	{"name":"login","algorithm":"fixed_window","scale":"30s","limit":5,"burst":0,"shadow":false,
//	 "match":{"prefix":"/api/login","method":"POST"}}
//
// algorithm is the wire name, scale a Go duration string; match is left out
// when zero, and its method and host when empty.
func (r Rule) MarshalJSON() ([]byte, error) {
	j := jsonRule{
		Name:      r.Name,
		Algorithm: r.Algorithm.String(),
		Scale:     formatScale(r.Scale),
		Limit:     r.Limit,
		Burst:     r.Burst,
		Shadow:    r.Shadow,
		Key:       r.Key,
	}
	if !r.Match.IsZero() {
		m := jsonMatch(r.Match)
		j.Match = &m
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes a JSON object in the form MarshalJSON writes, and
// validates the rule as Rule.Validate does, storing it in canonical form.
// Decoding is strict: a key must be one of the format's, spelt exactly; name,
// scale and limit are required; scale is a duration string such as "30s", a
// string of digits or an integer, both in milliseconds. A null member counts
// as absent. Any error is an *Error with Index -1, and leaves r unchanged.
// The JSON literal null leaves r unchanged, as encoding/json expects.
func (r *Rule) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return &Error{Index: -1, Message: "must be a JSON object"}
	}
	var out Rule
	if s, ok := jsonString(raw["name"]); ok {
		out.Name = s
	}
	fail := func(field, msg string) *Error {
		return &Error{Index: -1, Name: out.Name, Field: field, Message: msg}
	}
	if k := unknownKey(raw, ruleKeys); k != "" {
		return fail(k, msgUnknown)
	}
	present := func(m map[string]json.RawMessage, key string) bool {
		v, ok := m[key]
		return ok && string(v) != "null"
	}

	if !present(raw, "name") {
		return fail("name", table.MsgRequired)
	}
	if _, ok := jsonString(raw["name"]); !ok {
		return fail("name", msgString)
	}
	if present(raw, "algorithm") {
		s, ok := jsonString(raw["algorithm"])
		if !ok {
			return fail("algorithm", msgString)
		}
		a, err := table.ParseAlgorithm(s)
		if err != nil {
			return fail("algorithm", algorithmMsg(err))
		}
		out.Algorithm = a
	}
	if !present(raw, "scale") {
		return fail("scale", table.MsgRequired)
	}
	var msg string
	if s, ok := jsonString(raw["scale"]); ok {
		out.Scale, msg = parseScaleString(s)
	} else if ms, err := strconv.ParseInt(string(raw["scale"]), 10, 64); err == nil {
		out.Scale, msg = scaleFromMillis(ms)
	} else {
		msg = msgScaleForm
	}
	if msg != "" {
		return fail("scale", msg)
	}
	if !present(raw, "limit") {
		return fail("limit", table.MsgRequired)
	}
	var err error
	if out.Limit, err = strconv.ParseInt(string(raw["limit"]), 10, 64); err != nil {
		return fail("limit", msgInteger)
	}
	if present(raw, "burst") {
		if out.Burst, err = strconv.ParseInt(string(raw["burst"]), 10, 64); err != nil {
			return fail("burst", msgInteger)
		}
	}
	if present(raw, "shadow") {
		switch string(raw["shadow"]) {
		case "true":
			out.Shadow = true
		case "false":
		default:
			return fail("shadow", msgBool)
		}
	}
	if present(raw, "key") {
		k, ok := jsonString(raw["key"])
		if !ok {
			return fail("key", msgString)
		}
		out.Key = k
	}
	if present(raw, "match") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw["match"], &m); err != nil {
			return fail("match", "must be a JSON object with prefix and optionally method and host")
		}
		if k := unknownKey(m, matchKeys); k != "" {
			return fail("match."+k, msgUnknown)
		}
		for _, key := range matchKeys {
			if !present(m, key) {
				continue
			}
			s, ok := jsonString(m[key])
			if !ok {
				return fail("match."+key, msgString)
			}
			switch key {
			case "prefix":
				out.Match.Prefix = s
			case "method":
				out.Match.Method = s
			case "host":
				out.Match.Host = s
			}
		}
		if out.Match.Prefix == "" {
			return fail("match.prefix", table.MsgRequired)
		}
	}
	if e := out.check(); e != nil {
		return e
	}
	*r = out.normalize()
	return nil
}

// jsonString decodes a JSON string.
func jsonString(v json.RawMessage) (string, bool) {
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// unknownKey returns the first key of m, in byte order, that is not one of
// known, or "".
func unknownKey(m map[string]json.RawMessage, known []string) string {
	var unknown []string
	for k := range m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	return slices.Min(unknown)
}
