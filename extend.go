package redislock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/go-redis-lock/redislock/internal/hold"
	"github.com/go-redis-lock/redislock/internal/topology"
)

// Extend sets the lock key's expire to d from now (0: this Lock's expire,
// as python-redis-lock's extend()), if the key holds this Lock's id, from
// any Lock with the same name and id. It also moves the hold's local
// deadline (see Done); renewals never shorten it, nor does WithMaxHold cap
// it. It returns an error matching ErrInvalidArgument, sending nothing, for
// a d below 1ms, 0 without expire, or one not longer than the safety
// margin; ErrNotAcquired when the key is missing or holds another id;
// ErrNotExpirable when it has no expire; the key is then unchanged, never
// recreated. ErrNotReplicated (WithReplicaAck) leaves the lock held, its
// local deadline unchanged.
func (l *Lock) Extend(ctx context.Context, d time.Duration) error {
	return l.extend(ctx, d)
}

// extend is Extend, for every primitive.
func (l *core) extend(ctx context.Context, d time.Duration) error {
	if d == 0 {
		d = l.expire
	}
	if d < time.Millisecond || d <= l.margin {
		return l.wrap(errInvalidDuration)
	}
	d = d.Truncate(time.Millisecond) // what Redis counts
	// The hold this extend is for, taken before it is sent: its reply must
	// not move the deadline of a later hold.
	h := l.current()
	if h != nil && !h.Ended() {
		giveBack, err := h.TakeExtending(ctx)
		if err != nil {
			return l.wrap(fmt.Errorf("extend: %w", err))
		}
		defer giveBack()
	}
	n, err, ackErr := l.sendExtend(ctx, h, d)
	switch {
	case err == nil && n == 0 && ackErr != nil:
		return l.wrap(ackErr)
	case err != nil:
		return l.wrap(fmt.Errorf("extend: %w", err))
	case n == 1 || n == 3:
		return l.wrap(ErrNotAcquired)
	case n == 2:
		return l.wrap(ErrNotExpirable)
	}
	return nil
}

// sendExtend runs the extend script by d for the Lock's id, telling h's
// watch (h may be nil) and the Observer, and moves h's deadline when the
// key was extended and, under WithReplicaAck, acknowledged (ackErr nil).
func (l *core) sendExtend(ctx context.Context, h *hold.Hold, d time.Duration) (n int64, err, ackErr error) {
	id := l.ownerID()
	if l.ev != nil {
		ctx = l.ev.extendStart(ctx, l.info(id), false, d)
	}
	sent := time.Now()
	if h != nil {
		h.ExpectBegin()
	}
	cmd, ackErr := l.ack.run(ctx, l.client, l.scripts.extend, l.extendKeys, id, strconv.FormatInt(d.Milliseconds(), 10))
	n, err = cmd.Int64()
	topology.NoteConnError(ctx, l.client, err)
	if h != nil {
		h.ExpectEnd(err == nil && n == 0)
	}
	if l.ev != nil {
		eerr := err
		if err == nil && n == 0 && ackErr != nil {
			eerr = ackErr
		}
		l.ev.extendEnd(ctx, l.info(id), false, d, n, eerr, 0, false)
	}
	if err == nil && n == 0 && ackErr == nil && h != nil {
		h.ExtendedBy(sent, d)
	}
	return n, err, ackErr
}
