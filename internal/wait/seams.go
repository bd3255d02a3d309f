package wait

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Seams for tests, the root package's included: they read or adjust the
// registries, never in a way a user's program could reach.

// Queues returns how many local wait queues the process holds.
func Queues() int {
	n := 0
	waitQueues.Range(func(_, _ any) bool { n++; return true })
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
	return nil
}

// SetIdle sets how long a runtime keeps its connections after its last
// wait, and returns the previous value.
func SetIdle(d time.Duration) (old time.Duration) {
	return time.Duration(runtimeIdle.Swap(int64(d)))
}

// HasRuntime reports whether client has a wait runtime.
func HasRuntime(client redis.UniversalClient) bool {
	found := false
	runtimes.Range(func(k, _ any) bool {
		found = found || k.(runtimeKey).client == client
		return !found
	})
	return found
}
