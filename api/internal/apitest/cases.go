package apitest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// WireRules are the rules of the wire tests: slow and slowwatch ask the
// table for a refill time over table.MaxScale; api is a URL rule keyed by
// the X-Key header.
func WireRules(t *testing.T) *rules.Store {
	t.Helper()
	return NewStore(t,
		rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Hour, Limit: 2}},
		rules.Rule{Name: "slow", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: table.MaxScale, Limit: 1, Burst: 2}},
		rules.Rule{Name: "watch", Policy: table.Policy{Scale: time.Minute, Limit: 1}, Shadow: true},
		rules.Rule{Name: "slowwatch", Policy: table.Policy{Algorithm: table.TokenBucket, Scale: table.MaxScale, Limit: 1, Burst: 2}, Shadow: true},
		rules.Rule{Name: "api", Policy: table.Policy{Scale: time.Minute, Limit: 1}, Key: "header:X-Key", Match: rules.Match{Prefix: "/api"}},
	)
}

// ErrorCase is an error a Checker can fail with, named.
type ErrorCase struct {
	Name string
	Err  error
}

// ErrorCases are the kinds of error a Checker fails with.
func ErrorCases() []ErrorCase {
	return []ErrorCase{
		{"stopped", table.ErrStopped},
		{"unavailable", table.ErrUnavailable},
		{"journal", fmt.Errorf("%w: %w: disk full", table.ErrUnavailable, table.ErrJournal)},
		{"canceled", context.Canceled},
		{"deadline", fmt.Errorf("wrapped: %w", context.DeadlineExceeded)},
		{"other", errors.New("boom")},
		{"field", &table.FieldError{Field: "limit", Message: "must be small"}},
	}
}

// The 400 bodies of an id that is not valid UTF-8: raw bytes (any
// transport), and a JSON escape of an unpaired surrogate.
const (
	BadUTF8Body      = `{"error":"id: must be valid UTF-8","field":"id"}`
	BadSurrogateBody = `{"error":"id: must be valid UTF-8: a surrogate escape (\\uD800 to \\uDFFF) must be half of a pair","field":"id"}`
)
