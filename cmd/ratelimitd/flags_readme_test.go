package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeFlags returns the rows of README's flags table: each flag it names
// (a row may name several) with the text of its default column.
func readmeFlags(t *testing.T) map[string]string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "\n### Flags\n")
	if !ok {
		t.Fatal(`README has no "### Flags" section`)
	}
	flags := map[string]string{}
	rows := 0
	for line := range strings.SplitSeq(table, "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`--") {
			continue
		}
		rows++
		for name := range strings.SplitSeq(cells[1], ",") {
			name = strings.Trim(strings.TrimSpace(name), "`")
			flags[strings.TrimPrefix(name, "--")] = strings.TrimSpace(cells[2])
		}
	}
	if rows == 0 {
		t.Fatal("README's flags table has no rows")
	}
	return flags
}

// usageDefaultRE finds the default a flag's usage states, "(default X)";
// "(default: PROSE)" states one the daemon computes.
var usageDefaultRE = regexp.MustCompile(`\(default(:?) ([^)]*)\)$`)

// TestREADMEFlags keeps README's flags table in step with the flags the
// binary defines: every flag in both, and the same default. A default is
// the flag's own (String and Bool flags) or the one its usage states
// "(default X)"; README writes it as a code span (`X`, durations compared
// by value), a bool's false as "off" or nothing, and a default the daemon
// computes ("(default: ...)") in words.
func TestREADMEFlags(t *testing.T) {
	t.Parallel()
	readme := readmeFlags(t)
	cfg := defaultConfig()
	fs := newFlagSet(&cfg, io.Discard)
	fs.VisitAll(func(f *flag.Flag) {
		cell, ok := readme[f.Name]
		if !ok {
			t.Errorf("--%s is not in README's flags table", f.Name)
			return
		}
		delete(readme, f.Name)
		want, computed := f.DefValue, false
		if m := usageDefaultRE.FindStringSubmatch(f.Usage); m != nil {
			want, computed = m[2], m[1] == ":"
			want, _, _ = strings.Cut(want, ", ") // "8388608, about 1.1 GB resident when full"
		}
		got := cell
		if span := regexp.MustCompile("^`([^`]*)`").FindStringSubmatch(cell); span != nil {
			got = span[1]
		}
		switch {
		case computed:
			if cell == "" || strings.HasPrefix(cell, "`") {
				t.Errorf("--%s: README's default is %q; the daemon computes it (%s): say how in words", f.Name, cell, want)
			}
		case isBool(f) && want == "false":
			if cell != "" && cell != "off" {
				t.Errorf("--%s: README's default is %q, want off or nothing", f.Name, cell)
			}
		case !sameDefault(got, want):
			t.Errorf("--%s: README's default is %q, the binary's %q", f.Name, cell, want)
		}
	})
	for name := range readme {
		t.Errorf("README's flags table has --%s, which the binary does not define", name)
	}
}

// sameDefault reports whether README's default a is the binary's b: the
// same text, or the same duration.
func sameDefault(a, b string) bool {
	if a == b {
		return true
	}
	da, errA := time.ParseDuration(a)
	db, errB := time.ParseDuration(b)
	return errA == nil && errB == nil && da == db
}

// isBool reports whether f is a boolean flag.
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
