package watch

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/registry"
)

// A Hold is what a Watch reports to: a hold of a key under an owner id.
type Hold interface {
	// ID is the owner id the key holds while the hold lasts.
	ID() string
	// Lost ends the hold: its key is gone (gone) or holds another id.
	Lost(gone bool)
	// Refused tells the hold that Redis refused the watch (see Refuses):
	// it is no longer watched.
	Refused(err error)
	// Done is closed when the hold ends.
	Done() <-chan struct{}
}

// A Watch watches the key of one hold, from Start to Stop.
type Watch struct {
	client redis.UniversalClient
	key    string
	hold   Hold

	// mu guards the fields below.
	mu          sync.Mutex
	t           *tracker      // watches the key; nil when not watched
	stopped     bool          // Stop was called: never watched again
	rewatchWait time.Duration // the last pause before watching again (see rewatch)
}

// Start starts watching key, which h holds on client. The returned Watch
// is not watched (Watched is false) where tracking is not available: a
// client type other than *redis.Client and *redis.ClusterClient, or a
// server that refused it lately. Stop it when the hold ends, and before
// the hold's own release is sent (which would read as a loss).
func Start(ctx context.Context, client redis.UniversalClient, key string, h Hold) *Watch {
	w := &Watch{client: client, key: key, hold: h}
	w.start(ctx)
	return w
}

func (w *Watch) start(ctx context.Context) {
	for range 3 { // a tracker closing as we come: take the next one
		t := trackerFor(ctx, w.client, w.key)
		if t == nil {
			return
		}
		switch t.add(w.key, w) {
		case addOK:
			w.set(t)
			return
		case addUnavailable:
			return
		}
	}
}

// set records that t watches w's key. A Watch stopped, or whose hold
// ended, meanwhile is taken out again.
func (w *Watch) set(t *tracker) {
	w.mu.Lock()
	ended := w.stopped || isClosed(w.hold.Done())
	if !ended {
		w.t = t
	}
	w.mu.Unlock()
	if ended {
		t.remove(w.key, w)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// clear forgets w's tracker; called under the tracker's lock.
func (w *Watch) clear() {
	w.mu.Lock()
	w.t = nil
	w.mu.Unlock()
}

// Stop stops watching, for good. It is safe to call more than once, and
// on a nil Watch.
func (w *Watch) Stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	t := w.t
	w.t, w.stopped = nil, true
	w.mu.Unlock()
	if t != nil {
		t.remove(w.key, w)
	}
}

// Watched reports whether a tracker watches w's key now.
func (w *Watch) Watched() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.t != nil
}

// ExpectBegin and ExpectEnd bracket our own change of the key (a renewal,
// an Extend): when the change was made (changed), its invalidation must
// come soon, or the watch is not working and every key is read again (see
// tracker.expectBegin). Both are no-ops on a nil or unwatched Watch.
func (w *Watch) ExpectBegin() {
	if t := w.tracker(); t != nil {
		t.expectBegin(w.key)
	}
}

// ExpectEnd: see ExpectBegin.
func (w *Watch) ExpectEnd(changed bool) {
	if t := w.tracker(); t != nil {
		t.expectEnd(w.key, changed)
	}
}

func (w *Watch) tracker() *tracker {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.t
}

// Pauses before a hold is watched again after its key moved (see
// rewatch): doubling while the key is still elsewhere (a slot that
// migrates answers ASK until the migration ends).
const (
	minRewatch = 50 * time.Millisecond
	maxRewatch = time.Second
)

// rewatch has w watched again after a pause, on the node that serves its
// key then (the slot map reloaded first). It does nothing once the hold
// ended or w was stopped (a Release under way).
func (w *Watch) rewatch() {
	w.mu.Lock()
	w.rewatchWait = min(max(w.rewatchWait*2, minRewatch), maxRewatch)
	d := w.rewatchWait
	w.mu.Unlock()
	go func() {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-w.hold.Done():
			return
		case <-timer.C:
		}
		w.mu.Lock()
		stopped := w.stopped
		w.mu.Unlock()
		if stopped {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), trackerTimeout)
		defer cancel()
		if c, ok := w.client.(*redis.ClusterClient); ok {
			_ = c.ForEachMaster(ctx, func(context.Context, *redis.Client) error { return nil }) // reloads the slot map
		}
		w.start(ctx)
	}()
}

// Close stops the trackers of the clients ours accepts and closes their
// connections. Holds they watched are no longer watched: a loss is then
// found at the next renewal or the local deadline. Holds started later
// start trackers again.
func Close(ours func(redis.UniversalClient) bool) {
	registry.Range(registry.Tracker, func(k registry.Key, v any) bool {
		if !ours(k.Client) {
			return true
		}
		t := v.(*tracker)
		t.mu.Lock()
		t.closed = true
		for key, ws := range t.holds {
			for w := range ws {
				w.clear()
			}
			delete(t.holds, key)
		}
		if t.idle != nil {
			t.idle.Stop()
			t.idle = nil
		}
		c, exited := t.conns, t.exited
		t.conns = nil
		t.mu.Unlock()
		t.poke()
		if exited != nil {
			<-exited
		}
		if c != nil {
			c.close()
		}
		registry.CompareAndDelete(k, t)
		return true
	})
}

// Probe sets up a tracker's connections to the node of opt, as a hold
// would, and closes them again: nil when holds there can be watched. An
// error for which Refuses is true says the server (or an ACL, or a proxy)
// refuses tracking; any other may pass (see Refuses).
func Probe(opt redis.Options) error {
	c, err := connectTracking(opt)
	if err != nil {
		return err
	}
	c.close()
	return nil
}

// Counters, for the tests: pokes of a tracker's goroutine, rounds of its
// loop (each after a wake-up), and firings of its wake timer.
type Counters struct {
	Pokes, Rounds, WakeFires int64
	Lingering                int // trackers whose run sleeps out its linger
}

// Count returns the counters of client's trackers so far.
func Count(client redis.UniversalClient) Counters {
	var c Counters
	registry.Range(registry.Tracker, func(k registry.Key, v any) bool {
		if k.Client == client {
			t := v.(*tracker)
			c.Pokes += t.pokes.Load()
			c.Rounds += t.rounds.Load()
			c.WakeFires += t.wakeFires.Load()
			t.mu.Lock()
			if t.lingering {
				c.Lingering++
			}
			t.mu.Unlock()
		}
		return true
	})
	return c
}
