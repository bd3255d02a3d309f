package watch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
)

// trackConns are a tracker's connections: sub receives the invalidations,
// rd reads the keys with tracking on, redirected to sub.
type trackConns struct {
	sub      *redis.Client
	ps       *redis.PubSub
	rd       *redis.Client
	pin      *topology.Pin // where they went, on a Sentinel failover client; else nil
	subID    atomic.Int64  // CLIENT ID of sub's connection
	subName  string        // the unique CLIENT SETNAME of sub's connection
	subConn  atomic.Bool   // sub has connected once: a second connection is refused
	rdConn   atomic.Bool   // rd has connected once
	rdNew    atomic.Bool   // rd has a new connection, on which no key is tracked yet
	stopping atomic.Bool   // the receiver is to exit
	pinged   atomic.Int64  // when sub was pinged, with nothing heard since (UnixNano); 0: not pinged

	rdMu    sync.Mutex
	rdConns []net.Conn // rd's connections, as dialed, for peerClosed

	broken  atomic.Bool // a connection was lost: make new ones
	subLost atomic.Bool // sub's connection failed (see subConn)

	// checking is set while checkMaster's goroutine runs, counted in
	// checks; checkCtx ends when the pair is closed.
	checking    atomic.Bool
	checks      sync.WaitGroup
	checkCtx    context.Context
	checkCancel context.CancelFunc
}

// subConn is sub's connection. go-redis's PubSub, on a read or write
// error, closes its connection and dials a new one, printing "discarding
// bad PubSub connection" to go-redis's log (the user's, at every server
// restart); the tracker never needs that new connection (see
// connectTracking). So subConn answers a failed read with a timeout,
// which go-redis's PubSub leaves alone, and records the failure: the
// receiver then marks the pair broken and closes it, which prints
// nothing.
type subConn struct {
	net.Conn
	lost *atomic.Bool
}

func (c subConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		c.lost.Store(true)
		return n, errSubLost
	}
	return n, err
}

// errSubLost is what subConn's Read answers for a failed read: a timeout
// to go-redis (see subConn).
var errSubLost error = subLostError{}

type subLostError struct{}

func (subLostError) Error() string   { return "redislock: tracker subscriber connection lost" }
func (subLostError) Timeout() bool   { return true }
func (subLostError) Temporary() bool { return true }

// errTrackerConn is the error of a tracker connection that go-redis would
// dial again on its own (see connectTracking).
var errTrackerConn = errors.New("redislock: tracker connection lost")

// connectTracking opens a tracker's connections to the node of opt: sub,
// switched to RESP2, named uniquely and subscribed to the invalidation
// channel, and rd, switched to RESP2, with tracking on and redirected to
// sub. An error reply means Redis (or an ACL, or a proxy) refuses
// tracking.
//
// A redirect goes to a client id, and ids start again from 1 when Redis
// restarts: rd must never redirect to an id that belongs to someone
// else's connection, which would then receive invalidation pushes in the
// middle of its replies. So each connection of rd checks, on itself, that
// the id is sub's (by sub's unique name) before it redirects; one that
// finds sub gone marks the pair broken. rd may have several connections
// (go-redis v9.23 sends pipelines on a pool of their own) and gets new
// ones after a broken one: keys are tracked per connection, so every key
// is read again after a new one. sub is never replaced on its own (rd's
// connections redirect to its id): a second connection fails, marks the
// pair broken, and the tracker makes a new pair.
func connectTracking(opt redis.Options) (*trackConns, error) {
	ctx, cancel := context.WithTimeout(context.Background(), trackerTimeout)
	defer cancel()
	c := &trackConns{subName: "redislock-tracker-" + uuid.NewString()}
	c.checkCtx, c.checkCancel = context.WithCancel(context.Background())
	if opt.Addr == topology.FailoverAddr {
		c.pin = topology.NewPin(&opt) // both connections are noted
	}
	userOnConnect := opt.OnConnect
	opt.ClientName = "" // ours are named below, or left unnamed
	so := opt
	so.PoolSize, so.MinIdleConns = 1, 0
	subDial := dialerOf(opt)
	so.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := subDial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return subConn{Conn: cn, lost: &c.subLost}, nil
	}
	so.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
		if c.subConn.Load() {
			c.broken.Store(true)
			return errTrackerConn
		}
		if userOnConnect != nil {
			if err := userOnConnect(ctx, cn); err != nil {
				return err
			}
		}
		// RESP2: the invalidations then come as Pub/Sub messages, which
		// every go-redis v9 reads.
		if err := connDo(ctx, cn, "HELLO", "2"); err != nil {
			return err
		}
		if err := connDo(ctx, cn, "CLIENT", "SETNAME", c.subName); err != nil {
			return err
		}
		id, err := cn.ClientID(ctx).Result()
		if err != nil {
			return err
		}
		c.subID.Store(id)
		c.subConn.Store(true)
		return nil
	}
	c.sub = redis.NewClient(&so)
	c.ps = c.sub.Subscribe(ctx, invalidateChannel)
	if _, err := c.ps.ReceiveTimeout(ctx, trackerTimeout); err != nil {
		_ = c.ps.Close()
		_ = c.sub.Close()
		return nil, err
	}
	ro := opt
	ro.PoolSize, ro.MinIdleConns, ro.MaxRetries = 1, 0, -1
	dial := dialerOf(opt)
	ro.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := dial(ctx, network, addr)
		if err == nil {
			c.rdMu.Lock()
			c.rdConns = append(c.rdConns, cn)
			c.rdMu.Unlock()
		}
		return cn, err
	}
	ro.OnConnect = c.rdOnConnect(userOnConnect)
	c.rd = redis.NewClient(&ro)
	if err := c.rd.Ping(ctx).Err(); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// dialerOf returns opt's Dialer (a client's options have go-redis's own
// when the user set none, TLS included) or, for options made by hand, a
// TCP dialer with TLS when they have a TLSConfig, as go-redis would.
func dialerOf(opt redis.Options) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if opt.Dialer != nil {
		return opt.Dialer
	}
	nd := &net.Dialer{Timeout: opt.DialTimeout, KeepAlive: 5 * time.Minute}
	if opt.TLSConfig != nil {
		return (&tls.Dialer{NetDialer: nd, Config: opt.TLSConfig}).DialContext
	}
	return nd.DialContext
}

// connDo sends one command on cn (go-redis v9.0's Conn has no Do).
func connDo(ctx context.Context, cn *redis.Conn, args ...any) error {
	cmd := redis.NewCmd(ctx, args...)
	_ = cn.Process(ctx, cmd)
	return cmd.Err()
}

// rdOnConnect is the OnConnect of rd's connections (see connectTracking):
// it switches to RESP2, checks that sub's id is sub's and redirects
// tracking to it.
func (c *trackConns) rdOnConnect(userOnConnect func(context.Context, *redis.Conn) error) func(context.Context, *redis.Conn) error {
	return func(ctx context.Context, cn *redis.Conn) error {
		if userOnConnect != nil {
			if err := userOnConnect(ctx, cn); err != nil {
				return err
			}
		}
		// RESP2: no push (tracking-redir-broken) ever comes on rd.
		if err := connDo(ctx, cn, "HELLO", "2"); err != nil {
			return err
		}
		id := c.subID.Load()
		list := redis.NewStringCmd(ctx, "CLIENT", "LIST", "ID", id)
		_ = cn.Process(ctx, list)
		if err := list.Err(); topology.IsReply(err) && strings.Contains(err.Error(), "syntax error") {
			// Redis 6.0 has no CLIENT LIST ID: the whole list, then.
			list = redis.NewStringCmd(ctx, "CLIENT", "LIST")
			_ = cn.Process(ctx, list)
		}
		if err := list.Err(); err != nil {
			return err
		}
		if !strings.Contains(clientLine(list.Val(), id), " name="+c.subName+" ") {
			c.broken.Store(true)
			return fmt.Errorf("%w: client %d is not the tracker's subscriber", errTrackerConn, id)
		}
		if err := connDo(ctx, cn, "CLIENT", "TRACKING", "ON", "REDIRECT", id); err != nil {
			return err
		}
		if c.rdConn.Swap(true) {
			c.rdNew.Store(true)
		}
		return nil
	}
}

// clientLine returns the line of client id in the reply of CLIENT LIST
// ("" when it is not there).
func clientLine(list string, id int64) string {
	prefix := "id=" + strconv.FormatInt(id, 10) + " "
	for line := range strings.Lines(list) {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

func (c *trackConns) close() {
	if c.checkCancel != nil {
		c.checkCancel()
		c.checks.Wait()
	}
	_ = c.ps.Close()
	_ = c.sub.Close()
	_ = c.rd.Close()
}

// dropConns closes c, the tracker's broken connections.
func (t *tracker) dropConns(c *trackConns) {
	t.mu.Lock()
	if t.conns == c {
		t.conns = nil
	}
	t.mu.Unlock()
	c.close()
}

// receive is the receiver goroutine: it marks the keys Redis invalidates.
func (t *tracker) receive(c *trackConns, done chan struct{}) {
	defer close(done)
	errs := 0 // in a row
	var backoff time.Duration
	for !c.stopping.Load() {
		wait := idlePing
		if c.pinged.Load() != 0 {
			wait = trackerTimeout
		}
		msg, err := c.ps.ReceiveTimeout(context.Background(), wait)
		if c.stopping.Load() {
			return
		}
		if err != nil {
			if c.subLost.Load() {
				// The connection failed (see subConn): a new pair.
				c.broken.Store(true)
				t.poke()
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if c.pongOverdue() {
					// Pinged, and nothing came back: a connection
					// lost without a word (a middlebox dropped it).
					c.broken.Store(true)
					t.poke()
					return
				}
				c.pingSub()
				continue
			}
			if errs++; c.broken.Load() || errs >= 3 {
				// The connection was lost and go-redis's own new one
				// refused (see connectTracking), or could not be made
				// (the node is down): run makes a new pair, or hands
				// the holds over.
				c.broken.Store(true)
				t.poke()
				return
			}
			// A payload go-redis cannot parse (the null of a FLUSHALL:
			// every key), or the connection lost: either way,
			// invalidations may have been missed.
			t.markAll()
			backoff = nextBackoff(backoff)
			time.Sleep(backoff)
			continue
		}
		errs, backoff = 0, 0
		c.pinged.Store(0)
		switch m := msg.(type) {
		case *redis.Message:
			if m.Channel != invalidateChannel {
				continue
			}
			if m.PayloadSlice != nil {
				t.markKeys(m.PayloadSlice)
			} else {
				t.markAll()
			}
		}
	}
}

// pingSub pings sub, unless a ping is already waiting for its answer; the
// answer (or any message) clears pinged.
func (c *trackConns) pingSub() {
	if c.subLost.Load() {
		return // a write would fail, and go-redis print it
	}
	if !c.pinged.CompareAndSwap(0, time.Now().UnixNano()) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), trackerTimeout)
	_ = c.ps.Ping(ctx)
	cancel()
}

// pongOverdue reports whether sub was pinged trackerTimeout ago or more
// and nothing has come since.
func (c *trackConns) pongOverdue() bool {
	at := c.pinged.Load()
	return at != 0 && time.Since(time.Unix(0, at)) >= trackerTimeout
}

// stopReceiver makes the receiver exit and waits for it: a ping wakes its
// read, or, on a connection that does not answer, closing it does.
func stopReceiver(c *trackConns, done chan struct{}) {
	c.stopping.Store(true)
	if c.pongOverdue() { // a ping went unanswered: no other will be
		_ = c.ps.Close()
		<-done
		return
	}
	if !c.subLost.Load() { // else the receiver has returned or is about to
		ctx, cancel := context.WithTimeout(context.Background(), trackerTimeout)
		_ = c.ps.Ping(ctx)
		cancel()
	}
	select {
	case <-done:
	case <-time.After(trackerTimeout):
		_ = c.ps.Close()
		<-done
	}
}
