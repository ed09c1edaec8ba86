// Package rules holds ratelimitd's named rate-limit rules: loaded from a YAML
// file, validated, matched to requests by URL path prefix through a versioned
// cache, and changed at runtime.
//
// # The rules file
//
//	rules:
//	  - name: login              # required; unique; 1–64 of [a-z0-9_.-], starting with a letter or digit
//	    algorithm: fixed_window  # optional; a table.Algorithm wire name; default fixed_window
//	    scale: 30s               # required; a Go duration ("30s", "1h", "500ms") or integer milliseconds (30000)
//	    limit: 5                 # required; integer ≥ 0; 0 denies everything
//	    burst: 10                # optional; integer ≥ 0; 0 means limit; used by bucket algorithms only
//	    shadow: true             # optional; count and report, never deny
//	    key: header:X-API-Key    # optional; whose budget: ip (default), user, header:NAME or query:NAME
//	    match:                   # optional; without it the rule is used only by name (?rule=login)
//	      prefix: /api/login     # required in match; starts with "/"
//	      method: POST           # optional; an HTTP method token
//	      host: example.com      # optional; a host name or IP address; a port is ignored
//
// scale must be a whole number of milliseconds within [table.MinScale,
// table.MaxScale]; a string of digits is milliseconds too. To Parse, an
// empty file, or rules null or [], is an empty rule set; LoadFile and a
// Watcher accept a file without rules only when it says "rules: []". Keys other than these, anywhere, and
// a key given twice, are errors, as are YAML merge keys ("<<"); anchors and
// aliases are followed. A file holds one YAML document.
//
// Parse and LoadFile read the format; Marshal writes it. Rule implements
// json.Marshaler and json.Unmarshaler with the same field names, for the
// admin API.
//
// # Errors
//
// Every validation error is an *Error, matching ErrInvalid, that names the
// rule by position and name, the field, the line when it comes from YAML, and
// what is wrong:
//
//	line 7: rules[2] "login": scale: must be between 1ms and 8784h0m0s
//
// Only the first error is reported, in file (or slice) order; within a rule,
// structural faults (unknown or repeated keys, wrong types) come first, then
// fields in the order name, algorithm, scale, limit, burst, shadow, key, match.
// A duplicate name or ambiguous match is reported at the later of the two
// rules.
//
// # Matching
//
// Set.Match and Store.Match pick the rule for a request from its method, host
// and URL path:
//
//   - Prefixes are compared ASCII case-insensitively and segment by segment:
//     "/api" matches "/api" and "/api/x" but not "/apix"; a prefix ending in
//     "/" matches every path that starts with it ("/api/" matches "/api/x"
//     but not "/api"; "/" matches every path).
//   - The longest matching prefix wins. Among rules with that prefix, one
//     with both method and host wins over one with a host only, over one
//     with a method only, over one with neither.
//   - A rule's method and host, when set, must equal the request's, ASCII
//     case-insensitively; the request's port is ignored.
//   - No two rules of a Set can have the same prefix, method and host, so the
//     winner is always unique.
//
// The path is matched as given: the package neither decodes nor cleans it.
// Pass the decoded path (r.URL.Path), so that "/%61pi" cannot dodge "/api",
// and clean it first (path.Clean) if requests are served for unclean paths
// such as "//api" or "/x/../api".
//
// # Guarantees
//
//   - A Set never changes. A Store changes only through Replace, Put and
//     Delete (and a Watcher's reloads, which call Replace); each change is
//     validated first, leaves the Store unchanged on error, and installs a
//     new Set whose version is one more than the last.
//   - Store.Match sees a change on the very next call: a cache entry is used
//     only while the Set version it was computed for is current. There is no
//     TTL and no stale window.
//   - Store.Current and Store.Match never block, whatever writers do: they use
//     atomic loads only. A cached match costs no allocation.
//   - The cache is bounded: at most 8192 entries with keys of at most 512
//     bytes (about 5 MB at worst, per Store), however many distinct requests
//     arrive. Longer requests are matched without it.
//   - A Watcher never replaces good rules with a bad file, nor with a file
//     holding no rule unless it says "rules: []", and reports every reload
//     attempt.
//
// # Non-guarantees
//
//   - The cache is no defence of speed against random paths: an attacker who
//     sends many distinct paths evicts useful entries, and each of its
//     requests costs an uncached match (a few hash-map lookups).
//   - Case-insensitivity is ASCII only: "/Ä" does not match "/ä".
//   - A Watcher reload replaces the whole rule set, undoing rules put or
//     deleted through the Store since the file was last applied. Changes made
//     to the Store are not written back to the file.
//   - A Watcher sees changes only through events on the file's directory; a
//     file on a network file system may not produce them. Reload still works.
//   - A Watcher reads the file once its events have settled for
//     DefaultDebounce, and again until two reads 100 ms apart agree, but
//     cannot tell a half-written file from a finished one if the writer
//     pauses longer than that: a valid prefix of the new file can be applied
//     until the rest arrives. (A file with no rule is never applied unless it
//     says "rules: []".) Write a temporary file in the same directory and
//     rename it over the rules file.
//   - Two processes see a change at different times; rule changes are not
//     coordinated across a cluster.
package rules
