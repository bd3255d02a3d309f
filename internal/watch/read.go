package watch

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
)

// check reads the dirty keys (all of them on new connections) and ends
// every hold whose key no longer holds its id.
func (t *tracker) check(c *trackConns) error {
	keys, upTo := t.dueKeys()
	if len(keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), trackerTimeout)
	defer cancel()
	pipe := c.rd.Pipeline()
	cmds := make([]*redis.Cmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Do(ctx, "GET", k)
	}
	_, err := pipe.Exec(ctx)
	// A GET left unanswered (the connection failed, or its set-up was
	// refused with an error reply) would read as an empty value: another
	// owner's id. It gets the pipeline's error instead, and is read again.
	topology.FailedPipeline(err, cmds...)
	if c.rdNew.Swap(false) {
		t.markAll() // a new connection of rd: keys read before are not tracked on it
	}
	var failed error
	for i, key := range keys {
		if err := t.read(key, cmds[i], upTo); err != nil {
			failed = err
		}
	}
	return failed
}

// dueKeys takes the keys to read now: every watched key after markAll,
// else the dirty ones whose read is not put off (see putOffLocked). upTo
// is the registration number of the last hold the reads may judge: those
// registered before they are sent.
func (t *tracker) dueKeys() (keys []string, upTo uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	upTo = t.seq
	if t.all {
		for k := range t.holds {
			keys = append(keys, k)
		}
		t.all = false
		clear(t.dirty)
		clear(t.armAt)
		return keys, upTo
	}
	now := time.Now()
	for k := range t.dirty {
		if t.putOffLocked(k, now) {
			continue
		}
		keys = append(keys, k)
		delete(t.dirty, k)
	}
	return keys, upTo
}

// putOffLocked reports whether the read of key waits, and has the wake
// timer fire when it is due: a new hold's key is first read at armAt (see
// armDelay), a key invalidated again and again, unchanged, at rereadAt
// (see spurious). t.mu is held.
func (t *tracker) putOffLocked(key string, now time.Time) bool {
	for _, pending := range [...]map[string]time.Time{t.armAt, t.rereadAt} {
		if at, ok := pending[key]; ok {
			if now.Before(at) {
				t.wakeByLocked(at)
				return true
			}
			delete(pending, key)
		}
	}
	return false
}

// read judges the holds of key by what cmd read, and returns the error of
// a read to do again after the backoff.
func (t *tracker) read(key string, cmd *redis.Cmd, upTo uint64) error {
	v, err := cmd.Text()
	missing := errors.Is(err, redis.Nil)
	kind, _ := topology.Classify(err)
	switch {
	case missing:
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		// Not a string: someone else made the key something else.
		v = ""
	case kind == topology.Moved || kind == topology.Ask || kind == topology.ReadOnly:
		// This node no longer answers for the key (its slot moved, or
		// the node became a replica). Its holds are watched again where
		// the key is now; meanwhile renewal finds a loss.
		for _, w := range t.unwatchKey(key) {
			w.rewatch()
		}
		return nil
	case err != nil:
		// LOADING, a connection lost...: read it again after the
		// backoff.
		t.requeue([]string{key})
		return err
	}
	t.settle(key, v, missing, upTo)
	return nil
}

// requeue has keys read again after the backoff (no poke: it would spin).
func (t *tracker) requeue(keys []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, key := range keys {
		if _, ok := t.holds[key]; ok {
			t.dirty[key] = struct{}{}
		}
	}
}

// settle records that key was read (Redis now tracks it) and ends every
// hold of key whose id is not v (missing: no key) among
// those registered up to upTo: a hold registered later was taken after the
// read was sent (a quick hand-over between two Locks of this process), and
// the value read says nothing of it; it is read again for itself.
func (t *tracker) settle(key, v string, missing bool, upTo uint64) {
	var lostHolds []*Watch
	t.mu.Lock()
	if _, ok := t.holds[key]; ok {
		t.tracked[key] = true
	}
	for h, n := range t.holds[key] {
		if n > upTo {
			continue
		}
		if missing || h.hold.ID() != v {
			lostHolds = append(lostHolds, h)
			delete(t.holds[key], h)
		}
	}
	if len(t.holds[key]) == 0 {
		t.dropKeyLocked(key)
		t.emptiedLocked()
	}
	t.mu.Unlock()
	for _, h := range lostHolds {
		h.hold.Lost(missing)
	}
}

// unwatchKey stops watching key for all its holds.
func (t *tracker) unwatchKey(key string) []*Watch {
	t.mu.Lock()
	defer t.mu.Unlock()
	var hs []*Watch
	for h := range t.holds[key] {
		h.clear()
		hs = append(hs, h)
	}
	t.dropKeyLocked(key)
	t.emptiedLocked()
	return hs
}

// handOver stops watching every key and has their holds watched again,
// each on its key's node as the slot map says then (see rewatch): a
// cluster node that stays unreachable (a dead master, replaced by its
// replica) must not keep them.
func (t *tracker) handOver() {
	t.mu.Lock()
	var hs []*Watch
	for key, holds := range t.holds {
		for h := range holds {
			h.clear()
			hs = append(hs, h)
		}
		t.dropKeyLocked(key)
	}
	t.emptiedLocked()
	t.mu.Unlock()
	for _, h := range hs {
		h.rewatch()
	}
}
