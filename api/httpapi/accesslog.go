package httpapi

import (
	"log/slog"
	"net/http"
	"time"
)

// AccessLog wraps h to log every request at debug level: method, path, the
// id of a GET check, status, bytes written, duration and peer. Every
// client-supplied value is an slog attribute, which the text and JSON
// handlers quote or escape, so a value holding a newline cannot forge a log
// line. Wrap a handler only when debug logging is enabled: the wrapper
// costs a parse of the query per request.
func AccessLog(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		attrs := make([]slog.Attr, 0, 7)
		attrs = append(attrs,
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
		)
		if r.Method == http.MethodGet {
			if id := r.URL.Query().Get("id"); id != "" {
				attrs = append(attrs, slog.String("id", id))
			}
		}
		attrs = append(attrs,
			slog.Int("status", sw.status),
			slog.Int64("bytes", sw.bytes),
			slog.Duration("duration", time.Since(start)),
			slog.String("remote", r.RemoteAddr),
		)
		log.LogAttrs(r.Context(), slog.LevelDebug, "request", attrs...)
	})
}

// statusWriter records the status and the body size of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 { // 1xx are informational
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
