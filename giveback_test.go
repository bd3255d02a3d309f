package redislock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// dropGiveback is a hook that refuses to send the giveback script (the only
// script with two keys and three arguments): the broken variant of the
// giveback tests.
type dropGiveback struct{}

func (dropGiveback) DialHook(next redis.DialHook) redis.DialHook { return next }
func (dropGiveback) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(strings.ToLower(cmd.Name()), "eval") && len(cmd.Args()) == 8 {
			err := errors.New("giveback dropped by the test")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (dropGiveback) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A waiter whose BLPOP pops the wake-up signal but whose try, pipelined
// behind it, gets an error reply (OOM under maxmemory + noeviction, the
// policy Check asks for) gives the signal back: a python-redis-lock waiter
// queued behind it (a raw BLPOP on the signal list) is woken. Without the
// giveback (the broken variant) it sleeps on.
func TestPoppedSignalIsGivenBackAfterErrorReply(t *testing.T) {
	for _, tc := range []struct {
		name   string
		broken bool
	}{
		{"giveback", false},
		{"broken/no giveback", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t)
			ctx := ctxT(t)
			admin := s.Client()
			holder := mustNew(t, s.Client(), "job", redislock.WithExpire(time.Minute))
			mustAcquire(t, ctx, holder)

			wc := s.Client()
			if tc.broken {
				wc.AddHook(dropGiveback{})
			}
			waiter := mustNew(t, wc, "job", redislock.WithExpire(time.Minute))
			waiterDone := acquireAsync(ctx, waiter)
			waitBlocked(t, admin, 1) // first in line: Redis serves BLPOP in FIFO order

			python := s.Client()
			popped := make(chan error, 1)
			go func() {
				// python-redis-lock's blocking acquire waits with BLPOP
				// signal <timeout>; 3 s stands in for its "0" (forever).
				_, err := python.Do(ctx, "BLPOP", "lock-signal:job", "3").Result()
				popped <- err
			}()
			waitBlocked(t, admin, 2)

			// Out of memory: SET (denyoom) is refused as a script's first
			// write, so the waiter's try fails; the release, whose first
			// write is a DEL, goes through.
			if err := admin.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { admin.ConfigSet(context.Background(), "maxmemory", "0") })
			if err := holder.Release(ctx); err != nil {
				t.Fatalf("Release() under OOM = %v", err)
			}
			if r := receive(t, waiterDone); r.err == nil || !strings.Contains(r.err.Error(), "OOM") {
				t.Fatalf("waiter's Acquire() = %v, want the OOM reply", r.err)
			}
			start := time.Now()
			err := <-popped
			woken := err == nil
			if woken == tc.broken {
				t.Fatalf("python waiter's BLPOP = %v after %v; want woken = %v", err, time.Since(start), !tc.broken)
			}
			if woken && time.Since(start) > 2*time.Second {
				t.Fatalf("python waiter woken only after %v", time.Since(start))
			}
			t.Logf("python waiter's BLPOP returned %v, %v after the Go waiter's OOM", err, time.Since(start))
		})
	}
}
