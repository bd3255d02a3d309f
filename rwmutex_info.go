package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// RWInfo is who holds an RWMutex and who waits for it, as Info reads it.
type RWInfo struct {
	Writer         string        // the writer's id; "" when no writer holds
	WriterTTL      time.Duration // what the writer key has left; negative: no expire
	Readers        []Holder      // the readers, earliest expiry first
	WaitingWriters int           // writers registered as waiting (new readers wait behind them)
	WaitingReaders int           // readers registered as waiting
	// AdmittedReaders counts the waiting readers a writer's release let
	// in ahead of the waiting writers and that have not all come in yet:
	// while it is above 0, no writer gets in. Each stands for one client's
	// readers, as WaitingReaders does.
	AdmittedReaders int
}

// Info reads who holds the mutex and who waits, in one round trip.
// Expired readers and lapsed registrations are dropped on the way.
func (rw *RWMutex) Info(ctx context.Context) (RWInfo, error) {
	info, err := readRWInfo(ctx, rw.w.client, rw.w.keys)
	if err != nil {
		return RWInfo{}, rw.w.wrap(fmt.Errorf("info: %w", err))
	}
	return info, nil
}

func readRWInfo(ctx context.Context, client redis.UniversalClient, keys []string) (RWInfo, error) {
	var vals []any
	err := topology.Do(ctx, client, func() (err error) {
		vals, err = wire.RWInfo.Run(ctx, client, keys).Slice()
		return err
	})
	if err != nil {
		return RWInfo{}, err
	}
	if len(vals) < 5 || len(vals)%2 != 1 {
		return RWInfo{}, wire.ErrBadReply
	}
	writer, ok1 := vals[0].(string)
	pttl, ok2 := vals[1].(int64)
	ww, ok3 := vals[2].(int64)
	wr, ok4 := vals[3].(int64)
	ad, ok5 := vals[4].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return RWInfo{}, wire.ErrBadReply
	}
	info := RWInfo{Writer: writer, WaitingWriters: int(ww), WaitingReaders: int(wr), AdmittedReaders: int(ad)}
	if writer != "" {
		info.WriterTTL = time.Duration(pttl) * time.Millisecond
		if pttl < 0 {
			info.WriterTTL = -1
		}
	}
	for i := 5; i+1 < len(vals); i += 2 {
		id, ok1 := vals[i].(string)
		ms, ok2 := vals[i+1].(int64)
		if !ok1 || !ok2 {
			return RWInfo{}, wire.ErrBadReply
		}
		info.Readers = append(info.Readers, Holder{ID: id, TTL: time.Duration(ms) * time.Millisecond})
	}
	return info, nil
}

// Reset drops the writer and every reader, whoever holds, and lets the
// waiters in as a writer's release would. It is for administration and
// recovery: the holders are not told until their renewal (or, for a
// watched writer, its watch) finds the hold gone. It returns how many
// holds it dropped.
func (rw *RWMutex) Reset(ctx context.Context) (int, error) {
	n, err := resetRWMutex(ctx, rw.w.client, rw.w.keys, rw.w.signalExpireMS)
	if err != nil {
		return 0, rw.w.wrap(fmt.Errorf("reset: %w", err))
	}
	return n, nil
}

func resetRWMutex(ctx context.Context, client redis.UniversalClient, keys []string, signalExpireMS string) (int, error) {
	var n int
	err := topology.Do(ctx, client, func() (err error) {
		n, err = wire.RWReset.Run(ctx, client, keys, signalExpireMS).Int()
		return err
	})
	return n, err
}
