package redislock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// blpopRecorder records the timeout of every BLPOP a client sends.
type blpopRecorder struct {
	mu       sync.Mutex
	timeouts []string
}

func (r *blpopRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *blpopRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.record([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}
func (r *blpopRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.record(cmds)
		return next(ctx, cmds)
	}
}
func (r *blpopRecorder) record(cmds []redis.Cmder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cmds {
		if args := c.Args(); strings.EqualFold(c.Name(), "blpop") {
			r.timeouts = append(r.timeouts, args[len(args)-1].(string))
		}
	}
}

// A waiter never sends a BLPOP timeout that Redis before 7.0.8 reads as 0,
// "block forever" (redis#11687: "0.001" did): not when the holder's key
// has 1 ms left, nor when the caller's context is about to end. miniredis
// keeps the key's PTTL at 1 ms (its TTLs frozen), so every slice is the
// shortest one.
func TestShortestSliceIsSafeOnOldServers(t *testing.T) {
	quick(t)
	b := frozenMiniBackend(t)
	admin := b.client()
	c := b.client()
	rec := &blpopRecorder{}
	c.AddHook(rec)
	redislock.AddWaitHook(c, rec)
	l := mustNew(t, c, "job", redislock.WithExpire(time.Second))
	if err := admin.Set(context.Background(), l.Key(), "someone", time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	// The caller gives up after the third BLPOP (a count, not a time
	// window: a loaded machine sent only two in 60 ms), or after 10 s.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			rec.mu.Lock()
			n := len(rec.timeouts)
			rec.mu.Unlock()
			if n >= 3 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if err := l.Acquire(ctx); !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("Acquire() = %v, want ErrLocked", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.timeouts) < 3 {
		t.Fatalf("%d BLPOPs sent (%q) in 10 s, want several short slices", len(rec.timeouts), rec.timeouts)
	}
	for _, s := range rec.timeouts {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0.002 {
			t.Fatalf("BLPOP timeout %q sent (all: %q); want at least 0.002 s", s, rec.timeouts)
		}
	}
}
