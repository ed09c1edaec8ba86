package embedded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/bench/internal/keys"
)

func TestEveryLimiterAdmitsAndCounts(t *testing.T) {
	ctx := context.Background()
	ids := keys.IDs(100)
	seq := keys.Sequence(keys.Zipf, len(ids), 1000, 1)
	for _, f := range Factories() {
		t.Run(f.Name, func(t *testing.T) {
			l, err := f.New(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := l.Close(ctx); err != nil {
					t.Error(err)
				}
			}()
			if err := Prefill(ctx, l, ids, 8); err != nil {
				t.Fatal(err)
			}
			for _, g := range []int{1, 2} {
				r, err := Run(ctx, l, ids, seq, g, 20*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				if r.Checks == 0 || r.PerSec() <= 0 || r.Elapsed < 20*time.Millisecond {
					t.Errorf("g=%d: %+v", g, r)
				}
			}
		})
	}
}

// deny admits nothing: Run must say so rather than count it.
type deny struct{}

func (deny) Allow(context.Context, string) (bool, error) { return false, nil }
func (deny) Close(context.Context) error                 { return nil }

func TestRunRefusesDenials(t *testing.T) {
	_, err := Run(context.Background(), deny{}, []string{"a"}, []int32{0}, 2, time.Second)
	if !errors.Is(err, ErrDenied) {
		t.Errorf("Run on a denying limiter: %v, want ErrDenied", err)
	}
	if err := Prefill(context.Background(), deny{}, []string{"a"}, 1); err == nil {
		t.Error("Prefill on a denying limiter: no error")
	}
}

func TestResultRates(t *testing.T) {
	r := Result{Checks: 2000, Elapsed: 2 * time.Second, Mallocs: 1000}
	if r.PerSec() != 1000 || r.AllocsPerOp() != 0.5 {
		t.Errorf("PerSec %v, AllocsPerOp %v", r.PerSec(), r.AllocsPerOp())
	}
	if (Result{}).PerSec() != 0 || (Result{}).AllocsPerOp() != 0 {
		t.Error("zero Result has non-zero rates")
	}
}
