package rules

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"
)

// MarshalJSON encodes r as a JSON object with the field names of the rules
// file, for example
//
//	{"name":"login","algorithm":"fixed_window","scale":"30s","limit":5,"burst":0,"shadow":false,
//	 "match":{"prefix":"/api/login","method":"POST"}}
//
// algorithm is the wire name, scale a Go duration string; match is left out
// when zero, and its method and host when empty.
func (r Rule) MarshalJSON() ([]byte, error) { return json.Marshal(encode(r)) }

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
	if k := unknownKey(raw, ruleKeys); k != "" {
		name, _ := jsonString(raw["name"])
		return &Error{Index: -1, Name: name, Field: k, Message: msgUnknown}
	}
	out, e := buildRule(jsonFields(raw), -1, "a JSON object")
	if e != nil {
		return e
	}
	*r = out
	return nil
}

// jsonFields is a JSON object, a rule or its match, for buildRule.
type jsonFields map[string]json.RawMessage

func (j jsonFields) has(key string) bool { v, ok := j[key]; return ok && string(v) != "null" }

func (j jsonFields) scalar(key string) (string, bool) { return jsonString(j[key]) }

func (j jsonFields) text(key string) (string, bool) { return jsonString(j[key]) }

func (j jsonFields) integer(key string) (int64, bool) {
	n, err := strconv.ParseInt(string(j[key]), 10, 64)
	return n, err == nil
}

func (j jsonFields) boolean(key string) (bool, bool) {
	switch string(j[key]) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

func (j jsonFields) scale(key string) (time.Duration, string) {
	if s, ok := jsonString(j[key]); ok {
		return parseScaleString(s)
	}
	if ms, err := strconv.ParseInt(string(j[key]), 10, 64); err == nil {
		return scaleFromMillis(ms)
	}
	return 0, msgScaleForm
}

func (j jsonFields) sub(key string, known []string, fail failFunc) (fields, bool, *Error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(j[key], &m); err != nil {
		return nil, false, nil
	}
	if k := unknownKey(m, known); k != "" {
		return nil, true, fail(key+"."+k, msgUnknown, 0)
	}
	return jsonFields(m), true, nil
}

func (j jsonFields) line(string) int { return 0 }

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
