package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/actors"
)

// readmeMemoryRE finds README's statement of the memory of a full table.
var readmeMemoryRE = regexp.MustCompile(`about \*\*([0-9.]+) GB\*\* resident \(VmRSS\) at the default ` + "`--max-buckets`" + ` of ([0-9,]+) buckets, about \*\*([0-9]+) bytes per bucket\*\*`)

// readmeMemory returns README's figures for a full table at the default
// --max-buckets: the bytes per bucket and the GB in all.
func readmeMemory(t *testing.T) (perBucket, totalGB float64) {
	t.Helper()
	perBucket, totalGB, _, err := parseReadmeMemory()
	if err != nil {
		t.Fatal(err)
	}
	return perBucket, totalGB
}

func parseReadmeMemory() (perBucket, totalGB float64, buckets int, err error) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		return 0, 0, 0, err
	}
	m := readmeMemoryRE.FindSubmatch(readme)
	if m == nil {
		return 0, 0, 0, errors.New("README states no memory figure for a full table (about **X GB** resident (VmRSS) at the default `--max-buckets` of N buckets, about **B bytes per bucket**)")
	}
	totalGB, _ = strconv.ParseFloat(string(m[1]), 64)
	buckets, _ = strconv.Atoi(strings.ReplaceAll(string(m[2]), ",", ""))
	perBucket, _ = strconv.ParseFloat(string(m[3]), 64)
	return perBucket, totalGB, buckets, nil
}

// TestREADMEMemory keeps README's memory figure consistent with
// actors.DefaultMaxBuckets and with the --max-buckets usage text: the cap it
// names is the default, its total is its per-bucket figure times the cap
// (within 10%: the empty daemon's own memory), and the usage text gives the
// same total. (TestE2EMemoryAtDefaultCap checks the figures themselves.)
func TestREADMEMemory(t *testing.T) {
	t.Parallel()
	perBucket, totalGB, buckets, err := parseReadmeMemory()
	if err != nil {
		t.Fatal(err)
	}
	if buckets != actors.DefaultMaxBuckets {
		t.Errorf("README's memory figure is for %d buckets; the default --max-buckets is %d", buckets, actors.DefaultMaxBuckets)
	}
	if est := perBucket * float64(actors.DefaultMaxBuckets) / 1e9; math.Abs(est-totalGB) > 0.1*totalGB {
		t.Errorf("README: %.0f bytes per bucket × %d buckets = %.2f GB, but it says %.1f GB", perBucket, actors.DefaultMaxBuckets, est, totalGB)
	}
	var stderr bytes.Buffer
	if _, err := parseFlags([]string{"--help"}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	want := fmt.Sprintf("default %d, about %s GB resident when full", actors.DefaultMaxBuckets, strconv.FormatFloat(totalGB, 'f', -1, 64))
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("the --max-buckets usage does not say %q:\n%s", want, stderr.String())
	}
}
