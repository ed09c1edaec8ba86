package main

// The dashboard in a real browser: Debian's chromium, driven by chromedp,
// against the built daemon.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// xssID is an id that would run script if the page put ids on it as HTML.
const xssID = "<img src=x onerror=alert(1)>"

// screenshotEnv, set to 1, copies the test's full-page screenshot to
// screenshotPath (README's picture of the dashboard):
//
//	RATELIMITD_UPDATE_SCREENSHOT=1 go test -run TestBrowserDashboard ./cmd/ratelimitd/
const (
	screenshotEnv  = "RATELIMITD_UPDATE_SCREENSHOT"
	screenshotPath = "../../docs/dashboard.png"
)

// findChromium returns the path of a Chromium or Chrome binary: Debian's
// chromium, which .ci/run installs, or another on PATH. Without one the
// test is skipped, but not under CI, which must have one.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH under CI: .ci/run installs Debian's chromium (apt-get install -y chromium)")
	}
	t.Skip("no chromium on PATH: install Debian's chromium (apt-get install -y chromium) to run the dashboard's browser test")
	return ""
}

// dashLoad sends checks to the daemon's public listener until stop is
// closed, at most for 40 s: hammer by rule login (3 an hour) ten times
// every 50 ms, far above its limit, and calm-1 … calm-3 under an ad-hoc
// limit no test reaches, once each. It returns how many checks it sent.
func dashLoad(base string, stop <-chan struct{}) (sent int) {
	client := &http.Client{Timeout: 5 * time.Second}
	send := func(q url.Values) {
		resp, err := client.Get(base + "/check_rate?" + q.Encode())
		if err == nil {
			resp.Body.Close()
			sent++
		}
	}
	deadline := time.After(40 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		for range 10 {
			send(url.Values{"rule": {"login"}, "id": {"hammer"}})
		}
		for i := 1; i <= 3; i++ {
			send(url.Values{"id": {fmt.Sprint("calm-", i)}, "scale": {"1h"}, "limit": {"1000000"}})
		}
		select {
		case <-stop:
			return sent
		case <-deadline:
			return sent
		case <-tick.C:
		}
	}
}

// TestBrowserDashboard: in a real browser, the dashboard of the built
// daemon: a login through the form; under load, the live chart's numbers
// move, the hammered id tops the denials, an id made of HTML shows as its
// characters (and runs nothing); the playground draws the four algorithms
// for a burst straddling a window boundary, admitting what the table's
// oracle says; the console stays free of errors. It saves screenshots as
// test output, and reports the page's first paint and weight (the weight
// at most 200 KB).
func TestBrowserDashboard(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a browser test: not in -short")
	}
	chromium := findChromium(t)
	d, admin := startDashDaemon(t, "--shards", "2")
	// The XSS id, by rule: 3 admitted, 2 denied.
	for range 5 {
		d.checkRule(t, "login", xssID)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	ctx, cancel = chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	)
	defer cancel()
	ctx, cancel = chromedp.NewContext(ctx, chromedp.WithLogf(t.Logf))
	defer cancel()

	// Every console message and uncaught exception, from the first page on.
	var mu sync.Mutex
	var problems []string
	console := chromedp.Console(ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line))
				mu.Unlock()
			}
		}
	}()
	artifacts := t.ArtifactDir()
	shot := func(name string) []byte {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(artifacts, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
		return png
	}
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	poll := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("%s: %v; the page says:\n%s", what, err, text)
		}
	}

	// The login form, then the page.
	run("open the dashboard", chromedp.Navigate(admin+"/dashboard"), chromedp.WaitVisible(chromedp.CSS("#token")))
	shot("login.png")
	if _, err := chromedp.RunResponse(ctx, chromedp.SendKeys(chromedp.CSS("#token"), adminToken), chromedp.Submit(chromedp.CSS("#token"))); err != nil {
		t.Fatalf("log in: %v", err)
	}
	run("the page", chromedp.WaitVisible(chromedp.CSS("#traffic-chart .uplot")))
	fcp, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(performance.getEntriesByName("first-contentful-paint")[0] || {startTime: -1}).startTime`))
	if err != nil {
		t.Fatal(err)
	}
	weight, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(() => {
		let n = performance.getEntriesByType("navigation")[0].decodedBodySize;
		for (const r of performance.getEntriesByType("resource")) if (r.initiatorType !== "fetch") n += r.decodedBodySize;
		return n;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first contentful paint %.0f ms after the page's navigation began; page weight %.0f bytes (HTML, scripts, styles, icon)", fcp, weight)
	if weight <= 0 || weight > 200<<10 {
		t.Errorf("page weight %.0f bytes, want at most 200 KB", weight)
	}
	before, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#traffic-now")))
	if err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	loaded := make(chan int, 1)
	go func() { loaded <- dashLoad(d.base, stop) }()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			<-loaded
		}
	}()

	// The load denies about 200 checks a second, the checks before it 2.
	poll("the live numbers move", fmt.Sprintf(`(t => t !== %q && /allowed [1-9]/.test(t) && /denied [1-9][0-9]/.test(t))(document.getElementById("traffic-now").textContent)`, before))
	after, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#traffic-now")))
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Errorf("the live numbers stayed %q", after)
	}
	t.Logf("live numbers: %q, then %q", before, after)
	poll("hammer tops the denials", `(document.querySelector("#top-denials tbody td.id") || {}).textContent === "hammer"`)
	poll("the XSS id in top hits, as text", fmt.Sprintf(`[...document.querySelectorAll("#top-hits td.id")].some(td => td.textContent === %q)`, xssID))
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#top-panel img").length`)); err != nil || n != 0 {
		t.Errorf("images in the top keys panel: %d, %v; want none (ids are text)", n, err)
	}
	poll("the rules panel counts login", `[...document.querySelectorAll("#rules tbody tr")].some(tr => tr.cells[0].textContent === "login" && tr.cells[2].textContent !== "0")`)
	poll("the health panel", `document.getElementById("health").textContent.includes("sync interval")`)

	// The playground: its defaults are the boundary burst of 100 per 1 s.
	run("simulate", chromedp.Click(chromedp.CSS(`#sim-form button[type="submit"]`)))
	poll("the playground's totals", `document.querySelectorAll("#sim-totals tbody tr").length === 4`)
	totals, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#sim-totals tbody tr")].map(tr => tr.cells[0].textContent + " " + tr.cells[2].textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	// The table's oracle (TestBoundaryBurst): 199, 104, 110 and 2 admitted.
	if want := []string{"fixed_window 199", "sliding_window 104", "token_bucket 110", "leaky_bucket 2"}; !slices.Equal(totals, want) {
		t.Errorf("playground totals %q, want %q", totals, want)
	}
	series, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#sim-chart .u-legend .u-series")].slice(1).map(s => s.textContent.trim())`))
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 4 || !strings.HasPrefix(series[0], "fixed_window (chosen)") || !strings.HasPrefix(series[3], "leaky_bucket") {
		t.Errorf("playground chart series %q, want the four algorithms", series)
	}
	png := shot("dashboard.png")
	close(stop)
	t.Logf("load: %d checks sent; screenshots in %s", <-loaded, artifacts)

	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("the console has errors:\n%s", strings.Join(problems, "\n"))
	}
	if os.Getenv(screenshotEnv) == "1" {
		if err := os.WriteFile(screenshotPath, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", screenshotPath)
	}
	if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the browser test ran out of its 50 s")
	}
}
