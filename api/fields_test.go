package api_test

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api"
)

func TestCeil(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d, unit time.Duration
		want    int64
	}{
		{0, time.Second, 0},
		{-time.Second, time.Second, 0},
		{1, time.Second, 1},
		{time.Second, time.Second, 1},
		{time.Second + 1, time.Second, 2},
		{1999 * time.Microsecond, time.Millisecond, 2},
		{1<<63 - 1, time.Second, 9223372037},
	}
	for _, tt := range tests {
		if got := api.Ceil(tt.d, tt.unit); got != tt.want {
			t.Errorf("api.Ceil(%v, %v): got %d, want %d", tt.d, tt.unit, got, tt.want)
		}
	}
}
