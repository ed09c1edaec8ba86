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
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "ratelimitd_file_reloads_total",
		Help:        "Reloads of a file the daemon re-reads when it changes (TLS certificates and CAs, the admin token and the Redis password files), by result: ok (the new content is in force) or error (refused: the last good content stays).",
		ConstLabels: prometheus.Labels{"file": file},
	}, []string{"result"})
	ok, failed := vec.WithLabelValues("ok"), vec.WithLabelValues("error")
	m.reg.MustRegister(vec)
	return func(good bool) {
		if good {
			ok.Inc()
		} else {
			failed.Inc()
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
