package wait

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/registry"
)

// Seams for tests, the root package's included: they read or adjust the
// registries, never in a way a user's program could reach.

// Queues returns how many local wait queues the process holds.
func Queues() int {
	n := 0
	registry.Range(registry.Queue, func(registry.Key, any) bool { n++; return true })
	return n
}

// Waiters returns how many waiters the local wait queues hold.
func Waiters() int {
	n := 0
	registry.Range(registry.Queue, func(_ registry.Key, v any) bool {
		q := v.(*Queue)
		q.mu.Lock()
		n += len(q.waiters)
		q.mu.Unlock()
		return true
	})
	return n
}

// AddHook adds hook to the connections that client's waits run on, as
// client.AddHook(hook) does to client's own: go-redis hooks do not reach a
// client made from another's options. The runtime keeps the hook (and its
// connections) until Close.
func AddHook(client redis.UniversalClient, hook redis.Hook) error {
	rt, err := runtimeFor(context.Background(), client, "")
	if err != nil {
		return err
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.hooks = append(rt.hooks, hook)
	if rt.own != nil {
		rt.own.AddHook(hook)
	}
	for _, ln := range rt.all {
		if ln.rc != nil {
			ln.rc.AddHook(hook)
		}
	}
	return nil
}

// HasRuntime reports whether client has a wait runtime.
func HasRuntime(client redis.UniversalClient) bool {
	found := false
	registry.Range(registry.Runtime, func(k registry.Key, _ any) bool {
		found = found || k.Client == client
		return !found
	})
	return found
}
