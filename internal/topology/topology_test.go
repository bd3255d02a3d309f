package topology

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/registry"
)

type testReply string

func (e testReply) Error() string { return string(e) }
func (e testReply) RedisError()   {}

func TestTopologyClassifiesReplies(t *testing.T) {
	for _, c := range []struct {
		err  error
		kind Kind
		addr string
	}{
		{testReply("MOVED 2906 127.0.0.1:7001"), Moved, "127.0.0.1:7001"},
		{testReply("ASK 2906 127.0.0.1:7002"), Ask, "127.0.0.1:7002"},
		{testReply("TRYAGAIN Multiple keys request during rehashing of slot"), TryAgain, ""},
		{testReply("CLUSTERDOWN The cluster is down"), TryAgain, ""},
		{testReply("LOADING Redis is loading the dataset in memory"), TryAgain, ""},
		{testReply("UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"), TryAgain, ""},
		{testReply("READONLY You can't write against a read only replica."), ReadOnly, ""},
		{testReply("ERR unknown command"), None, ""},
		{testReply("NOSCRIPT No matching script"), None, ""},
		{errors.New("MOVED 1 127.0.0.1:1"), None, ""}, // not a reply: a transport error never is
		{nil, None, ""},
	} {
		kind, addr := Classify(c.err)
		if kind != c.kind || addr != c.addr {
			t.Errorf("Classify(%v) = %v, %q; want %v, %q", c.err, kind, addr, c.kind, c.addr)
		}
	}
}

// Retry gives up at its patience, and at once on a reply that is no
// topology reply, or on an error that is no reply.
func TestRetryGivesUp(t *testing.T) {
	ctx := context.Background()
	tryAgain := testReply("TRYAGAIN Multiple keys request during rehashing of slot")
	for _, c := range []struct {
		name string
		err  error
		want int // calls of op
	}{
		{"not a topology reply", testReply("ERR wrong"), 1},
		{"not a reply", errors.New("EOF"), 1},
		{"nil", nil, 1},
	} {
		n := 0
		err := Do(ctx, nil, func() error { n++; return c.err })
		if n != c.want || !errors.Is(err, c.err) {
			t.Errorf("%s: %d calls, %v; want %d, %v", c.name, n, err, c.want, c.err)
		}
	}
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialed
	defer client.Close()
	defer registry.Tune(client, registry.Tuning{Patience: 50 * time.Millisecond})()
	n := 0
	start := time.Now()
	err := Do(ctx, client, func() error { n++; return tryAgain })
	if err != tryAgain || n < 2 {
		t.Fatalf("Do(TRYAGAIN until patience) = %v after %d calls; want the reply, after several", err, n)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Do gave up after %v; want about its patience (50 ms)", took)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	n = 0
	if err := Do(cctx, nil, func() error { n++; return tryAgain }); err != tryAgain || n != 1 {
		t.Fatalf("Do with a cancelled ctx = %v after %d calls; want the reply, after 1", err, n)
	}
}

func TestBackoffDoublesWithinBounds(t *testing.T) {
	var got []time.Duration
	d := time.Duration(0)
	for range 8 {
		d = Backoff(d)
		got = append(got, d)
	}
	want := []time.Duration{2, 4, 8, 16, 32, 64, 100, 100}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("Backoff steps = %v; want %v ms", got, want)
		}
	}
}

// addrConn is a connection that says it reaches addr.
type addrConn struct {
	net.Conn
	addr string
}

func (c addrConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: portOf(c.addr)}
}
func (c addrConn) Close() error { return nil }

func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// A Pin notes where the connections made from a failover client's options
// went, and reports a move only when the Sentinels (the dialer) name
// another server, or the connections went to two; when it cannot tell it
// reports none.
func TestPin(t *testing.T) {
	ctx := context.Background()
	master, down, dials := "127.0.0.1:7000", false, 0
	opt := &redis.Options{Addr: FailoverAddr, Dialer: func(context.Context, string, string) (net.Conn, error) {
		dials++
		if down {
			return nil, errors.New("no Sentinel answers")
		}
		return addrConn{addr: master}, nil
	}}
	p := NewPin(opt)
	if p.Moved(ctx) {
		t.Fatal("moved before any connection was made")
	}
	if _, err := opt.Dialer(ctx, "tcp", FailoverAddr); err != nil {
		t.Fatal(err)
	}
	if p.Moved(ctx) {
		t.Fatal("moved while the Sentinels name the server of its connections")
	}
	master = "127.0.0.1:7001" // a failover
	if !p.Moved(ctx) {
		t.Fatal("not moved once the Sentinels name another server")
	}
	down = true
	if p.Moved(ctx) {
		t.Fatal("moved when the Sentinels do not answer")
	}
	// Then it does not ask again for a while (go-redis logs each failed
	// ask), a longer while after each failure.
	before := dials
	if p.Moved(ctx) || dials != before {
		t.Fatalf("asked the Sentinels again (%d asks) right after they did not answer", dials-before)
	}
	for _, want := range []time.Duration{2 * time.Second, 4 * time.Second} {
		p.quiet = time.Time{} // the pause is over
		p.Moved(ctx)
		if p.pause != want {
			t.Fatalf("pause after another failed ask: %v, want %v", p.pause, want)
		}
	}
	down = false
	p.quiet = time.Time{}
	// A later connection of the pinned options reaches the new master:
	// they are split, and moved whatever the Sentinels say.
	if _, err := opt.Dialer(ctx, "tcp", FailoverAddr); err != nil {
		t.Fatal(err)
	}
	master = "127.0.0.1:7000"
	if !p.Moved(ctx) {
		t.Fatal("not moved with its connections on two servers")
	}
}
