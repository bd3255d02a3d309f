// Package registry holds what the library keeps beside each user client:
// the wait runtimes and the local wait queues (internal/wait), the key
// trackers (internal/watch), and the tests' tuning of them. It is the
// library's only package-level mutable state.
//
// An entry is keyed by its kind, the user's client (compared as an
// interface value: a client of a type that is not comparable cannot be a
// key, and callers keep nothing for one, see Keyable) and what the kind is
// per: the node's address for runtimes and trackers on a cluster ("" on a
// single node), the lock key for queues. Each kind's package owns its
// entries' lifecycle: it adds them on first use and removes them when they
// wind down or are closed. The registry takes no lock of its own beyond
// the map's, and calls no entry while it ranges: any lock order is the
// kinds' own.
package registry

import (
	"reflect"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kind is what an entry is.
type Kind uint8

const (
	// Runtime is a wait runtime (internal/wait), per node.
	Runtime Kind = iota + 1
	// Queue is the local FIFO of one lock key's waiters (internal/wait).
	Queue
	// Tracker is a key tracker (internal/watch), per node.
	Tracker
	// Tuned is a Tuning, per client.
	Tuned
)

// Key names an entry.
type Key struct {
	Kind   Kind
	Client redis.UniversalClient
	Sub    string // the node's address, the lock key, or ""
}

var entries sync.Map // Key -> any

// Keyable reports whether client can be part of a Key.
func Keyable(client redis.UniversalClient) bool {
	return client != nil && reflect.TypeOf(client).Comparable()
}

// Load returns the entry of k.
func Load(k Key) (any, bool) { return entries.Load(k) }

// LoadOrStore returns the entry of k, storing v when there is none; loaded
// says which.
func LoadOrStore(k Key, v any) (actual any, loaded bool) { return entries.LoadOrStore(k, v) }

// CompareAndDelete removes the entry of k if it is v.
func CompareAndDelete(k Key, v any) bool { return entries.CompareAndDelete(k, v) }

// Range calls f for each entry of kind, until f returns false.
func Range(kind Kind, f func(k Key, v any) bool) {
	entries.Range(func(k, v any) bool {
		if key := k.(Key); key.Kind == kind {
			return f(key, v)
		}
		return true
	})
}

// Tuning is what a test may change of the machinery run beside one
// client; a zero field keeps the default.
type Tuning struct {
	Idle     time.Duration // how long a wait runtime outlives its last wait
	Patience time.Duration // how long a call retries topology replies
	Cut      time.Duration // how long a cancelled wait's BLPOP has to be woken before its read is cut; < 0: such waits run in lane goroutines
}

// Tune sets client's tuning; the returned func restores the previous one.
func Tune(client redis.UniversalClient, t Tuning) (undo func()) {
	k := Key{Kind: Tuned, Client: client}
	old, had := entries.Swap(k, t)
	return func() {
		if had {
			entries.Store(k, old)
		} else {
			entries.Delete(k)
		}
	}
}

// TuningOf returns client's tuning (zero: the defaults).
func TuningOf(client redis.UniversalClient) Tuning {
	if !Keyable(client) {
		return Tuning{}
	}
	if v, ok := entries.Load(Key{Kind: Tuned, Client: client}); ok {
		return v.(Tuning)
	}
	return Tuning{}
}
