package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// watchedHold acquires a Lock named name on c with a long expire and no
// renewal, so that only the key watch can find its loss, and waits until
// the hold is watched.
func watchedHold(t *testing.T, ctx context.Context, c redis.UniversalClient, name string) *redislock.Lock {
	t.Helper()
	l := mustNew(t, c, name, redislock.WithExpire(time.Minute))
	mustAcquire(t, ctx, l)
	within(t, 10*time.Second, "the hold is watched", func() bool { return redislock.Watched(l) })
	return l
}

// lostWithin waits up to d for l's hold to end, and checks it ended as
// want says.
func lostWithin(t *testing.T, l *redislock.Lock, d time.Duration, want error, after string) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(d):
		t.Fatalf("Done still open %v after %s: the key watch did not see it", d, after)
	}
	if err := l.Err(); !errors.Is(err, want) {
		t.Fatalf("Err() = %v after %s, want %v", err, after, want)
	}
}

// A server that restarts and answers LOADING while it loads its dataset
// does not switch the key watch off: the watch reconnects once the server
// is ready, reads its keys again and sees a takeover at once. (It took
// LOADING for a refusal, dropped every hold and never noticed.)
func TestWatchSurvivesARestartThatAnswersLoading(t *testing.T) {
	t.Parallel()
	watchSurvivesLoading(t, redistest.Start(t, loadingSlowly...))
}

// loadingSlowly are the directives of a server that loads its dataset
// slowly (1 ms a key) and answers LOADING meanwhile: it serves clients
// between every 2 MB it reads, hence 32 KB values (every 64 ms: a
// reconnect's ten round trips fit in the loading), stored uncompressed.
var loadingSlowly = []string{"key-load-delay 1000", "rdbcompression no"}

func watchSurvivesLoading(t *testing.T, s *redistest.Server) {
	ctx := ctxT(t)
	admin := s.Client()
	pipe := admin.Pipeline()
	for i := range 1500 {
		pipe.Set(ctx, fmt.Sprint("filler:", i), strings.Repeat("x", 32<<10), 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	c := s.Client()
	l := watchedHold(t, ctx, c, "job")
	if err := admin.Save(ctx).Err(); err != nil { // the lock key survives the restart
		t.Fatal(err)
	}
	// The server is down until the watch tries to reconnect, so that
	// it tries again while the server loads.
	s.Kill()
	rounds := redislock.TrackerRounds(c)
	within(t, 10*time.Second, "the watch tries to reconnect", func() bool { return redislock.TrackerRounds(c) >= rounds+2 })
	s.Restart() // returns once the server answers PING: after 1.5 s of LOADING
	if err := admin.Set(ctx, l.Key(), "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	lostWithin(t, l, 5*time.Second, redislock.ErrTakenOver, "a takeover after the restart")
}

// A server that has no room for the watch's connections ("max number of
// clients reached") does not switch the watch off either: it retries, and
// once there is room it watches again.
func TestWatchSurvivesMaxClients(t *testing.T) {
	quick(t)
	watchSurvivesMaxClients(t, redistest.Start(t))
}

func watchSurvivesMaxClients(t *testing.T, s *redistest.Server) {
	ctx := ctxT(t)
	admin := s.Client()
	l := watchedHold(t, ctx, s.Client(), "job")
	if err := admin.ConfigSet(ctx, "maxclients", "1").Err(); err != nil {
		t.Fatal(err)
	}
	rejected := func() int {
		n, _ := strconv.Atoi(infoField(t, admin, "stats", "rejected_connections"))
		return n
	}
	before := rejected()
	for _, typ := range []string{"pubsub", "normal"} { // every connection but admin's
		if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", typ, "SKIPME", "yes").Err(); err != nil {
			t.Fatal(err)
		}
	}
	within(t, 10*time.Second, "the watch refused a connection twice", func() bool { return rejected() >= before+2 })
	if err := admin.ConfigSet(ctx, "maxclients", "10000").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Set(ctx, l.Key(), "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	lostWithin(t, l, 5*time.Second, redislock.ErrTakenOver, "a takeover once there is room again")
}

// changeType makes key a list, in one MULTI.
func changeType(ctx context.Context, admin redis.UniversalClient, key string) error {
	_, err := admin.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		p.RPush(ctx, key, "x")
		return nil
	})
	return err
}

// A key made another type by someone else is someone else's: the hold
// ends as taken over. (WRONGTYPE was read as a redirect, and the hold was
// watched again and again.) A takeover and a DEL are seen at once too.
func TestWatchSeesEveryChange(t *testing.T) {
	quick(t)
	watchSeesEveryChange(t, redistest.Start(t))
}

func watchSeesEveryChange(t *testing.T, s *redistest.Server) {
	ctx := ctxT(t)
	admin := s.Client()
	for _, c := range append(lossCases[1:], lossCase{"a change of type", changeType, redislock.ErrTakenOver}) {
		l := watchedHold(t, ctx, s.Client(), "job")
		if err := c.change(ctx, admin, l.Key()); err != nil {
			t.Fatal(err)
		}
		lostWithin(t, l, 5*time.Second, c.reason, c.name)
		admin.Del(ctx, l.Key())
	}
}

// Only a reply that says the server will never let the watch work turns it
// off: an ACL that denies CLIENT (Check then says the watch is refused),
// an unknown command or subcommand, a syntax error. Each server words them
// its own way.
func TestWatchRefusals(t *testing.T) {
	quick(t)
	watchRefusals(t, redistest.Start(t))
}

func watchRefusals(t *testing.T, s *redistest.Server) {
	ctx := ctxT(t)
	admin := s.Client()
	acl := aclNoTracking
	if strings.HasPrefix(serverVersion(t, admin), "redis_version:6.0") {
		acl = strings.Replace(acl, " resetchannels", "", 1) // channels in ACLs came with 6.2
	}
	if err := admin.Do(ctx, toArgs(strings.Fields(acl))...).Err(); err != nil {
		t.Fatal(err)
	}
	user := s.Client(func(o *redis.Options) { o.Username, o.Password = "plain", "secret" })
	report, err := redislock.Check(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(report), "key tracking refused") {
		t.Errorf("Check() under an ACL without CLIENT = %v; want key tracking refused", report)
	}
	for _, args := range [][]any{
		{"CLIENT", "NO-SUCH-SUBCOMMAND"},
		{"NO-SUCH-COMMAND"},
		{"CLIENT", "TRACKING", "ON", "NO-SUCH-OPTION"},
		{"CLIENT", "ID"}, // under the ACL: NOPERM
	} {
		c := admin
		if len(args) == 2 && args[1] == "ID" {
			c = user
		}
		err := c.Do(ctx, args...).Err()
		if !redislock.RefusesTracking(err) {
			t.Errorf("%v answered %v, which the watch does not take for a refusal", args, err)
		}
	}
	for _, err := range []error{
		admin.Do(ctx, "CLIENT", "ID").Err(), // nil
		context.DeadlineExceeded,
		errors.New("dial tcp: connection refused"),
	} {
		if redislock.RefusesTracking(err) {
			t.Errorf("%v taken for a refusal", err)
		}
	}
}

// The servers users run (Redis 6.0 to 7.4, Valkey 8), when present: in CI,
// ../shared/servers (see .ci/run, which sets REDISTEST_SERVERS); skipped
// where there are none. Each runs the watch's tests above.
func TestWatchOnEveryServer(t *testing.T) {
	dir := os.Getenv("REDISTEST_SERVERS")
	if dir == "" {
		t.Skip("REDISTEST_SERVERS is not set: no other server versions to test (.ci/run sets it where ../shared/servers exists)")
	}
	bins, _ := filepath.Glob(filepath.Join(dir, "*", "redis-server"))
	if len(bins) == 0 {
		t.Skipf("no */redis-server under REDISTEST_SERVERS=%s", dir)
	}
	for _, bin := range bins {
		t.Run(filepath.Base(filepath.Dir(bin)), func(t *testing.T) {
			t.Setenv("REDISTEST_SERVER", bin)
			for _, tc := range []struct {
				name  string
				run   func(*testing.T, *redistest.Server)
				extra []string
			}{
				{"loading", watchSurvivesLoading, loadingSlowly},
				{"maxclients", watchSurvivesMaxClients, nil},
				{"changes", watchSeesEveryChange, nil},
				{"refusals", watchRefusals, nil},
			} {
				t.Run(tc.name, func(t *testing.T) {
					s := redistest.Start(t, tc.extra...)
					t.Log(serverVersion(t, s.Client()))
					tc.run(t, s)
				})
			}
		})
	}
}

// serverVersion returns the version lines of INFO server: redis_version,
// and valkey_version on Valkey.
func serverVersion(t *testing.T, c *redis.Client) string {
	t.Helper()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	var v []string
	for line := range strings.Lines(info) {
		if strings.HasPrefix(line, "redis_version:") || strings.HasPrefix(line, "valkey_version:") {
			v = append(v, strings.TrimSpace(line))
		}
	}
	return strings.Join(v, " ")
}

// wrappedConn is a net.Conn that is not a syscall.Conn, as a custom
// Dialer's may be (a TLS terminator, a metrics wrapper).
type wrappedConn struct{ net.Conn }

// A reader connection killed on the server is replaced even when the
// client's Dialer wraps its connections so that the watch cannot look at
// the socket: it pings the reader every second instead, so a DEL after
// the kill is noticed within seconds. (It went unseen until the idle
// ping, a minute or two later.)
func TestKilledReaderBehindACustomDialerIsReplaced(t *testing.T) {
	t.Parallel()
	s, ctx, admin := started(t)
	c := s.Client(func(o *redis.Options) {
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			cn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return wrappedConn{cn}, nil
		}
	})
	l := watchedHold(t, ctx, c, "job")
	waitReader(t, admin)
	killed := 0
	for _, line := range strings.Split(admin.ClientList(ctx).Val(), "\n") {
		if m := readerID.FindStringSubmatch(line); m != nil {
			if err := admin.Do(ctx, "CLIENT", "KILL", "ID", m[1]).Err(); err != nil {
				t.Fatal(err)
			}
			killed++
		}
	}
	if killed == 0 {
		t.Fatal("no reader to kill")
	}
	// Its tracking died with it: only a reader found dead, replaced and
	// made to read the key again sees the DEL.
	if err := admin.Del(ctx, l.Key()).Err(); err != nil {
		t.Fatal(err)
	}
	lostWithin(t, l, 5*time.Second, redislock.ErrExpired, "a DEL after the reader was killed")
}

// Under Sentinel the watch follows the master: after a failover its
// connections went on to the old master (a replica now, or hung), where
// nobody changes the keys, and a takeover on the new master went unseen
// for seconds, or minutes when the old master hung. It asks the Sentinels
// every second where the master is (nothing of the servers, where an ACL
// may deny INFO), and goes to the new master once they name it: a
// takeover on the new master is seen within 2 s of the switch, or 4 s
// when the old master hangs (leaving its connections waits up to the
// watch's 2 s timeout).
func TestWatchFollowsASentinelFailover(t *testing.T) {
	t.Parallel()
	long(t, "runs Sentinel failovers")
	for _, tc := range []struct {
		name     string
		within   time.Duration
		fail     func(t *testing.T, primary *redistest.Server, ss *redistest.Sentinels)
		denyInfo bool // the client's user may not run INFO (an ACL)
		wrapped  bool // the client's Dialer wraps its connections: the watch cannot peek at them
	}{
		{"SENTINEL FAILOVER", 2 * time.Second, failover, false, false},
		{"SENTINEL FAILOVER, INFO denied", 2 * time.Second, failover, true, false},
		{"SENTINEL FAILOVER, a Dialer that wraps", 2 * time.Second, failover, false, true},
		{"old master hangs", 4 * time.Second, oldMasterHangs, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary, replica, ss := startSentinels(t, 1)
			ctx := ctxT(t)
			c := failoverClient(t, ss)
			if tc.denyInfo {
				c = infoDeniedFailoverClient(t, ss, -1, primary, replica)
			}
			if tc.wrapped {
				c = redis.NewFailoverClient(&redis.FailoverOptions{
					MasterName:    redistest.MasterName,
					SentinelAddrs: ss.Addrs(),
					DialTimeout:   200 * time.Millisecond,
					MaxRetries:    -1,
					Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
						var d net.Dialer
						cn, err := d.DialContext(ctx, network, addr)
						if err != nil {
							return nil, err
						}
						return struct{ net.Conn }{cn}, nil // hides syscall.Conn
					},
				})
				t.Cleanup(func() { c.Close() })
			}
			l := watchedHold(t, ctx, c, "job")
			if n, err := primary.Client().Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
				t.Fatalf("WAIT = %d, %v: the replica does not have the key", n, err)
			}
			tc.fail(t, primary, ss)
			awaitFailover(t, ss, replica.Addr)
			switched := time.Now()
			if err := replica.Client().Set(ctx, l.Key(), "someone-else", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			lostWithin(t, l, 30*time.Second, redislock.ErrTakenOver, "a takeover on the new master")
			took := time.Since(switched)
			t.Logf("switch -> takeover seen: %v", took)
			if took > tc.within {
				t.Errorf("the takeover on the new master was seen %v after the switch; want within %v", took, tc.within)
			}
		})
	}
}

// A subscriber connection dropped without a word (a middlebox holds its
// traffic both ways) is found out and replaced. A takeover whose
// invalidation the middlebox swallowed is seen at the holder's next change
// of one of its keys (a renewal, an Extend; here another hold of the same
// client, extended every 300 ms): its invalidation does not come within
// 1 s either, so the watch reads every key again (the takeover is seen)
// and pings the subscriber; no answer within 2 s, and it makes its
// connections anew, after which a takeover is seen at once. (A change was
// seen after three unanswered idle pings, three minutes; the first version
// of this test took whichever re-read came first for the one after a
// missed invalidation, and failed when the two raced.)
func TestBlackholedSubscriberIsReplaced(t *testing.T) {
	t.Parallel()
	long(t, "blackholes the key watch")
	s, ctx, admin := started(t)
	p := proxyTo(t, s)
	c := redis.NewClient(&redis.Options{Addr: p.Addr()}) // not clientVia: mustNew turns the watch off on those
	t.Cleanup(func() { c.Close() })
	l := watchedHold(t, ctx, c, "job")
	probe := watchedHold(t, ctx, c, "probe")
	waitReader(t, admin)
	old := subscribers(t, admin)
	if len(old) != 1 {
		t.Fatalf("subscribers: %q; want the watch's one", old)
	}
	p.BlackholeSenders([]byte(invalidateChannel), true)
	defer p.BlackholeSenders(nil, false)
	changed := time.Now()
	if err := admin.Set(ctx, l.Key(), "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	stop, stopped := make(chan struct{}), make(chan error, 1)
	go func() { // the holder's own changes, as its renewals would make
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				stopped <- nil
				return
			case <-tick.C:
				if err := probe.Extend(ctx, time.Minute); err != nil {
					stopped <- err
					return
				}
			}
		}
	}()
	lostWithin(t, l, 10*time.Second, redislock.ErrTakenOver, "a takeover while the subscriber is blackholed")
	t.Logf("takeover -> seen: %v", time.Since(changed))
	// The subscriber is made anew, on a connection the middlebox passes
	// (a re-read of the watch's own may have seen the takeover first):
	// then a takeover is seen without any change of ours.
	within(t, 10*time.Second, "a new subscriber", func() bool {
		return slices.ContainsFunc(subscribers(t, admin), func(id string) bool { return id != old[0] })
	})
	close(stop)
	if err := <-stopped; err != nil {
		t.Fatalf("Extend of the other hold: %v", err)
	}
	changed = time.Now()
	if err := admin.Set(ctx, probe.Key(), "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	lostWithin(t, probe, 2*time.Second, redislock.ErrTakenOver, "a takeover after the subscriber was replaced")
	t.Logf("takeover on the new subscriber -> seen: %v", time.Since(changed))
}

// subscribers returns the ids of the connections subscribed to a channel.
func subscribers(t *testing.T, admin *redis.Client) []string {
	t.Helper()
	var ids []string
	for _, line := range strings.Split(admin.ClientList(context.Background()).Val(), "\n") {
		if id, _, ok := strings.Cut(strings.TrimPrefix(line, "id="), " "); ok && strings.Contains(line, " sub=1 ") {
			ids = append(ids, id)
		}
	}
	return ids
}

const invalidateChannel = "__redis__:invalidate"

// A server whose tracking table holds fewer keys than are watched
// (tracking-table-max-keys) evicts keys from it, each with an
// invalidation, and every re-read that tracks one again evicts another:
// the watch puts off the re-read of a key invalidated again without a
// change, up to a second, so that it costs about one GET per key a second,
// not tens of thousands. A takeover is still seen, within that second.
// Check reports the setting.
func TestWatchCapsRereadsOfAFullTrackingTable(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, "tracking-table-max-keys 5")
	ctx := ctxT(t)
	admin := s.Client()
	c := s.Client()
	const n = 20
	locks := make([]*redislock.Lock, n)
	for i := range locks {
		locks[i] = watchedHold(t, ctx, c, fmt.Sprint("job-", i))
	}
	time.Sleep(2 * time.Second) // the re-reads settle at their slowest
	before, start := commandStats(t, admin)["get"], time.Now()
	time.Sleep(2 * time.Second)
	rate := float64(commandStats(t, admin)["get"]-before) / time.Since(start).Seconds()
	t.Logf("%d held keys, tracking-table-max-keys 5: %.0f GET/s", n, rate)
	if rate > 5*n {
		t.Errorf("%.0f GET/s for %d held keys; want about one a key a second", rate, n)
	}
	changed := time.Now()
	if err := admin.Set(ctx, locks[7].Key(), "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	lostWithin(t, locks[7], 5*time.Second, redislock.ErrTakenOver, "a takeover")
	t.Logf("takeover -> seen: %v", time.Since(changed))
	report, err := redislock.Check(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(report), "tracking-table-max-keys") {
		t.Errorf("Check() = %v; want the tracking-table-max-keys setting named", report)
	}
	for i, l := range locks {
		if i != 7 {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A waiter on a Sentinel-managed master follows a failover: a release on
// the new master lets it in within its slice, and no try of it ever goes
// to the old master. Its BLPOPs run on connections of the wait runtime,
// made from the client's options, which dial the master the Sentinels
// name; after a SENTINEL FAILOVER they stay on the old master, still a
// master, until the Sentinels reconfigure it some 10 s later. Tries were
// pipelined behind those BLPOPs and found the lock still held there: the
// waiter came in 10 s after the release (and a free lock there would have
// been taken on a server whose writes were about to be discarded). They
// now go through the caller's client, which go-redis moves at once.
func TestWaiterFollowsASentinelFailover(t *testing.T) {
	t.Parallel()
	long(t, "runs Sentinel failovers")
	for _, tc := range []struct {
		name     string
		fail     func(t *testing.T, primary *redistest.Server, ss *redistest.Sentinels)
		handoffs bool // then hand off five times more, while the old master calls itself master
		denyInfo bool // the client's user may not run INFO (an ACL)
	}{
		{"SENTINEL FAILOVER", failover, true, false},
		{"SENTINEL FAILOVER, INFO denied", failover, true, true},
		{"old master hangs", oldMasterHangs, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary, replica, ss := startSentinels(t, 1)
			ctx := ctxT(t)
			// Held by another owner, without expire: only a release frees it.
			if err := primary.Client().Set(ctx, "lock:job", "other-owner", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if n, err := primary.Client().Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
				t.Fatalf("WAIT = %d, %v: the replica does not have the key", n, err)
			}
			// go-redis's default retries: a waiter whose BLPOP was cut off
			// tries on the client, which retries as it is told (without
			// retries the error is returned instead, see afterRound).
			c := retryingFailoverClient(t, ss)
			if tc.denyInfo {
				c = infoDeniedFailoverClient(t, ss, 0, primary, replica)
			}
			w := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
			got := acquireAsync(ctx, w)
			within(t, 10*time.Second, "the waiter blocks in BLPOP", func() bool {
				k, _ := waitingConns(t, primary.Client())
				return k >= 1
			})
			tc.fail(t, primary, ss)
			awaitFailover(t, ss, replica.Addr)
			newMaster := replica.Client()
			took, err := releaseAsPython(t, ctx, newMaster, got)
			if err != nil {
				t.Fatalf("the waiter: Acquire() = %v", err)
			}
			t.Logf("release on the new master -> waiter in: %v", took)
			if took > 5*time.Second {
				t.Errorf("the waiter came in %v after the release on the new master; want within a slice (2 s) and the try after it", took)
			}
			if owner := newMaster.Get(ctx, "lock:job").Val(); owner != w.ID() {
				t.Fatalf("the new master's lock:job = %q, want the waiter's id", owner)
			}
			if !tc.handoffs {
				return // the old master hangs: its connections fail on their own
			}
			// Every later hand-off, while the old master still calls itself
			// master (some 10 s), is as quick: a wait starts on the new
			// master, not on the old one, where it found a release only
			// at the end of its slice (1.7 s a hand-off, for 10 s).
			for round := range 5 {
				if err := w.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if err := newMaster.Set(ctx, "lock:job", "other-owner", 0).Err(); err != nil {
					t.Fatal(err)
				}
				got := acquireAsync(ctx, w)
				within(t, 10*time.Second, "the waiter blocks in BLPOP", func() bool {
					a, _ := waitingConns(t, primary.Client())
					b, _ := waitingConns(t, newMaster)
					return a+b >= 1
				})
				took, err := releaseAsPython(t, ctx, newMaster, got)
				if err != nil {
					t.Fatalf("hand-off %d: Acquire() = %v", round, err)
				}
				t.Logf("hand-off %d after the failover: %v", round, took)
				if took > 1200*time.Millisecond {
					t.Errorf("hand-off %d after the failover took %v; want its wait on the new master (a slice is 2 s)", round, took)
				}
			}
		})
	}
}

// The key watch makes go-redis print nothing when the server drops its
// connections or restarts: its subscriber printed "discarding bad PubSub
// connection" to go-redis's log (the user's) every time. The watch still
// reconnects and sees a takeover after each.
func TestWatchReconnectsWithoutGoRedisLogs(t *testing.T) {
	s, ctx, admin := started(t)
	logs := captureGoRedisLog(t)
	for _, tc := range []struct {
		name string
		drop func(t *testing.T)
	}{
		{"connections killed", func(t *testing.T) {
			for _, typ := range []string{"pubsub", "normal"} { // every connection but admin's
				if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", typ, "SKIPME", "yes").Err(); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"restart", func(t *testing.T) {
			if err := admin.Save(ctx).Err(); err != nil { // the lock key survives the restart
				t.Fatal(err)
			}
			s.Kill()
			s.Restart()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := s.Client()
			l := watchedHold(t, ctx, c, "job-"+strings.ReplaceAll(tc.name, " ", "-"))
			within(t, 10*time.Second, "the watch's subscriber", func() bool { return len(subscribers(t, admin)) > 0 })
			old := subscribers(t, admin) // its connections are made: the drop is theirs
			tc.drop(t)
			within(t, 10*time.Second, "the watch reconnects", func() bool {
				// A new subscriber (after a restart, ids start again).
				subs := subscribers(t, admin)
				return len(subs) > 0 && (tc.name == "restart" || !slices.Contains(old, subs[0]))
			})
			if err := admin.Set(ctx, l.Key(), "someone-else", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			lostWithin(t, l, 5*time.Second, redislock.ErrTakenOver, "a takeover after the watch reconnected")
			if got := ours(logs(), s.Addr); len(got) > 0 {
				t.Fatalf("go-redis printed %d lines to its log, want none:\n%s", len(got), strings.Join(got, "\n"))
			}
		})
	}
}

// ours leaves out of lines those that the clients of earlier tests print
// as they wind down (go-redis's log is the process's): those of Sentinel
// clients, which the test has none of, and those naming another server
// than addr.
func ours(lines []string, addr string) []string {
	var out []string
	for _, l := range lines {
		other := strings.Contains(l, "127.0.0.1:") && !strings.Contains(l, addr)
		if !strings.HasPrefix(l, "sentinel: ") && !other {
			out = append(out, l)
		}
	}
	return out
}

// captureGoRedisLog records what go-redis prints to its log until t ends,
// and returns what it holds. go-redis's log is goRedisLog for the whole
// run (TestMain sets it): swapping it while other tests' clients print
// would be a data race.
func captureGoRedisLog(t *testing.T) func() []string {
	goRedisLog.mu.Lock()
	goRedisLog.capturing, goRedisLog.buf = true, nil
	goRedisLog.mu.Unlock()
	t.Cleanup(func() {
		goRedisLog.mu.Lock()
		goRedisLog.capturing, goRedisLog.buf = false, nil
		goRedisLog.mu.Unlock()
	})
	return goRedisLog.lines
}

// goRedisLog keeps go-redis's log: its lines while a test captures them,
// and the last recentLines, which TestMain prints when the run fails (a
// passing run prints nothing of it: refused dials and failovers are what
// the tests cause on purpose).
var goRedisLog = &lineLog{}

const recentLines = 200

type lineLog struct {
	mu        sync.Mutex
	capturing bool
	buf       []string
	recent    []string // the last recentLines lines, oldest first
}

func (l *lineLog) Printf(_ context.Context, format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.capturing {
		l.buf = append(l.buf, line)
	}
	if len(l.recent) == recentLines {
		l.recent = l.recent[1:]
	}
	l.recent = append(l.recent, line)
}

// printRecent writes the last lines of go-redis's log to stderr.
func (l *lineLog) printRecent() {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(os.Stderr, "go-redis's log, its last %d lines:\n", len(l.recent))
	for _, line := range l.recent {
		fmt.Fprintln(os.Stderr, "  "+line)
	}
}

func (l *lineLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.buf...)
}

// The connections the library adds to a client follow its TLS options:
// over a TLS-only port, a waiter is woken by the release (the wait's own
// connections) and the key watch sees a takeover (its reader and
// subscriber, whose dialers wrap the client's).
func TestWaitAndWatchOverTLS(t *testing.T) {
	quick(t)
	s := redistest.StartTLS(t)
	ctx := ctxT(t)
	admin := s.Client()
	c := redis.NewClient(&redis.Options{Addr: s.TLSAddr, TLSConfig: s.Config})
	t.Cleanup(func() { c.Close() })

	holder := watchedHold(t, ctx, c, "job")
	waiter := mustNew(t, c, "job")
	got := acquireAsync(ctx, waiter)
	within(t, 10*time.Second, "the waiter blocks in BLPOP", func() bool {
		k, _ := waitingConns(t, admin)
		return k == 1
	})
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := receive(t, got)
	if r.err != nil {
		t.Fatalf("the waiter: Acquire() = %v", r.err)
	}
	if took := r.at.Sub(released); took > time.Second {
		t.Errorf("the waiter came in %v after the release, want at once (its slice is 2 s)", took)
	}
	within(t, 10*time.Second, "the waiter's hold is watched", func() bool { return redislock.Watched(waiter) })
	if err := admin.Set(ctx, waiter.Key(), "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	lostWithin(t, waiter, 5*time.Second, redislock.ErrTakenOver, "a takeover over TLS")
}

// A waiter on a Sentinel-managed master never takes the lock on the old
// master after a failover: the old one still calls itself master for
// seconds and takes writes that the Sentinels then throw away. Here the
// lock is held on the new master and, on the old one, freed: a try sent
// there (pipelined behind a BLPOP on the old master's connection) took it,
// and the waiter held a lock that someone else held.
func TestWaiterNeverTakesALockOnTheOldMaster(t *testing.T) {
	quick(t)
	long(t, "runs a Sentinel failover")
	primary, replica, ss := startSentinels(t, 1)
	ctx := ctxT(t)
	old := primary.Client()
	if err := old.Set(ctx, "lock:job", "other-owner", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := old.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT = %d, %v: the replica does not have the key", n, err)
	}
	c := retryingFailoverClient(t, ss)
	w := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
	got := acquireAsync(ctx, w)
	within(t, 10*time.Second, "the waiter blocks in BLPOP", func() bool {
		k, _ := waitingConns(t, old)
		return k >= 1
	})
	sentinelFailover(t, ss)
	awaitFailover(t, ss, replica.Addr)
	// The old master, not yet reconfigured, frees the lock; the new one
	// still has it held.
	if err := old.Del(ctx, "lock:job").Err(); err != nil {
		t.Skipf("the old master was reconfigured already (%v): nothing to show", err)
	}
	select {
	case r := <-got:
		t.Fatalf("Acquire() = %v while the new master's lock:job is %q: taken on the old master", r.err, replica.Client().Get(ctx, "lock:job").Val())
	case <-time.After(2 * time.Second): // the runtime's failover check runs every 500 ms
	}
	newMaster := replica.Client()
	if _, err := releaseAsPython(t, ctx, newMaster, got); err != nil {
		t.Fatalf("Acquire() after the release on the new master = %v", err)
	}
	if owner := newMaster.Get(ctx, "lock:job").Val(); owner != w.ID() {
		t.Fatalf("the new master's lock:job = %q, want the waiter's id", owner)
	}
}

// releaseAsPython frees lock:job on c with the effects of
// python-redis-lock's release (the key deleted and a signal pushed, at
// once: here in a MULTI, whatever the key held) and returns the
// outcome of the waiter's Acquire behind got, and how long after the
// release it came.
func releaseAsPython(t *testing.T, ctx context.Context, c *redis.Client, got <-chan acquired) (time.Duration, error) {
	t.Helper()
	released := time.Now()
	pipe := c.TxPipeline()
	pipe.Del(ctx, "lock:job")
	pipe.LPush(ctx, "lock-signal:job", 1)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	r := receive(t, got)
	return r.at.Sub(released), r.err
}

// retryingFailoverClient is failoverClient with go-redis's default
// retries: a waiter whose BLPOP was cut off tries on the client, which
// retries as it is told.
func retryingFailoverClient(t *testing.T, ss *redistest.Sentinels) *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    redistest.MasterName,
		SentinelAddrs: ss.Addrs(),
		DialTimeout:   200 * time.Millisecond,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// infoDeniedFailoverClient is a failover client as a user whom the
// servers' ACL denies INFO (the library once told servers apart by their
// run_id).
// maxRetries is go-redis's option (0: its default).
func infoDeniedFailoverClient(t *testing.T, ss *redistest.Sentinels, maxRetries int, servers ...*redistest.Server) *redis.Client {
	t.Helper()
	for _, s := range servers {
		if err := s.Client().Do(context.Background(), "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info").Err(); err != nil {
			t.Fatal(err)
		}
	}
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    redistest.MasterName,
		SentinelAddrs: ss.Addrs(),
		DialTimeout:   200 * time.Millisecond,
		Username:      "noinfo",
		Password:      "pw",
		MaxRetries:    maxRetries,
	})
	t.Cleanup(func() { c.Close() })
	if err := c.Info(context.Background(), "server").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("INFO as the restricted user = %v, want NOPERM", err)
	}
	return c
}

// sentinelFailover has the Sentinels fail the master over (SENTINEL
// FAILOVER) once they see its replica in sync; awaitFailover waits for it.
func sentinelFailover(t *testing.T, ss *redistest.Sentinels) {
	t.Helper()
	c := redis.NewSentinelClient(&redis.Options{Addr: ss.Addrs()[0]})
	defer c.Close()
	within(t, 15*time.Second, "the Sentinel may promote the replica", func() bool {
		r, err := c.Replicas(context.Background(), redistest.MasterName).Result()
		return err == nil && len(r) > 0 && r[0]["flags"] == "slave" && r[0]["master-link-status"] == "ok"
	})
	if err := c.Failover(context.Background(), redistest.MasterName).Err(); err != nil {
		t.Fatal(err)
	}
}
