package topk

import (
	"os"
	"strings"
	"testing"
)

// TestCanPrefetchW: the CPUID bit read agrees with the flag Linux reports
// for it (3dnowprefetch), where /proc/cpuinfo can be read.
func TestCanPrefetchW(t *testing.T) {
	t.Parallel()
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skipf("no /proc/cpuinfo: %v", err)
	}
	var flags string
	for line := range strings.Lines(string(info)) {
		if strings.HasPrefix(line, "flags") {
			flags = " " + strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]) + " "
			break
		}
	}
	if flags == "" {
		t.Skip("no flags line in /proc/cpuinfo")
	}
	if want := strings.Contains(flags, " 3dnowprefetch "); canPrefetchW != want {
		t.Errorf("canPrefetchW %v; /proc/cpuinfo says 3dnowprefetch %v", canPrefetchW, want)
	}
}
