package report

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// numbered returns the numbered headings re finds in text, as "N. Title"
// (N a number with an optional letter, as 1b), in their order.
func numbered(re *regexp.Regexp, text []byte) []string {
	var out []string
	for _, m := range re.FindAllSubmatch(text, -1) {
		out = append(out, string(m[1])+". "+string(m[2]))
	}
	return out
}

var (
	resultsHeading = regexp.MustCompile(`(?m)^## (\d+[a-z]?)\. (.+)$`)
	readmeHeading  = regexp.MustCompile(`(?m)^\*\*(\d+[a-z]?)\. ([^*]+?)\.?\*\*`)
	sectionNumber  = regexp.MustCompile(`^(\d+)([a-z]?)\. `)
)

// TestSectionNumbers: RESULTS.md numbers its sections once each, in
// ascending order (1, 1b, 2, ...), and bench/README.md describes the same
// sections under the same numbers and titles, in the same order, so that
// "section N" means one thing in both.
func TestSectionNumbers(t *testing.T) {
	t.Parallel()
	got := numbered(resultsHeading, Markdown(synthetic(), nil))
	if len(got) < 7 {
		t.Fatalf("RESULTS.md has %d numbered sections, want every section: %q", len(got), got)
	}
	prevN, prevSub := 0, ""
	for _, h := range got {
		m := sectionNumber.FindStringSubmatch(h)
		n, _ := strconv.Atoi(m[1])
		if n < prevN || n == prevN && m[2] <= prevSub {
			t.Errorf("section %q comes after section %d%s: numbers must ascend, each once", h, prevN, prevSub)
		}
		prevN, prevSub = n, m[2]
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := numbered(readmeHeading, readme); !slices.Equal(got, want) {
		t.Errorf("RESULTS.md's sections differ from bench/README.md's:\n RESULTS.md: %q\n README.md:  %q", got, want)
	}
}
