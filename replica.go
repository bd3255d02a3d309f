package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// replicaAck is the WithReplicaAck setting: after each write of the lock
// key, WAIT for n replicas, at most timeout. n == 0 means off.
type replicaAck struct {
	n       int
	timeout time.Duration
}

func (a replicaAck) on() bool { return a.n > 0 }

// node returns the client to pipeline a write and its WAIT on: WAIT counts
// the replicas that have the writes of its own connection, so both must go
// to the master of key over one connection. That is client itself, except
// on a cluster, where it is the client of key's master.
func node(ctx context.Context, client redis.UniversalClient, key string) (redis.UniversalClient, error) {
	if cluster, ok := client.(*redis.ClusterClient); ok {
		return cluster.MasterForKey(ctx, key)
	}
	return client, nil
}

// run runs script s and, when the ack is on, WAIT right behind it on the
// same connection. It returns the script's command and an error that
// matches ErrNotReplicated when fewer than n replicas acknowledged; the
// caller decides whether the script wrote anything that needed them.
func (a replicaAck) run(ctx context.Context, client redis.UniversalClient, s *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	if !a.on() {
		return s.Run(ctx, client, keys, args...), nil
	}
	n, err := node(ctx, client, keys[0])
	if err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd, nil
	}
	// EVAL, not EVALSHA: a NOSCRIPT reply would come with a WAIT that
	// blocks for nothing, the whole timeout when replicas lag.
	pipe := n.Pipeline()
	cmd := s.Eval(ctx, pipe, keys, args...)
	wait := a.queue(ctx, pipe)
	_, _ = pipe.Exec(ctx) // each command's own error is read below
	return cmd, a.check(wait)
}

// queue adds WAIT to pipe.
func (a replicaAck) queue(ctx context.Context, pipe redis.Pipeliner) *redis.Cmd {
	return pipe.Do(ctx, "WAIT", a.n, a.timeout.Milliseconds())
}

// check turns WAIT's reply into nil or an error matching ErrNotReplicated.
func (a replicaAck) check(wait *redis.Cmd) error {
	acks, err := wait.Int64()
	if err != nil {
		return fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	}
	if acks < int64(a.n) {
		return fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, acks, a.n, a.timeout)
	}
	return nil
}
