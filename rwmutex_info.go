package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// Status reads who holds the mutex, the writer or the readers (earliest
// expiry first), and who waits, in one round trip. Expired readers and
// lapsed waiters are dropped on the way.
func (rw *RWMutex) Status(ctx context.Context) (Status, error) {
	st, err := readRWInfo(ctx, rw.w.client, rw.w.name, rw.w.keys)
	if err != nil {
		return Status{}, rw.w.wrap(fmt.Errorf("status: %w", err))
	}
	return st, nil
}

func readRWInfo(ctx context.Context, client redis.UniversalClient, name string, keys []string) (Status, error) {
	var vals []any
	err := topology.Do(ctx, client, func() (err error) {
		vals, err = wire.RWInfo.Run(ctx, client, keys).Slice()
		return err
	})
	if err != nil {
		return Status{}, err
	}
	if len(vals) < 5 || len(vals)%2 != 1 {
		return Status{}, wire.ErrBadReply
	}
	writer, ok1 := vals[0].(string)
	pttl, ok2 := vals[1].(int64)
	ww, ok3 := vals[2].(int64)
	wr, ok4 := vals[3].(int64)
	ad, ok5 := vals[4].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return Status{}, wire.ErrBadReply
	}
	st := Status{WaitingWriters: int(ww), WaitingReaders: int(wr), AdmittedReaders: int(ad)}
	if writer != "" {
		ttl := time.Duration(pttl) * time.Millisecond
		if pttl < 0 {
			ttl = -1
		}
		st.Holders = append(st.Holders, LockInfo{Name: name, Key: keys[0], Owner: writer, TTL: ttl, Kind: KindWriter})
	}
	for i := 5; i+1 < len(vals); i += 2 {
		id, ok1 := vals[i].(string)
		ms, ok2 := vals[i+1].(int64)
		if !ok1 || !ok2 {
			return Status{}, wire.ErrBadReply
		}
		st.Holders = append(st.Holders, LockInfo{Name: name, Key: keys[2], Owner: id,
			TTL: time.Duration(ms) * time.Millisecond, Kind: KindReader})
	}
	return st, nil
}

// Reset drops the writer and every reader, whoever holds, and lets the
// waiters in as a writer's release would. The holders are not told until
// their renewal, or a writer's watch, finds the hold gone. It returns how
// many holds it dropped.
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
