package apitest

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// CheckDecision checks the headers of a check_rate answer against its body.
func CheckDecision(t *testing.T, r Response, d DecisionBody, id string) {
	t.Helper()
	if d.ID != id {
		t.Errorf("got id %q, want %q", d.ID, id)
	}
	wantHeaders := map[string]string{
		"Content-Type":     "application/json",
		"Cache-Control":    "no-store",
		"RateLimit-Policy": fmt.Sprintf(`"default";q=%d;w=%d`, d.Limit, LongScaleSeconds),
		"RateLimit":        fmt.Sprintf(`"default";r=%d;t=%d`, d.Remaining, (d.ResetMs+999)/1000),
	}
	if d.Allowed {
		wantHeaders["Retry-After"] = ""
		if d.RetryAfterMs != 0 {
			t.Errorf("allowed: got retry_after_ms %d, want 0", d.RetryAfterMs)
		}
	} else {
		wantHeaders["Retry-After"] = strconv.FormatInt(max((d.RetryAfterMs+999)/1000, 1), 10)
		if d.RetryAfterMs <= 0 {
			t.Errorf("denied: got retry_after_ms %d, want > 0", d.RetryAfterMs)
		}
	}
	for k, want := range wantHeaders {
		if got := r.Header.Get(k); got != want {
			t.Errorf("got %s %q, want %q", k, got, want)
		}
	}
	if d.ResetMs <= 0 || d.ResetMs > LongScaleSeconds*1000 {
		t.Errorf("got reset_ms %d, want in (0, %d]", d.ResetMs, LongScaleSeconds*1000)
	}
	if ra := r.Header.Get("Retry-After"); ra != "" {
		if n, err := strconv.Atoi(ra); err != nil || n < 1 {
			t.Errorf("got Retry-After %q, want an integer >= 1", ra)
		}
	}
}

// Scrape returns the sample lines of GET /metrics, keyed by series.
func Scrape(t *testing.T, url string) map[string]string {
	t.Helper()
	r := Do(t, http.DefaultClient, "GET", url+"/metrics", "")
	if r.Status != 200 {
		t.Fatalf("GET /metrics: got status %d, want 200", r.Status)
	}
	samples := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		samples[line[:i]] = line[i+1:]
	}
	return samples
}
