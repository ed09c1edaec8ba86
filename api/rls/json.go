package rls

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
)

// JSONPath is the route of the reference's HTTP API, served by JSONHandler.
const JSONPath = "/json"

// JSONHandler returns the reference's HTTP API: POST a RateLimitRequest
// in proto-JSON (as grpcurl writes it: snake_case or camelCase names,
// enums by name or number) and get the RateLimitResponse in proto-JSON
// (camelCase, zero fields left out), 200 when the overall code is OK and
// 429 when it is OVER_LIMIT. A body that is not such a request, or is
// longer than MaxRecvMsgSize, or breaks a rule, is answered 400 with
// {"error": "...", "field": "..."}; a Checker failure 503; another method
// 405 with an Allow header. Mount it at JSONPath.
func (s *Service) JSONHandler() http.Handler {
	return http.HandlerFunc(s.serveJSON)
}

func (s *Service) serveJSON(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSONError(w, http.StatusMethodNotAllowed, "", "method must be POST")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRecvMsgSize))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSONError(w, http.StatusBadRequest, "body", "must be at most "+strconv.Itoa(MaxRecvMsgSize)+" bytes")
			return
		}
		writeJSONError(w, http.StatusBadRequest, "body", "cannot be read: "+err.Error())
		return
	}
	req := &rlsv3.RateLimitRequest{}
	if err := protojson.Unmarshal(body, req); err != nil {
		if s.opts.Observer != nil {
			s.opts.Observer.ObserveCall(CallEvent{Transport: TransportJSON, Outcome: OutcomeInvalid})
		}
		writeJSONError(w, http.StatusBadRequest, "body", "is not a proto-JSON RateLimitRequest: "+err.Error())
		return
	}
	resp, cerr := s.serve(r.Context(), req, TransportJSON)
	if cerr != nil {
		code := http.StatusServiceUnavailable
		if cerr.code == codes.InvalidArgument {
			code = http.StatusBadRequest
		}
		writeJSONError(w, code, cerr.field, cerr.msg)
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, "", "cannot encode the answer")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	_, _ = w.Write(out)
}

// writeJSONError answers {"error": msg, "field": field} with code.
func writeJSONError(w http.ResponseWriter, code int, field, msg string) {
	body := struct {
		Error string `json:"error"`
		Field string `json:"field,omitempty"`
	}{msg, field}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
