package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// FileReloads makes the series of the reloads of the file a flag names
// (file is the flag, such as "--tls-cert"), at 0 until the first:
//
//	ratelimitd_file_reloads_total{file,result="ok"|"error"}
//
// and returns the function that counts one, ok false when the file was
// refused (the last good content stays). Call it once per file: a second
// call with the same file panics, as registering a series twice does.
func (m *Metrics) FileReloads(file string) func(ok bool) {
	return m.results(prometheus.CounterOpts{
		Name:        "ratelimitd_file_reloads_total",
		Help:        "Reloads of a file the daemon re-reads when it changes (TLS certificates and CAs, the admin token and the Redis password files), by result: ok (the new content is in force) or error (refused: the last good content stays).",
		ConstLabels: prometheus.Labels{"file": file},
	}, "ok", "error")
}

// TokenFailures makes the series of the requests refused for their admin
// token on one path of the admin listener (path "api", the admin API's
// bearer tokens, or "dashboard", its logins and bearer tokens), at 0
// until the first:
//
//	ratelimitd_admin_token_failures_total{path,result="wrong"|"limited"}
//
// and returns the function that counts one: limited false for a wrong
// token (counted against its address), true for a request refused
// without its token being compared, its address having sent too many
// wrong ones: a rising limited count is somebody guessing. Call it once
// per path: a second call with the same path panics.
func (m *Metrics) TokenFailures(path string) func(limited bool) {
	return m.results(prometheus.CounterOpts{
		Name:        "ratelimitd_admin_token_failures_total",
		Help:        "Requests to the admin listener refused for their token, by path (api: the admin API's bearer tokens; dashboard: its logins and bearer tokens) and result: wrong (a wrong token, counted against its address) or limited (refused without being compared: the address sent too many wrong ones).",
		ConstLabels: prometheus.Labels{"path": path},
	}, "limited", "wrong")
}

// results registers the counter opts names, by a result label of two
// values, both at 0 until the first, and returns the function that counts
// one: ifTrue when it is told true, else ifFalse.
func (m *Metrics) results(opts prometheus.CounterOpts, ifTrue, ifFalse string) func(bool) {
	vec := prometheus.NewCounterVec(opts, []string{"result"})
	yes, no := vec.WithLabelValues(ifTrue), vec.WithLabelValues(ifFalse)
	m.reg.MustRegister(vec)
	return func(b bool) {
		if b {
			yes.Inc()
		} else {
			no.Inc()
		}
	}
}

// ObserveCertificate makes the series of the certificate a flag names
// (file, such as "--tls-cert"), read from notAfter at every scrape:
//
//	ratelimitd_tls_certificate_expiry_timestamp_seconds{file}
//
// the Unix time at which the certificate served now expires, for an alert
// on a certificate that rotation failed to renew. Call it once per file.
func (m *Metrics) ObserveCertificate(file string, notAfter func() time.Time) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "ratelimitd_tls_certificate_expiry_timestamp_seconds",
		Help:        "When the TLS certificate the daemon presents expires, in Unix seconds (its NotAfter), as it is now: a reload of a renewed certificate moves it.",
		ConstLabels: prometheus.Labels{"file": file},
	}, func() float64 { return float64(notAfter().Unix()) }))
}
