package main

// Helpers shared by the in-process and the end-to-end tests.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// stableScaleMs returns a window of at least one hour, in milliseconds, such
// that now is at least a minute before the end of its epoch-aligned window:
// a test that runs for less than a minute sees one window, without sleeping.
func stableScaleMs(now time.Time) int64 {
	nowMs := now.UnixMilli()
	hour := int64(time.Hour / time.Millisecond)
	// Each step moves now's offset in its window by about now/s, over a
	// minute for any date after 1970-03: a few steps always suffice.
	for s := hour; s < hour+1000; s++ {
		if nowMs%s < s-60_000 {
			return s
		}
	}
	panic(fmt.Sprintf("stableScaleMs: no window for now=%d ms", nowMs))
}

// logRecord is one log line's attributes, values unquoted; nested JSON
// values are kept as their JSON text.
type logRecord map[string]string

// parseLogLine parses a line of slog's text handler (key=value pairs, values
// quoted with Go syntax where needed) or JSON handler (one object).
func parseLogLine(line string) (logRecord, error) {
	rec := logRecord{}
	if strings.HasPrefix(line, "{") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return nil, fmt.Errorf("JSON log line %q: %v", line, err)
		}
		for k, v := range m {
			var s string
			if json.Unmarshal(v, &s) == nil {
				rec[k] = s
			} else {
				rec[k] = string(v)
			}
		}
		return rec, checkRecord(line, rec)
	}
	for rest := line; rest != ""; {
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 || strings.ContainsAny(rest[:eq], " \"") {
			return nil, fmt.Errorf("text log line %q: no key=value at %q", line, rest)
		}
		key := rest[:eq]
		rest = rest[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, fmt.Errorf("text log line %q: bad quoting at %q", line, rest)
			}
			val, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			val, rest, _ = strings.Cut(rest, " ")
			if strings.HasPrefix(rest, " ") {
				return nil, fmt.Errorf("text log line %q: two spaces", line)
			}
			rec[key] = val
			continue
		}
		rec[key] = val
		if rest != "" {
			if rest[0] != ' ' {
				return nil, fmt.Errorf("text log line %q: no space after a quoted value", line)
			}
			rest = rest[1:]
		}
	}
	return rec, checkRecord(line, rec)
}

// checkRecord reports whether rec has the attributes every slog record has.
func checkRecord(line string, rec logRecord) error {
	for _, k := range []string{"time", "level", "msg"} {
		if _, ok := rec[k]; !ok {
			return fmt.Errorf("log line %q: no %s", line, k)
		}
	}
	return nil
}
