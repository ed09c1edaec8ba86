package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// TestCheckerValidates: the handler checks each parameter as it parses it
// and leaves the table's rules of a whole request to the Checker, which
// validates every request once: a check whose refill time the table refuses
// is sent on, and the Checker's error answered 400 as it says. A rule whose
// policy the table refuses is known from its Set, with no request sent.
func TestCheckerValidates(t *testing.T) {
	t.Parallel()
	f := &apitest.FakeChecker{Err: &table.FieldError{Field: "burst", Message: table.MsgRefill}}
	store := apitest.NewStore(t, rules.Rule{Name: "slow", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: table.MaxScale, Limit: 1, Burst: 2}})
	srv := apitest.StartServer(t, f, httpapi.Options{Rules: store})

	r := apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?id=a&scale=8784h&limit=1&algorithm=token_bucket&burst=2", "")
	const want = `{"error":"burst: burst × scale/limit (the time to refill) must be at most 8784h0m0s","field":"burst"}`
	if r.Status != 400 || string(r.Body) != want {
		t.Errorf("got %d %s, want 400 %s", r.Status, r.Body, want)
	}
	wantReq := table.Request{ID: "a", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: table.MaxScale, Limit: 1, Burst: 2}, Hits: 1}
	if got := f.Requests(); len(got) != 1 || got[0] != wantReq {
		t.Errorf("got requests %+v to the Checker, want exactly %+v", got, wantReq)
	}

	r = apitest.Do(t, http.DefaultClient, "GET", srv.URL+"/check_rate?id=a&rule=slow", "")
	if r.Status != 400 || len(f.Requests()) != 1 {
		t.Errorf("by rule slow: got %d %s and %d requests to the Checker, want 400 and none more", r.Status, r.Body, len(f.Requests()))
	}
}
