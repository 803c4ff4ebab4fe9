package tier

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// TestEachStopsWithTheCallersContext: each runs every call, stops at the
// first error, and, when the caller's context ends before every call has
// run, returns the context's error rather than success.
func TestEachStopsWithTheCallersContext(t *testing.T) {
	errCall := errors.New("call 5 failed")
	tests := []struct {
		name   string
		n      int
		fail   int // the call that returns errCall (-1: none)
		cancel int // the call that cancels the caller's context (-1: none)
		want   error
		all    bool // every call must have run
	}{
		{"every call", 40, -1, -1, nil, true},
		{"none", 0, -1, -1, nil, true},
		{"first error", 40, 5, -1, errCall, false},
		{"caller cancels", 400, -1, 3, context.Canceled, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var ran atomic.Int64
			err := each(ctx, tc.n, func(ctx context.Context, i int, _ *[]byte) error {
				ran.Add(1)
				switch i {
				case tc.fail:
					return errCall
				case tc.cancel:
					cancel()
				}
				return nil
			})
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("each = %v, want %v", err, tc.want)
			}
			if tc.all && ran.Load() != int64(tc.n) {
				t.Fatalf("%d of %d calls ran", ran.Load(), tc.n)
			}
			if tc.cancel >= 0 && ran.Load() == int64(tc.n) {
				t.Fatalf("every call ran although the context was cancelled at call %d", tc.cancel)
			}
		})
	}
}
