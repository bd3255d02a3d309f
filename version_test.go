package redislock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// fakeVersion rewrites the redis_version field of INFO replies, to show
// Check a server of another version.
func fakeVersion(version string) commandHook {
	return func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		if sc, ok := cmd.(*redis.StringCmd); ok && strings.EqualFold(cmd.Name(), "info") && err == nil {
			var lines []string
			for _, line := range strings.Split(sc.Val(), "\n") {
				if strings.HasPrefix(line, "redis_version:") {
					line = "redis_version:" + version + "\r"
				}
				lines = append(lines, line)
			}
			sc.SetVal(strings.Join(lines, "\n"))
		}
		return err
	}
}

// Check reports a Redis older than the minimum (5.0 cannot serve waiting
// acquires, List or ResetAll) as a problem, and accepts the minimum and
// newer ones.
func TestCheckServerVersion(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	for _, tc := range []struct {
		version string
		ok      bool
	}{
		{"", true}, // the real server's own
		{"5.0.14", false},
		{"4.0.9", false},
		{"6.0.0", true},
		{"6.2.14", true},
		{"7.0.7", true},
		{"10.0.1", true},
	} {
		c := s.Client()
		if tc.version != "" {
			c.AddHook(fakeVersion(tc.version))
		}
		r, err := redislock.Check(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if r.OK() != tc.ok {
			t.Errorf("Check() of Redis %q = %v, want OK %v", tc.version, r, tc.ok)
		}
		if !tc.ok && !strings.Contains(r[0].Message, tc.version) {
			t.Errorf("Check() of Redis %q: first finding %q does not name the version", tc.version, r[0])
		}
	}
	if redislock.MinRedisVersionForTest != "6.0.0" {
		t.Fatalf("minRedisVersion = %q; README states 6.0", redislock.MinRedisVersionForTest)
	}
}

// Redis before 7.0 takes one INFO section at a time: Check asks for each on
// its own, so a replica is still found on Redis 6 (emulated: INFO with
// more than one section is a syntax error there).
func TestCheckAsksOneInfoSectionAtATime(t *testing.T) {
	quick(t)
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	ctx := ctxT(t)
	c := replica.Client()
	c.AddHook(fakeVersion("6.2.14"))
	c.AddHook(commandHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if strings.EqualFold(cmd.Name(), "info") && len(cmd.Args()) > 2 {
			err := errors.New("ERR syntax error")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}))
	r, err := redislock.Check(ctx, c)
	if err != nil || r.OK() || !strings.Contains(r[0].Message, "replica") {
		t.Fatalf("Check() of a Redis 6 replica = %v, %v; want the replica reported as a problem", r, err)
	}
}
