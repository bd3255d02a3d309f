package redislock

import (
	"context"
	"time"

	"github.com/go-redis-lock/redislock/internal/hold"
)

// holdEvents is a hold's view of its primitive's events (a hold does not
// point back to its primitive): hold.Events.
type holdEvents struct {
	e    *events
	name string
	kind Kind
}

func (he holdEvents) ref(h *hold.Hold) Event {
	return Event{Name: he.name, Key: h.Key(), ID: h.ID(), Kind: he.kind}
}

func (he holdEvents) End(h *hold.Hold, err error) { he.e.holdEnd(he.ref(h), h, err) }

func (he holdEvents) WatchRefused(h *hold.Hold, err error) { he.e.watchRefused(he.ref(h), err) }

func (he holdEvents) RenewalStart(h *hold.Hold, every time.Duration) {
	he.e.renewalStart(he.ref(h), every)
}

func (he holdEvents) RenewalExit(h *hold.Hold) { he.e.renewalExit(he.ref(h)) }

func (he holdEvents) ExtendStart(ctx context.Context, h *hold.Hold, by time.Duration) context.Context {
	return he.e.extendStart(ctx, he.ref(h), true, by)
}

func (he holdEvents) ExtendEnd(ctx context.Context, h *hold.Hold, by time.Duration, n int64, err error, left time.Duration, retrying bool) {
	he.e.extendEnd(ctx, he.ref(h), true, by, n, err, left, retrying)
}
