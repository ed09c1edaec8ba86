package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/table"
)

// TestBatchMemoryReuse sends one handler, one request after another,
// batches of changing sizes and bad bodies between them: each answer and
// each CheckAll holds the checks of its own request only, whatever memory
// the handler reuses.
func TestBatchMemoryReuse(t *testing.T) {
	t.Parallel()
	f := &apitest.FakeChecker{D: table.Decision{Allowed: true, Count: 1, Limit: 5, Remaining: 4}}
	h, err := httpapi.NewHandler(f, httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(prefix string, n int) (string, []string) {
		checks := make([]string, n)
		ids := make([]string, n)
		for i := range checks {
			ids[i] = fmt.Sprintf("%s%d", prefix, i)
			checks[i] = `{"id":"` + ids[i] + `","scale":1000,"limit":5}`
		}
		return "[" + strings.Join(checks, ",") + "]", ids
	}
	tests := []struct {
		name      string
		n         int    // checks in a good batch
		body      string // a bad body instead, when n is 0
		wantField string
	}{
		{"five", 5, "", ""},
		{"bad element", 0, `[{"id":"x","scale":1000,"limit":1},{"id":"y","scale":1000}]`, "checks[1].limit"},
		{"two", 2, "", ""},
		{"cut short", 0, `[{"id":"x","scale":1000,"limit":1},{"id":"y"`, "body"},
		{"max", actors.MaxCheckAll, "", ""},
		{"one", 1, "", ""},
		{"bad object", 0, `{"id":"z","scale":1000,"limit":0}`, "limit"},
		{"three", 3, "", ""},
	}
	for _, tt := range tests {
		body, ids := tt.body, []string(nil)
		if tt.n > 0 {
			body, ids = batch(tt.name+"-", tt.n)
		}
		before := len(f.Requests())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/check_rate", strings.NewReader(body)))
		sent := f.Requests()[before:]
		if tt.n == 0 {
			var e apitest.ErrorBody
			apitest.DecodeStrict(t, rec.Body.Bytes(), &e)
			if rec.Code != http.StatusBadRequest || e.Field != tt.wantField || len(sent) != 0 {
				t.Errorf("%s: got status %d, field %q and %d checks sent, want 400, %q and none", tt.name, rec.Code, e.Field, len(sent), tt.wantField)
			}
			continue
		}
		var b apitest.BatchBody
		apitest.DecodeStrict(t, rec.Body.Bytes(), &b)
		if rec.Code != http.StatusOK || len(b.Checks) != tt.n || len(sent) != tt.n {
			t.Fatalf("%s: got status %d, %d answers and %d checks sent, want 200 and %d", tt.name, rec.Code, len(b.Checks), len(sent), tt.n)
		}
		for i, id := range ids {
			if b.Checks[i].ID != id || sent[i].ID != id {
				t.Fatalf("%s: check %d: got answer id %q, sent id %q, want %q", tt.name, i, b.Checks[i].ID, sent[i].ID, id)
			}
		}
	}
}
