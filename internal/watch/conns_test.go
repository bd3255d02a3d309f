package watch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/redistest"
)

// A tracker's reader redirects its invalidations to a client id, and ids
// start again from 1 when Redis restarts: the id it last knew may then be
// someone else's connection, a RESP3 one of the application say, which
// would get invalidation pushes in the middle of its replies. The reader
// redirects only to a connection that carries its subscriber's unique
// name. Here the id is a stranger's from the start: the reader refuses,
// and the stranger's replies stay in step.
func TestReaderNeverRedirectsToAStranger(t *testing.T) {
	s := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin := s.Client()
	stranger := s.Client() // RESP3 where go-redis and Redis allow it
	id, err := stranger.ClientID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	c := &trackConns{subName: "redislock-tracker-test"}
	c.subID.Store(id) // what a reader would hold after a restart
	rd := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, OnConnect: c.rdOnConnect(nil)})
	defer rd.Close()
	if err := rd.Ping(ctx).Err(); !errors.Is(err, errTrackerConn) {
		t.Fatalf("reader connecting with a stranger's id: %v, want errTrackerConn", err)
	}
	// Had it redirected, this GET would track k, and the SET below would
	// push an invalidation to the stranger while it waits in BLPOP (go-redis
	// drops an idle pooled connection with unread data, but not one in use):
	// the push would be read as the BLPOP's reply.
	rd.Get(ctx, "k")
	got := make(chan []string, 1)
	go func() {
		v, err := stranger.BLPop(ctx, 5*time.Second, "wake").Result()
		if err != nil {
			v = []string{"error: " + err.Error()}
		}
		got <- v
	}()
	for !strings.Contains(admin.ClientList(ctx).Val(), "cmd=blpop") {
		time.Sleep(time.Millisecond)
	}
	admin.Set(ctx, "k", "changed", 0)
	admin.RPush(ctx, "wake", "up")
	if v := <-got; len(v) != 2 || v[0] != "wake" || v[1] != "up" {
		t.Fatalf("stranger's BLPOP = %q, want [wake up]: its replies are out of step", v)
	}
}
