package redislock_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// refusingClient returns a client of s whose new connections fail to set
// up, while refuse is set, with an error reply from the server (what a
// server at maxclients, a password rotated or a user's OnConnect that
// fails answer): the commands of a pipeline sent on such a connection were
// never sent, and go-redis leaves them without an error and without a
// value. failures counts the refused setups.
func refusingClient(t *testing.T, addr string) (c *redis.Client, refuse *atomic.Bool, failures *atomic.Int64) {
	refuse, failures = new(atomic.Bool), new(atomic.Int64)
	c = redis.NewClient(&redis.Options{Addr: addr, OnConnect: func(ctx context.Context, cn *redis.Conn) error {
		if !refuse.Load() {
			return nil
		}
		failures.Add(1)
		return cn.ConfigSet(ctx, "no-such-parameter", "1").Err() // an error reply
	}})
	t.Cleanup(func() { c.Close() })
	return c, refuse, failures
}

// A waiter whose wait connection cannot be set up (an error reply to its
// first commands) is not told it acquired: its BLPOP and the try behind it
// were never sent. (The try's empty result read as the SET NX's OK, and
// the waiter went on beside the holder.)
func TestWaitOnAConnectionRefusedAtSetupAcquiresNothing(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	holder := mustNew(t, admin, "job") // no expire: only a release frees it
	mustAcquire(t, ctx, holder)
	c, refuse, failures := refusingClient(t, s.Addr)
	if err := c.Ping(ctx).Err(); err != nil { // the first try goes on this connection
		t.Fatal(err)
	}
	refuse.Store(true)
	waiter := mustNew(t, c, "job", redislock.WithTracking(false))
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err := waiter.Acquire(wctx)
	if failures.Load() == 0 {
		t.Fatal("no wait connection was refused: the test did not set up its case")
	}
	if err == nil {
		t.Fatalf("Acquire() = nil while the holder holds (lock:job = %q)", admin.Get(ctx, "lock:job").Val())
	}
	if owner := admin.Get(ctx, "lock:job").Val(); owner != holder.ID() {
		t.Fatalf("lock:job = %q, want the holder's %q", owner, holder.ID())
	}
}

// The key watch's reader, reconnecting to a server that refuses the new
// connection with an error reply (maxclients reached: here for the reader
// alone, its subscriber still connected), judges nothing from the reads
// that were never sent: the hold goes on, and is watched again once the
// server lets the reader in. (The unsent GET's empty value read as another
// owner's id: the hold ended as taken over, once in about 450 runs of
// TestWatchSurvivesMaxClients, when a read began between the kill of the
// reader and the tracker's noticing its subscriber's.)
func TestWatchReaderRefusedAtSetupJudgesNothing(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	l := watchedHold(t, ctx, s.Client(), "job")
	reader, n := "", 0 // the tracking reader's id (redirected to the subscriber), and the clients
	within(t, 10*time.Second, "the watch's reader connected", func() bool {
		list, err := admin.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(list), "\n")
		for _, line := range lines {
			if f := clientField(line, "redir"); f != "" && f != "-1" {
				reader, n = clientField(line, "id"), len(lines)
			}
		}
		return reader != ""
	})
	rejected := func() int {
		n, _ := strconv.Atoi(infoField(t, admin, "stats", "rejected_connections"))
		return n
	}
	before := rejected()
	// Room for the connections there are but the reader: its next one is
	// refused.
	if err := admin.ConfigSet(ctx, "maxclients", strconv.Itoa(n-1)).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.ConfigSet(context.Background(), "maxclients", "10000") })
	if err := admin.Do(ctx, "CLIENT", "KILL", "ID", reader).Err(); err != nil {
		t.Fatal(err)
	}
	within(t, 10*time.Second, "the reader's new connection refused", func() bool { return rejected() > before })
	// A read that judged the unsent GET ends the hold at once, as its
	// reply comes in: nothing must end it for a while after.
	select {
	case <-l.Done():
		t.Fatalf("the hold ended while its reader could not connect: %v (lock:job = %q, ours %q)", l.Err(), admin.Get(ctx, "lock:job").Val(), l.ID())
	case <-time.After(500 * time.Millisecond):
	}
	if err := admin.ConfigSet(ctx, "maxclients", "10000").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Set(ctx, l.Key(), "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	lostWithin(t, l, 5*time.Second, redislock.ErrTakenOver, "a takeover once the reader connects again")
}

// clientField returns the value of field name in a CLIENT LIST line.
func clientField(line, name string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return ""
}
