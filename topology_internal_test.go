package redislock

import (
	"errors"
	"testing"
	"time"
)

type testReply string

func (e testReply) Error() string { return string(e) }
func (e testReply) RedisError()   {}

func TestTopologyClassifiesReplies(t *testing.T) {
	for _, c := range []struct {
		err  error
		kind topoKind
		addr string
	}{
		{testReply("MOVED 2906 127.0.0.1:7001"), topoMoved, "127.0.0.1:7001"},
		{testReply("ASK 2906 127.0.0.1:7002"), topoAsk, "127.0.0.1:7002"},
		{testReply("TRYAGAIN Multiple keys request during rehashing of slot"), topoTryAgain, ""},
		{testReply("CLUSTERDOWN The cluster is down"), topoTryAgain, ""},
		{testReply("LOADING Redis is loading the dataset in memory"), topoTryAgain, ""},
		{testReply("UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"), topoTryAgain, ""},
		{testReply("READONLY You can't write against a read only replica."), topoReadOnly, ""},
		{testReply("ERR unknown command"), topoNone, ""},
		{testReply("NOSCRIPT No matching script"), topoNone, ""},
		{errors.New("MOVED 1 127.0.0.1:1"), topoNone, ""}, // not a reply: a transport error never is
		{nil, topoNone, ""},
	} {
		kind, addr := topology(c.err)
		if kind != c.kind || addr != c.addr {
			t.Errorf("topology(%v) = %v, %q; want %v, %q", c.err, kind, addr, c.kind, c.addr)
		}
	}
}

// However long the ack, a waiter's slices stay at least a third of the
// read timeout (the largest ack New accepts is a third).
func TestSlicesStayLongWithAck(t *testing.T) {
	for _, rt := range []time.Duration{300 * time.Millisecond, 3 * time.Second, 5 * time.Second, time.Minute} {
		ack := replicaAck{n: 1, timeout: rt / 3}
		if err := ack.fits(rt); err != nil {
			t.Fatalf("rt %v: ack %v refused", rt, ack.timeout)
		}
		if err := (replicaAck{n: 1, timeout: rt/3 + time.Millisecond}).fits(rt); !errors.Is(err, ErrInvalidReplicaAck) {
			t.Fatalf("rt %v: ack above a third accepted", rt)
		}
		if d := maxSliceFor(rt, 0, ack); d < min(rt/3, defaultMaxSlice)-time.Millisecond {
			t.Errorf("rt %v, ack %v: slice %v, want at least %v", rt, ack.timeout, d, min(rt/3, defaultMaxSlice))
		}
	}
}
