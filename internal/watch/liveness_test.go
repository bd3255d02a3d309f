package watch

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
)

// addrConn is a connection that says it reaches addr.
type addrConn struct {
	net.Conn
	addr net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.addr }

// pinnedConns returns a pair pinned, through a Sentinel client's dialer,
// to 10.0.0.1:6379 (nothing is dialed: the connections are pipes), and
// the dialer's later dials answer next(ctx).
func pinnedConns(t *testing.T, next func(ctx context.Context) (net.Conn, error)) *trackConns {
	t.Helper()
	var dials atomic.Int32
	opt := &redis.Options{Addr: topology.FailoverAddr, Dialer: func(ctx context.Context, _, _ string) (net.Conn, error) {
		if dials.Add(1) > 1 {
			return next(ctx)
		}
		return pipeTo(t, "10.0.0.1:6379"), nil
	}}
	c := &trackConns{pin: topology.NewPin(opt)}
	c.checkCtx, c.checkCancel = context.WithCancel(context.Background())
	if _, err := opt.Dialer(context.Background(), "tcp", topology.FailoverAddr); err != nil { // the pair's connection
		t.Fatal(err)
	}
	return c
}

func pipeTo(t *testing.T, addr string) net.Conn {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	tcp, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return addrConn{Conn: a, addr: tcp}
}

// The check that the watch's connections still reach the master runs off
// the watch's goroutine: Sentinels that hang (a check waits up to
// trackerTimeout for them) do not hold up the watch, which went on
// seeing invalidations 2 s late. One check runs at a time, and closing
// the pair ends it.
func TestMasterCheckDoesNotHoldUpTheWatch(t *testing.T) {
	var asked atomic.Int32
	c := pinnedConns(t, func(ctx context.Context) (net.Conn, error) {
		asked.Add(1)
		<-ctx.Done() // the Sentinels hang
		return nil, ctx.Err()
	})
	tr := &tracker{kick: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		tr.checkMaster(c)
		tr.checkMaster(c) // one at a time: no second dial
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(trackerTimeout / 2):
		t.Fatal("checkMaster waited for the Sentinels")
	}
	closed := make(chan struct{})
	go func() {
		c.checkCancel()
		c.checks.Wait()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(trackerTimeout / 2):
		t.Fatal("closing the pair did not end its check")
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("the Sentinels were asked %d times; want once", n)
	}
	if c.broken.Load() {
		t.Fatal("the pair is marked broken; Sentinels that do not answer say nothing")
	}
}

// A check that finds the master elsewhere marks the pair broken and
// wakes run, which makes it again.
func TestMasterCheckMovedMarksThePairBroken(t *testing.T) {
	c := pinnedConns(t, func(context.Context) (net.Conn, error) { return pipeTo(t, "10.0.0.2:6379"), nil })
	tr := &tracker{kick: make(chan struct{}, 1)}
	tr.checkMaster(c)
	c.checks.Wait()
	if !c.broken.Load() {
		t.Fatal("the pair is not marked broken after the master moved")
	}
	select {
	case <-tr.kick:
	default:
		t.Fatal("run was not woken")
	}
}
