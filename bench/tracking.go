package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// renewalCost is the tracking workload's result: what the server ran while
// locks sat held and auto-renewed, with the key watch (WithTracking) on or
// off.
type renewalCost struct {
	tracking bool
	locks    int
	expire   time.Duration
	every    time.Duration    // between two renewals of a lock
	window   time.Duration    // between the two commandstats snapshots
	calls    map[string]int64 // commandstats calls in the window, by command; the admin's own left out
}

func (r renewalCost) total() int64 {
	var n int64
	for _, v := range r.calls {
		n += v
	}
	return n
}

// renewals counts the extend scripts run: EVALSHA, or EVAL after a
// NOSCRIPT.
func (r renewalCost) renewals() int64 { return r.calls["evalsha"] + r.calls["eval"] }

// perLockMinute scales n, counted in the window over all locks, to one
// held lock and one minute.
func (r renewalCost) perLockMinute(n int64) float64 {
	return float64(n) / float64(r.locks) / r.window.Minutes()
}

// perRenewal scales n to one renewal.
func (r renewalCost) perRenewal(n int64) float64 {
	if r.renewals() == 0 {
		return 0
	}
	return float64(n) / float64(r.renewals())
}

// renewalEvery is how often auto-renewal extends a lock with expire and
// the default safety margin: two thirds of the expire less the margin
// (see redislock.WithAutoRenewal).
func renewalEvery(expire time.Duration) time.Duration {
	return (expire - (expire/100 + 2*time.Millisecond)) * 2 / 3
}

// renewalCommands holds n locks on one client, with expire and
// auto-renewal, for k renewals of each, with tracking on or off, and
// counts the commands the server ran meanwhile from INFO commandstats, read
// on an admin connection of its own. The window starts half a renewal
// after the acquires, so that they, the tracker's set-up and first reads
// fall before it, and it ends half a renewal after the k-th renewal,
// before the releases: each lock renews exactly k times in it, whatever
// the phase.
func renewalCommands(ctx context.Context, addr string, n int, expire time.Duration, k int, tracking bool) (res renewalCost, err error) {
	// Trackers left by earlier workloads are idle, but close them: nothing
	// but this workload's clients is to run on the server.
	redislock.Shutdown()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	// The admin's own share: what one snapshot adds to the next (its INFO
	// is counted once it has run, so in the next snapshot).
	a, err := commandStats(ctx, admin)
	if err != nil {
		return res, err
	}
	b, err := commandStats(ctx, admin)
	if err != nil {
		return res, err
	}
	own := subStats(b, a)

	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: n, ContextTimeoutEnabled: true})
	defer c.Close()
	// The renewals of the n locks fall due together: dial the n
	// connections they take now, or their set-up would be in the window.
	conns := make([]*redis.Conn, n)
	for i := range conns {
		conns[i] = c.Conn()
		if err := conns[i].Ping(ctx).Err(); err != nil {
			return res, err
		}
	}
	for _, cn := range conns {
		cn.Close() // back to the pool, idle
	}

	name := uniqueName("renewals")
	var held []*redislock.Lock
	defer func() {
		for _, l := range held {
			if rerr := l.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil {
				err = rerr
			}
		}
		redislock.Shutdown()
	}()
	every := renewalEvery(expire)
	start := time.Now()
	for i := 0; i < n; i++ {
		l, err := redislock.New(c, name+"-"+strconv.Itoa(i), redislock.WithExpire(expire),
			redislock.WithAutoRenewal(), redislock.WithTracking(tracking))
		if err != nil {
			return res, err
		}
		if err := l.Acquire(ctx); err != nil {
			return res, err
		}
		held = append(held, l)
	}
	// Earlier workloads never extend: have Redis cache the extend script
	// now, not at the first renewal (NOSCRIPT, then EVAL).
	if err := held[0].Extend(ctx, 0); err != nil {
		return res, err
	}
	time.Sleep(time.Until(start.Add(every / 2)))
	t0 := time.Now()
	before, err := commandStats(ctx, admin)
	if err != nil {
		return res, err
	}
	time.Sleep(time.Until(start.Add(every/2 + time.Duration(k)*every)))
	after, err := commandStats(ctx, admin)
	if err != nil {
		return res, err
	}
	window := time.Since(t0)
	for _, l := range held {
		select {
		case <-l.Done():
			return res, fmt.Errorf("%s lost while held: %w", l.Name(), l.Err())
		default:
		}
	}
	return renewalCost{
		tracking: tracking,
		locks:    n,
		expire:   expire,
		every:    every,
		window:   window,
		calls:    subStats(subStats(after, before), own),
	}, nil
}

// commandStats reads the calls of each command from INFO commandstats
// ("cmdstat_get:calls=12,usec=...").
func commandStats(ctx context.Context, c *redis.Client) (map[string]int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if name, found := strings.CutPrefix(name, "cmdstat_"); ok && found {
			for _, f := range strings.Split(fields, ",") {
				if v, ok := strings.CutPrefix(f, "calls="); ok {
					n, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("commandstats %q: %w", line, err)
					}
					m[name] = n
				}
			}
		}
	}
	return m, nil
}

// subStats returns a - b by command, leaving out commands at 0.
func subStats(a, b map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range a {
		if n := v - b[k]; n != 0 {
			d[k] = n
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok && v != 0 {
			d[k] = -v
		}
	}
	return d
}

// commandNames is the sorted union of the commands of rs.
func commandNames(rs ...renewalCost) []string {
	set := map[string]bool{}
	for _, r := range rs {
		for k := range r.calls {
			set[k] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}
