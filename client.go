package redislock

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/wait"
	"github.com/go-redis-lock/redislock/internal/watch"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// DefaultKeyPrefix is python-redis-lock's prefix of lock keys: the lock
// named "reports" lives in the key "lock:reports", and its waiters wait on
// the list "lock-signal:reports".
const DefaultKeyPrefix = "lock:"

// checkName returns errInvalidHashTag when name, under ks, would not give
// keys of one slot (see wire.Scheme.TagSafe).
func checkName(ks wire.Scheme, name string) error {
	if !ks.TagSafe(name) {
		return errInvalidHashTag
	}
	return nil
}

// errRing says why a Ring is refused.
var errRing = errors.New("a go-redis Ring shards keys by its own hash; use a *redis.Client per node, or a ClusterClient")

// checkClient returns ErrUnsupportedClient for a client the library
// cannot keep its promises on: a *redis.Ring, whose shards do not share
// the signal list of a lock with its key (BLPOP and the release's LPUSH
// may go to different shards unless every key is hash-tagged), nor send
// WAIT to the shard of the key.
// isNil reports whether client is nil, or a nil pointer (a typed nil
// *redis.Client in the interface): either would panic at its first command.
func isNil(client redis.UniversalClient) bool {
	if client == nil {
		return true
	}
	v := reflect.ValueOf(client)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func checkClient(client redis.UniversalClient) error {
	if _, ok := client.(interface{ Options() *redis.RingOptions }); ok { // a Ring, or a type around one
		return fmt.Errorf("%w (%w)", ErrUnsupportedClient, errRing)
	}
	return nil
}

// Shutdown closes the connections and stops the goroutines this package
// runs beside the given clients (all when none is given), which otherwise
// stop 30 s after they were last needed, and waits for them. An Acquire
// waiting then returns an error matching redis.ErrClosed; held keys are no
// longer watched, but renewal and the local deadline still end holds in
// time. Anything used later starts them again. Call it when a process
// exits with holds or waits live, or in a test before looking for leaked
// goroutines (redislocktest's clients do).
func Shutdown(clients ...redis.UniversalClient) {
	ours := func(c redis.UniversalClient) bool {
		return len(clients) == 0 || slices.ContainsFunc(clients, func(x redis.UniversalClient) bool { return sameClient(x, c) })
	}
	wait.Close(ours)
	watch.Close(ours)
}

// sameClient reports whether a and b are the same client, without
// comparing values whose type is not comparable.
func sameClient(a, b redis.UniversalClient) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}
