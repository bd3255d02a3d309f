package redislock

import (
	"errors"
	"testing"
	"time"
)

// However long the ack, a waiter's slices stay at least a third of the
// read timeout (the largest ack New accepts is a third).
func TestSlicesStayLongWithAck(t *testing.T) {
	for _, rt := range []time.Duration{300 * time.Millisecond, 3 * time.Second, 5 * time.Second, time.Minute} {
		ack := replicaAck{n: 1, timeout: rt / 3}
		if err := ack.fits(rt); err != nil {
			t.Fatalf("rt %v: ack %v refused", rt, ack.timeout)
		}
		if err := (replicaAck{n: 1, timeout: rt/3 + time.Millisecond}).fits(rt); !errors.Is(err, ErrInvalidReplicaAck) {
			t.Fatalf("rt %v: ack above a third accepted", rt)
		}
		if d := maxSliceFor(rt, 0, ack); d < min(rt/3, defaultMaxSlice)-time.Millisecond {
			t.Errorf("rt %v, ack %v: slice %v, want at least %v", rt, ack.timeout, d, min(rt/3, defaultMaxSlice))
		}
	}
}
