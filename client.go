package redislock

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
)

// topologyPatience bounds how long one call retries the replies of a
// changing topology (see internal/topology; a variable for the tests).
var topologyPatience = topology.DefaultPatience

// errRing says why a Ring is refused.
var errRing = errors.New("a go-redis Ring shards keys by its own hash; use a *redis.Client per node, or a ClusterClient")

// checkClient returns ErrUnsupportedClient for a client the library
// cannot keep its promises on: a *redis.Ring, whose shards do not share
// the signal list of a lock with its key (BLPOP and the release's LPUSH
// may go to different shards unless every key is hash-tagged), nor send
// WAIT to the shard of the key.
func checkClient(client redis.UniversalClient) error {
	if _, ok := client.(interface{ Options() *redis.RingOptions }); ok { // a Ring, or a type around one
		return fmt.Errorf("%w (%w)", ErrUnsupportedClient, errRing)
	}
	return nil
}
