package redislock_test

import (
	"context"
	"fmt"
	"math/bits"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// semSize is the size of the semaphore of the linearizability check.
const semSize = 2

// semModel is the counting model: the state is the set of clients holding
// a permit (a bit each), never more than semSize of them. Its inputs and
// outcomes are the mutex model's, judged the same way (see mutexModel).
var semModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{uint(0)} },
	Step: func(state, input, output any) []any {
		held, in, out := state.(uint), input.(mutexInput), output.(outcome)
		me := uint(1) << in.client
		mine := held&me != 0
		if in.acquire {
			room := bits.OnesCount(held) < semSize
			switch out {
			case outOK:
				if mine || room { // ours already: a try whose reply was lost took it
					return []any{held | me}
				}
				return nil
			case outRefused:
				return []any{held}
			}
			if !mine && room {
				return []any{held, held | me}
			}
			return []any{held}
		}
		switch out {
		case outOK:
			if mine {
				return []any{held &^ me}
			}
			return nil
		case outRefused:
			if !mine {
				return []any{held}
			}
			return nil
		}
		return []any{held, held &^ me}
	},
	DescribeOperation: mutexModel.DescribeOperation,
	DescribeState: func(state any) string {
		return fmt.Sprintf("holders %b", state.(uint))
	},
}

// realSemaphore is one participant: it holds the permit its last acquire
// returned, and releases that one.
type realSemaphore struct {
	s *redislock.Semaphore
	p *redislock.Permit
}

func (m *realSemaphore) acquire(ctx context.Context, blocking bool) error {
	var (
		p   *redislock.Permit
		err error
	)
	if blocking {
		p, err = m.s.Acquire(ctx)
	} else {
		p, err = m.s.TryAcquire(ctx)
	}
	if err == nil {
		m.p = p
	}
	return err
}

func (m *realSemaphore) release(ctx context.Context) error {
	if m.p == nil {
		return redislock.ErrNotAcquired
	}
	return m.p.Release(ctx)
}

// brokenSemaphore releases as a bare counter would: it frees a permit,
// whoever holds it (the one that expires first), even when the caller
// holds none.
type brokenSemaphore struct {
	realSemaphore
	c *redis.Client
}

func (m *brokenSemaphore) release(ctx context.Context) error {
	m.realSemaphore.release(ctx) // clears the permit's own state; its result is ignored
	return m.c.ZPopMin(ctx, m.s.Key()).Err()
}

// Histories of a size-2 semaphore recorded under faults (latency, dropped
// replies, blackholes; see history) are linearizable against the counting
// model; the broken semaphore's are not.
func TestSemaphoreLinearizable(t *testing.T) {
	t.Parallel()
	long(t, "records and checks histories under faults")
	andBroken(t, "semaphore", "release frees any permit", func(t *testing.T, broken bool) {
		h := historyOf(t, func(client *redis.Client) mutex {
			s := mustSemaphore(t, client, "pool", semSize, redislock.WithExpire(time.Minute))
			if broken {
				return &brokenSemaphore{realSemaphore{s: s}, client}
			}
			return &realSemaphore{s: s}
		})
		judge(t, semModel.ToModel(), h, broken)
	})
}
