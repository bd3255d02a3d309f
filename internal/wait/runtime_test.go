package wait

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/redistest"
)

// serverClient starts a redis-server and returns a client of it whose
// runtime the test's end closes.
func serverClient(t *testing.T) *redis.Client {
	t.Helper()
	c := redistest.Start(t).Client()
	t.Cleanup(func() {
		Close(func(x redis.UniversalClient) bool { return x == c })
		_ = c.Close()
	})
	return c
}

// serverConns returns how many connections the server serves, less the
// one this asks on.
func serverConns(t *testing.T, c *redis.Client) int {
	t.Helper()
	list, err := c.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, "\n") - 1
}

// A signal pushed while waiters wait reaches one of them, on the
// runtime's connections (at most maxLanes), never the client's pool.
func TestWaitsRunOnTheirOwnConnections(t *testing.T) {
	c := serverClient(t)
	const n = 20
	rounds := make(chan Round, n)
	reqs := make([]*Req, n)
	for i := range n {
		// Slices longer than the test and no try (a lone waiter's round
		// ends with its try when a newcomer wakes its lane): no round
		// ends but by the signal or Close.
		reqs[i] = NewReq(fmt.Sprintf("lock-signal:%d", i), time.Minute, nil)
		go func() {
			r, err := On(context.Background(), c, reqs[i])
			if err != nil {
				t.Error(err)
			}
			rounds <- r
		}()
	}
	for _, r := range reqs {
		awaitSent(t, r)
	}
	rt := reqs[0].rt.Load()
	rt.mu.Lock()
	lanes := len(rt.all)
	rt.mu.Unlock()
	if lanes > maxLanes {
		t.Fatalf("%d lanes for %d waiters, want at most %d", lanes, n, maxLanes)
	}
	if got := serverConns(t, c); got > maxLanes+2 {
		t.Fatalf("%d connections for %d waiters, want at most %d lanes and 2 for wake-ups", got, n, maxLanes)
	}
	if err := c.LPush(context.Background(), "lock-signal:7", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if st := c.PoolStats(); st.TotalConns > 1 { // the one that asked CLIENT LIST
		t.Fatalf("the client's pool holds %d connections: waits took them", st.TotalConns)
	}
	popped, got := 0, 0
	timeout := time.After(10 * time.Second)
	for popped == 0 {
		select {
		case r := <-rounds:
			got++
			if r.Popped {
				popped++
			}
		case <-timeout:
			t.Fatal("no waiter took the signal within 10 s")
		}
	}
	if n, _ := c.LLen(context.Background(), "lock-signal:7").Result(); n != 0 {
		t.Fatalf("the signal is still in its list (%d)", n)
	}
	if !HasRuntime(c) {
		t.Fatal("no runtime recorded for the client")
	}
	Close(func(x redis.UniversalClient) bool { return x == c })
	for ; got < n; got++ {
		if r := <-rounds; r.Popped {
			t.Fatal("a second waiter popped the one signal")
		}
	}
}

// A lone waiter's try runs behind its BLPOP, in the same round trip, and
// its outcome comes with the round's.
func TestLoneWaitersTryIsPipelined(t *testing.T) {
	c := serverClient(t)
	req := NewReq("lock-signal:solo", time.Minute, []any{"echo", "try"})
	done := make(chan Round, 1)
	go func() {
		r, err := On(context.Background(), c, req)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	awaitSent(t, req)
	if err := c.LPush(context.Background(), "lock-signal:solo", 1).Err(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if !r.Popped || r.Try == nil {
		t.Fatalf("round %+v: want the signal popped and the try sent", r)
	}
	if v, err := r.Try.Text(); err != nil || v != "try" {
		t.Fatalf("the try answered %q, %v", v, err)
	}
}

// A waiter that gives up ends at once with Gone, whether it had been
// sent or not; Close ends a wait in Redis with redis.ErrClosed.
func TestAbandonAndClose(t *testing.T) {
	c := serverClient(t)
	req := NewReq("lock-signal:a", 10*time.Second, nil)
	done := make(chan Round, 1)
	go func() {
		r, _ := On(context.Background(), c, req)
		done <- r
	}()
	awaitSent(t, req)
	start := time.Now()
	req.Abandon()
	select {
	case r := <-done:
		if !r.Gone {
			t.Fatalf("abandoned round: %+v, want Gone", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an abandoned wait did not end")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("abandon took %v", d)
	}

	early := NewReq("lock-signal:b", 10*time.Second, nil)
	early.Abandon()
	if r, _ := On(context.Background(), c, early); !r.Gone {
		t.Fatalf("a round abandoned before it was sent: %+v, want Gone", r)
	}

	var wg sync.WaitGroup
	wg.Add(1)
	var closed Round
	last := NewReq("lock-signal:c", 10*time.Second, nil)
	go func() {
		defer wg.Done()
		closed, _ = On(context.Background(), c, last)
	}()
	awaitSent(t, last)
	Close(func(x redis.UniversalClient) bool { return x == c })
	wg.Wait()
	if !errors.Is(closed.Err, redis.ErrClosed) {
		t.Fatalf("a wait in Redis at Close: %+v, want redis.ErrClosed", closed)
	}
	if HasRuntime(c) {
		t.Fatal("Close left the runtime in the registry")
	}
}

// awaitSent returns once req is in a BLPOP sent to Redis.
func awaitSent(t *testing.T, req *Req) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if rt := req.rt.Load(); rt != nil {
			rt.mu.Lock()
			sent := req.sent
			rt.mu.Unlock()
			if sent {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	rt := req.rt.Load()
	if rt != nil {
		rt.mu.Lock()
		for i, ln := range rt.all {
			t.Logf("lane %d: reqs %d running %v blocked %q woken %v landed %v mine %v", i, len(ln.reqs), ln.running, ln.blocked, ln.woken, ln.landed, ln == req.lane)
		}
		rt.mu.Unlock()
	}
	t.Fatal("the request was not sent within 10 s")
}

// A signal key that is not a list fails the BLPOP of every waiter on its
// lane (WRONGTYPE): only its own waiter is told; its lane-mate waits on
// and takes its own signal.
func TestABadKeyFailsOnlyItsWaiter(t *testing.T) {
	c := serverClient(t)
	ctx := context.Background()
	ends := map[*Req]chan Round{}
	wait := func(req *Req, sent bool) {
		ch := make(chan Round, 1)
		ends[req] = ch
		go func() {
			r, err := On(ctx, c, req)
			if err != nil {
				t.Error(err)
			}
			ch <- r
		}()
		if sent {
			awaitSent(t, req)
		}
	}
	// Every lane taken, by waiters without a try (never displaced), then
	// the bad one: it shares a lane.
	for i := range maxLanes {
		wait(NewReq(fmt.Sprint("lock-signal:", i), time.Minute, nil), true)
	}
	if err := c.Set(ctx, "lock-signal:bad", "not a list", 0).Err(); err != nil {
		t.Fatal(err)
	}
	bad := NewReq("lock-signal:bad", time.Minute, nil)
	wait(bad, false) // its BLPOP fails at once
	r := <-ends[bad]
	if r.Err == nil || !strings.Contains(r.Err.Error(), "WRONGTYPE") {
		t.Fatalf("the bad key's round: %+v, want WRONGTYPE", r)
	}
	rt := bad.rt.Load()
	rt.mu.Lock()
	var mate *Req
	if len(bad.lane.reqs) > 0 {
		mate = bad.lane.reqs[0]
	}
	rt.mu.Unlock()
	if mate == nil {
		t.Fatal("the bad key's lane-mate left the lane with it: it was told of the error too")
	}
	if err := c.LPush(ctx, mate.signal, 1).Err(); err != nil {
		t.Fatal(err)
	}
	if r := <-ends[mate]; !r.Popped || r.Err != nil {
		t.Fatalf("the lane-mate's round: %+v, want its signal popped", r)
	}
}
