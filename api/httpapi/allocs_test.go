package httpapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ratelimitd/ratelimitd/actors"
	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/httpapi"
	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
)

// TestBatchAllocations: a POST /check_rate batch of 100 checks, once the
// handler's pooled memory is warm, allocates four times, whatever its
// size: the body's limit and string, and the header values of its answer.
// The requests and the decisions of the batch are reused with its checks
// (actors.System.AppendCheckAll), and CheckAll keeps its bookkeeping on
// the stack. (AllocsPerRun refuses to run in parallel; the race detector
// drops pooled memory at random, so it is not run under it.)
func TestBatchAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled memory at random")
	}
	h, err := httpapi.NewHandler(actorstest.StartSystemWith(t, actors.Config{Shards: 8, SweepInterval: -1}), httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data := batchBodies()[0]
	body := &resettableBody{data: data}
	req := httptest.NewRequest(http.MethodPost, "/check_rate", body)
	w := &apitest.DiscardWriter{H: make(http.Header)}
	serve := func() {
		body.rewind()
		req.ContentLength = int64(len(data))
		clear(w.H)
		h.ServeHTTP(w, req)
	}
	serve()
	if w.Status != http.StatusOK {
		t.Fatalf("status %d, want 200", w.Status)
	}
	// http.MaxBytesReader, the body as a string (the checks' ids are
	// slices of it), the string of the dynamic header values and the
	// slice of the header values.
	const want = 4
	if n := testing.AllocsPerRun(50, serve); n != want {
		t.Errorf("a batch of %d checks: %v allocations, want %d", bytes.Count(data, []byte(`"id"`)), n, want)
	}
}
