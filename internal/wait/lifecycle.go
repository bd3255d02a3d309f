package wait

import (
	"context"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/registry"
)

// A runtime's life: it winds down after its last wait (runtimeIdle), is
// closed by Close (the root's Shutdown), and, on a Sentinel client, retires
// when the user's client reaches another master (checkMaster).

// masterCheckEvery is how often a Sentinel client's runtime with waits
// compares its server with the one the user's client reaches.
const masterCheckEvery = 500 * time.Millisecond

// checkMaster retires rt once its connections do not reach the master the
// Sentinels name (a failover: see waitRuntime.sentinel): the waits then
// start again on a new runtime, whose connections go to the new master. It
// asks the Sentinels (see topology.Pin) only while lanes run.
func (rt *waitRuntime) checkMaster() {
	defer rt.lanes.Done()
	tick := time.NewTicker(masterCheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-rt.quit:
			return
		case <-tick.C:
		}
		rt.mu.Lock()
		busy := rt.running > 0
		rt.mu.Unlock()
		if busy && rt.moved() {
			rt.retire()
			return
		}
	}
}

// moved reports whether the Sentinels name another master than the one
// rt's connections reach.
func (rt *waitRuntime) moved() bool {
	ctx, cancel := context.WithTimeout(context.Background(), masterCheckEvery)
	defer cancel()
	return rt.pin.Moved(ctx)
}

// retire takes rt out of the registry and wakes its BLPOPs: each of its
// waiters has a round that ends with nothing (its waiter tries on the
// user's client, then waits on the client's new runtime), and rt winds
// down as soon as its lanes stop.
func (rt *waitRuntime) retire() {
	registry.CompareAndDelete(rt.key, rt)
	rt.mu.Lock()
	rt.retired = true
	var lanes []*lane
	var wakes []string
	for _, ln := range rt.all {
		if w := ln.wakeLocked(); w != "" {
			lanes, wakes = append(lanes, ln), append(wakes, w)
		}
	}
	rt.mu.Unlock()
	for i, ln := range lanes {
		ln.push(wakes[i])
	}
}

// laneStoppedLocked counts a lane's goroutine out; with none left the
// runtime winds down after runtimeIdle. One timer serves a runtime whose
// lanes stop and start again many times a second (a lock handed back and
// forth): it is armed when the last lane stops and no timer is armed, and
// windDown re-arms it for what is left of the idle time.
func (rt *waitRuntime) laneStoppedLocked() {
	rt.running--
	// A runtime on the user's client (own == nil: a client type without
	// options) has no connections to close, but winds down all the same:
	// it must leave the registry, which would otherwise keep every such
	// client for good. Test hooks pin a runtime (see AddHook).
	if rt.running > 0 || rt.closed || (len(rt.hooks) > 0 && !rt.retired) {
		return
	}
	rt.stopped = time.Now()
	switch {
	case rt.idle == nil:
		rt.idle = time.AfterFunc(rt.idleFor(), rt.windDown)
	case rt.retired:
		rt.idle.Reset(0)
	}
}

// idleFor is how long the runtime stays with no lane running before it
// winds down.
func (rt *waitRuntime) idleFor() time.Duration {
	if rt.retired {
		return 0
	}
	if d := registry.TuningOf(rt.key.Client).Idle; d > 0 {
		return d
	}
	return runtimeIdle
}

// windDown closes a runtime that has been idle for its idle time (see
// laneStoppedLocked), or re-arms its timer for the rest of it. It is
// marked closed under the same lock as the check that it is idle, so that
// a waiter that comes meanwhile takes a new runtime.
func (rt *waitRuntime) windDown() {
	rt.mu.Lock()
	if rt.closed || rt.idle == nil {
		rt.mu.Unlock()
		return
	}
	if rt.running > 0 { // its last lane to stop arms a timer again
		rt.idle = nil
		rt.mu.Unlock()
		return
	}
	if left := rt.idleFor() - time.Since(rt.stopped); left > 0 {
		rt.idle.Reset(left)
		rt.mu.Unlock()
		return
	}
	rt.closed, rt.idle = true, nil
	rt.mu.Unlock()
	rt.shut()
}

// close stops the runtime: its BLPOPs in flight fail (their waiters get
// redis.ErrClosed), its lanes' goroutines are waited for and its
// connections closed. A waiter that comes later takes a new runtime.
func (rt *waitRuntime) close() {
	rt.mu.Lock()
	rt.closed = true
	if rt.idle != nil {
		rt.idle.Stop()
		rt.idle = nil
	}
	rt.mu.Unlock()
	rt.shut()
}

// shut does the work of close, once the runtime is marked closed.
func (rt *waitRuntime) shut() {
	registry.CompareAndDelete(rt.key, rt)
	if rt.stopCheck != nil {
		rt.stopCheck()
	}
	if rt.own != nil {
		_ = rt.own.Close() // a BLPOP in flight fails at once
	}
	rt.mu.Lock()
	lanes := slices.Clone(rt.all)
	rt.mu.Unlock()
	for _, ln := range lanes {
		if ln.rc != nil {
			_ = ln.rc.Close()
		}
	}
	rt.lanes.Wait()
}

// Close closes the runtimes and the local queues of the clients ours
// accepts. A wait in Redis at that moment ends with an error matching
// redis.ErrClosed, and so does every waiter queued behind it in this
// process (see Ticket.Shut); a wait started later makes a new runtime.
func Close(ours func(redis.UniversalClient) bool) {
	registry.Range(registry.Queue, func(k registry.Key, v any) bool {
		if ours(k.Client) {
			v.(*Queue).shutDown()
		}
		return true
	})
	registry.Range(registry.Runtime, func(k registry.Key, v any) bool {
		if ours(k.Client) {
			v.(*waitRuntime).close()
		}
		return true
	})
}
