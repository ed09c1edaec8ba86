package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestFileSeries: the reloads of each file are counted by result, from 0,
// and a certificate's expiry is read at every scrape.
func TestFileSeries(t *testing.T) {
	t.Parallel()
	m := New()
	cert := m.FileReloads("--tls-cert")
	m.FileReloads("--admin-token-file")
	cert(true)
	cert(true)
	cert(false)
	notAfter := time.Unix(1_900_000_000, 0)
	m.ObserveCertificate("--tls-cert", func() time.Time { return notAfter })
	hasSeries(t, scrape(m),
		`ratelimitd_file_reloads_total{file="--tls-cert",result="ok"} 2`,
		`ratelimitd_file_reloads_total{file="--tls-cert",result="error"} 1`,
		`ratelimitd_file_reloads_total{file="--admin-token-file",result="ok"} 0`,
		`ratelimitd_file_reloads_total{file="--admin-token-file",result="error"} 0`,
		`ratelimitd_tls_certificate_expiry_timestamp_seconds{file="--tls-cert"} 1.9e+09`)
	notAfter = notAfter.Add(90 * 24 * time.Hour)
	hasSeries(t, scrape(m), `ratelimitd_tls_certificate_expiry_timestamp_seconds{file="--tls-cert"} 1.907776e+09`)
}

// TestTokenFailures: each path's refused tokens are counted by result,
// from 0.
func TestTokenFailures(t *testing.T) {
	t.Parallel()
	m := New()
	api := m.TokenFailures("api")
	m.TokenFailures("dashboard")
	api(false)
	api(false)
	api(true)
	hasSeries(t, scrape(m),
		`ratelimitd_admin_token_failures_total{path="api",result="wrong"} 2`,
		`ratelimitd_admin_token_failures_total{path="api",result="limited"} 1`,
		`ratelimitd_admin_token_failures_total{path="dashboard",result="wrong"} 0`,
		`ratelimitd_admin_token_failures_total{path="dashboard",result="limited"} 0`)
}

// hasSeries fails t for each of lines that out does not hold, ended by a
// newline.
func hasSeries(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, want := range lines {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("no %s in:\n%s", want, out)
		}
	}
}

// scrape returns what m serves on GET /metrics.
func scrape(m *Metrics) string {
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(w.Result().Body)
	return string(b)
}
