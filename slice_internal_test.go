package redislock

import (
	"context"
	"testing"
	"time"
)

// A busy reply whose holder has under a millisecond left (PTTL 0) gets
// the shortest slice: taken as "no expire", it slept a whole slice past
// the holder's expiry (TestQueuedWaiterWakesAtTheHoldersTTL failed once in
// CI at 3.5 s for a 1.5 s TTL).
func TestSliceFollowsTheHoldersTTL(t *testing.T) {
	l := &core{maxSlice: 2 * time.Second}
	ctx := context.Background()
	for _, c := range []struct {
		pttl int64
		want time.Duration
	}{
		{-1, 2 * time.Second}, // never expires
		{0, minSlice},         // under a millisecond left
		{1, minSlice},
		{500, 500 * time.Millisecond},
		{5000, 2 * time.Second},
	} {
		if got := l.slice(ctx, c.pttl); got != c.want {
			t.Errorf("slice(pttl %d) = %v, want %v", c.pttl, got, c.want)
		}
	}
}
