package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// The mutex model of the linearizability check. The state is the client
// holding the lock, -1 for none.
type mutexInput struct {
	client   int
	acquire  bool // else release
	blocking bool // an Acquire that waits (as long as its 200 ms allow), else TryAcquire
	retries  bool // the client's go-redis retries a command whose reply was lost
}

type outcome int

const (
	outOK      outcome = iota // acquired / released
	outRefused                // ErrLocked / ErrNotAcquired
	outUnknown                // an error after which either may have happened
)

var mutexModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{-1} },
	Step: func(state, input, output any) []any {
		holder, in, out := state.(int), input.(mutexInput), output.(outcome)
		if in.acquire {
			switch out {
			case outOK:
				// Free, or already ours: an acquire whose reply was lost
				// may have taken it for us, and we take it again.
				if holder == -1 || holder == in.client {
					return []any{in.client}
				}
				return nil
			case outRefused:
				// A refused try is always possible: it may have met a
				// holder whose acquire is still unresolved.
				return []any{holder}
			}
			if holder == -1 {
				return []any{holder, in.client}
			}
			return []any{holder}
		}
		switch out {
		case outOK:
			if holder == in.client {
				return []any{-1}
			}
			return nil
		case outRefused:
			if holder != in.client {
				return []any{holder}
			}
			// Ours, yet refused: never. (A release whose reply was lost is
			// retried by go-redis; when a waiter took the lock in between,
			// the retry finds its id, and Release must still report the
			// release its first attempt made.)
			return nil
		}
		if holder == in.client {
			return []any{holder, -1}
		}
		return []any{holder}
	},
	DescribeOperation: func(input, output any) string {
		in := input.(mutexInput)
		op := "release"
		switch {
		case in.acquire && in.blocking:
			op = "acquire (blocking)"
		case in.acquire:
			op = "try-acquire"
		}
		return fmt.Sprintf("client %d %s -> %v", in.client, op, output)
	},
}

// A mutex is what the history is recorded on: the real lock, or a broken
// one whose release does not check the owner.
type mutex interface {
	acquire(ctx context.Context, blocking bool) error
	release(ctx context.Context) error
}

type realMutex struct{ l *redislock.Lock }

func (m realMutex) acquire(ctx context.Context, blocking bool) error {
	if blocking {
		return m.l.Acquire(ctx)
	}
	return m.l.TryAcquire(ctx)
}
func (m realMutex) release(ctx context.Context) error { return m.l.Release(ctx) }

// brokenMutex releases with a plain DEL: no id check.
type brokenMutex struct {
	l *redislock.Lock
	c *redis.Client
}

func (m brokenMutex) acquire(ctx context.Context, blocking bool) error {
	return realMutex{m.l}.acquire(ctx, blocking)
}
func (m brokenMutex) release(ctx context.Context) error {
	m.l.Release(ctx) // clears the Lock's own state; its result is ignored
	return m.c.Del(ctx, m.l.Key()).Err()
}

// history runs 6 clients × 100 operations through a fault proxy (latency,
// dropped replies, short blackholes) and records them. The acquires are
// TryAcquire and blocking Acquire (each bounded by the operation's 200 ms)
// in equal parts; half the clients let go-redis retry a lost reply.
func history(t *testing.T, broken bool) []porcupine.Operation {
	return historyOf(t, func(client *redis.Client) mutex {
		l := mustNew(t, client, "job", redislock.WithExpire(time.Minute))
		if broken {
			return brokenMutex{l, client}
		}
		return realMutex{l}
	})
}

// historyOf records the history of the mutex that mk makes for each client
// (see history).
func historyOf(t *testing.T, mk func(client *redis.Client) mutex) []porcupine.Operation {
	s := redistest.Start(t)
	p := proxyTo(t, s)
	ctx := ctxT(t)
	const clients, ops = 6, 100

	stop := make(chan struct{})
	faultsDone := make(chan struct{})
	go func() { // the faults
		defer close(faultsDone)
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				p.SetLatency(0)
				p.Blackhole(false)
				return
			case <-time.After(20 * time.Millisecond):
			}
			switch rng.IntN(12) {
			case 0:
				p.DropNextReply()
			case 1:
				p.Blackhole(true)
				time.Sleep(30 * time.Millisecond)
				p.Blackhole(false)
			case 2: // longer than an operation's 200 ms: outcomes become unknown
				p.Blackhole(true)
				time.Sleep(250 * time.Millisecond)
				p.Blackhole(false)
			default:
				p.SetLatency(time.Duration(rng.IntN(3)) * time.Millisecond)
			}
		}
	}()

	var (
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
	)
	start := time.Now()
	for c := 0; c < clients; c++ {
		client := clientVia(t, p, func(o *redis.Options) {
			o.ContextTimeoutEnabled = true
			if c%2 == 1 {
				o.MaxRetries = -1 // a lost reply is an unknown outcome, not a retry
			}
		})
		m := mk(client)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for i := 0; i < ops; i++ {
				// Mostly acquire-then-release; now and then a stray release
				// by a client that may not hold the lock.
				acquire := i%2 == 0 && rng.IntN(8) != 0
				in := mutexInput{client: c, acquire: acquire, blocking: acquire && rng.IntN(2) == 0, retries: c%2 == 0}
				octx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				call := time.Since(start).Nanoseconds()
				var err error
				if acquire {
					err = m.acquire(octx, in.blocking)
				} else {
					err = m.release(octx)
				}
				ret := time.Since(start).Nanoseconds()
				cancel()
				out := outUnknown // may take effect any time later: a request
				// held in a blackhole reaches Redis after the client gave up;
				// a blocking Acquire whose deadline passed is one too
				switch {
				case err == nil:
					out = outOK
				case errors.Is(err, redislock.ErrLocked) && !errors.Is(err, context.DeadlineExceeded):
					out = outRefused
				case errors.Is(err, redislock.ErrNotAcquired):
					out = outRefused
				}
				if out == outUnknown {
					ret = math.MaxInt64 // as if it never returned (Jepsen's indeterminate operations)
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-faultsDone
	return history
}

// Histories recorded under faults are linearizable against a mutex; the
// broken lock's are not. Each history must contain outcomes that the
// faults left unknown and blocking acquires that succeeded, or it did not
// test what it claims.
func TestLinearizable(t *testing.T) {
	t.Parallel()
	long(t, "records and checks histories under faults")
	andBroken(t, "lock", "release without id check", func(t *testing.T, broken bool) {
		judge(t, mutexModel.ToModel(), history(t, broken), broken)
	})
}

// judge checks history h against model: a broken variant's must be judged
// illegal, the real one's ok. h must have met what it is about: faults
// that left outcomes unknown, and blocking acquires that got in.
func judge(t *testing.T, model porcupine.Model, h []porcupine.Operation, broken bool) {
	t.Helper()
	checkStart := time.Now()
	res := porcupine.CheckOperationsTimeout(model, h, 30*time.Second)
	var ok, unknown, blockingOK int
	for _, op := range h {
		switch op.Output.(outcome) {
		case outOK:
			ok++
			if in := op.Input.(mutexInput); in.acquire && in.blocking {
				blockingOK++
			}
		case outUnknown:
			unknown++
		}
	}
	t.Logf("%d operations (%d succeeded, %d of them blocking acquires; %d unknown under faults): %s, checked in %v",
		len(h), ok, blockingOK, unknown, res, time.Since(checkStart).Round(time.Millisecond))
	if unknown == 0 || blockingOK == 0 {
		t.Fatalf("%d unknown outcomes and %d blocking acquires that succeeded, want some of each", unknown, blockingOK)
	}
	want := porcupine.Ok
	if broken {
		want = porcupine.Illegal
	}
	if res != want {
		t.Fatalf("history judged %s, want %s", res, want)
	}
}
