package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
)

// replicaAck is the WithReplicaAck setting: after each write of the lock
// key, WAIT for n replicas, at most timeout. n == 0 means off.
type replicaAck struct {
	n       int
	timeout time.Duration
}

func (a replicaAck) on() bool { return a.n > 0 }

// fits returns errInvalidReplicaAck when the ack's timeout is more than a
// third of the client's read timeout rt: a waiter's BLPOP and the WAIT
// behind it share two thirds of rt (see maxSliceFor), and a longer WAIT
// would leave the BLPOP slices so short that waiting turns into polling.
func (a replicaAck) fits(rt time.Duration) error {
	if a.on() && rt > 0 && a.timeout > rt/3 {
		return errInvalidReplicaAck
	}
	return nil
}

// run runs script s and, when the ack is on, WAIT right behind it on the
// same connection: WAIT counts the replicas that have the writes of its
// own connection, so both go to the master of the key over one
// connection, in a pipeline (on a cluster, the client of the key's
// master, following MOVED and ASK itself: see route). Topology replies
// are retried within ctx (see topology.Do). It returns the script's
// command and an error that matches ErrNotReplicated when fewer than n
// replicas acknowledged; the caller decides whether the script wrote
// anything that needed them.
// Run is run: a replicaAck is a hold.Acker.
func (a replicaAck) Run(ctx context.Context, client redis.UniversalClient, s *redis.Script, keys []string, args ...any) (cmd *redis.Cmd, ackErr error) {
	return a.run(ctx, client, s, keys, args...)
}

func (a replicaAck) run(ctx context.Context, client redis.UniversalClient, s *redis.Script, keys []string, args ...any) (cmd *redis.Cmd, ackErr error) {
	return a.runOr(ctx, client, s, keys, args, nil, nil)
}

// runOr is run, except that after a topology reply the script is sent
// with soloKeys and soloArgs instead, when given (the acquire without its
// turn keys: see Lock.try).
func (a replicaAck) runOr(ctx context.Context, client redis.UniversalClient, s *redis.Script, keys []string, args []any, soloKeys []string, soloArgs []any) (cmd *redis.Cmd, ackErr error) {
	fallBack := func(err error) {
		if soloKeys != nil && topology.Is(err) {
			keys, args = soloKeys, soloArgs
		}
	}
	if !a.on() {
		_ = topology.Do(ctx, client, func() error {
			cmd = s.Run(ctx, client, keys, args...)
			fallBack(cmd.Err())
			return cmd.Err()
		})
		return cmd, nil
	}
	var r topology.Route
	_ = topology.Do(ctx, client, func() error {
		n, asking, done, err := r.Node(ctx, client, keys[0])
		if err != nil {
			cmd = redis.NewCmd(ctx)
			cmd.SetErr(err)
			return err
		}
		defer done()
		// EVAL, not EVALSHA: a NOSCRIPT reply would come with a WAIT that
		// blocks for nothing, the whole timeout when replicas lag.
		pipe := n.Pipeline()
		if asking {
			pipe.Do(ctx, "ASKING")
		}
		cmd = s.Eval(ctx, pipe, keys, args...)
		wait := a.queue(ctx, pipe)
		_, err = pipe.Exec(ctx) // each command's own error is read below
		topology.FailedPipeline(err, cmd, wait)
		ackErr = a.check(wait)
		r.Follow(cmd.Err())
		fallBack(cmd.Err())
		return cmd.Err()
	})
	return cmd, ackErr
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
