package redislock

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/go-redis-lock/redislock/internal/hold"
)

// A level the logger does not enable costs no allocation: the events
// check Enabled before building any attribute. The check runs every
// event of a hold's life against a logger that only takes errors.
func TestDisabledLogLevelsAllocateNothing(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError + 1}))
	for _, e := range []*events{nil, newEvents(nil, log)} {
		in := Event{Name: "job", Key: "lock:job", ID: "id"}
		h := hold.New(hold.Config{Keys: []string{"lock:job"}}, time.Now(), "id")
		ctx := context.Background()
		allocs := testing.AllocsPerRun(1000, func() {
			c := e.acquireStart(ctx, in, true)
			e.waiting(c, in, "holder", time.Second)
			e.wakeup(c, in, true, time.Millisecond)
			e.acquireEnd(c, in, true, time.Millisecond, 7, nil, nil)
			e.acquireEnd(c, in, false, time.Millisecond, 0, ErrLocked, nil)
			e.renewalStart(in, time.Second)
			c = e.extendStart(ctx, in, true, time.Second)
			e.extendEnd(c, in, true, time.Second, 0, nil, time.Second, true)
			e.extendEnd(c, in, true, time.Second, 0, ErrUnreachable, time.Second, true)
			c = e.releaseStart(ctx, in)
			e.renewalShutdown(in)
			e.releaseEnd(c, in, time.Second, OutcomeExpired, ErrNotAcquired)
			e.renewalExit(in)
			e.holdEnd(in, h, ErrReleased)
			e.reset(ctx, in, 1, nil)
		})
		if allocs != 0 {
			t.Errorf("events %v with every level disabled: %v allocations per hold, want 0", e != nil, allocs)
		}
	}
}
