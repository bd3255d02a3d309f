package redislocktest

import (
	"context"
	"time"

	"github.com/go-redis-lock/redislock"
)

// The Semaphore and the RWMutex: a permit, a read hold and a write hold
// are lost and stolen as a Lock's hold is (see ForceLoss and Steal).

// ForceLossPermit makes s lose the permit it holds, as if it had expired
// (or been reset): its id is dropped from the semaphore's holders. s
// learns of it at its next renewal or at its local deadline (a semaphore's
// key is not watched); Done then closes and Err matches redislock.ErrLost
// and redislock.ErrExpired. It fails the test when s holds no permit on
// this server. During an Outage the in-process server is changed at once;
// a real one when the outage ends.
func (s *Server) ForceLossPermit(sem *redislock.Semaphore) {
	s.t.Helper()
	s.mustHoldMember("ForceLossPermit", sem.Key(), sem.ID())
	if err := s.dropMember(sem.Key(), sem.ID()); err != nil {
		s.t.Fatalf("redislocktest: ForceLossPermit: %v", err)
	}
}

// StealPermit makes another holder take s's permit, and returns it: a new
// Semaphore of the same name and size, with opts (give it s's options, at
// least redislock.WithKeyPrefix and redislock.WithFencing when s has them:
// its fencing token is then above s's). s's permit is dropped first, so
// the thief takes it even when the semaphore is full; s learns of the
// loss as ForceLossPermit describes. Needs the server up.
func (s *Server) StealPermit(sem *redislock.Semaphore, opts ...redislock.Option) *redislock.Semaphore {
	s.t.Helper()
	thief, err := redislock.NewSemaphore(s.admin, sem.Name(), sem.Size(), opts...)
	if err != nil {
		s.t.Fatalf("redislocktest: StealPermit: %v", err)
	}
	if thief.Key() != sem.Key() {
		s.t.Fatalf("redislocktest: StealPermit: the thief's key %q is not %q: give it the semaphore's WithKeyPrefix", thief.Key(), sem.Key())
	}
	s.ForceLossPermit(sem)
	if err := thief.TryAcquire(context.Background()); err != nil {
		s.t.Fatalf("redislocktest: StealPermit: %v", err)
	}
	if sem.Token() != 0 && thief.Token() <= sem.Token() {
		s.t.Fatalf("redislocktest: StealPermit: the thief's fencing token %d is not above the holder's %d: give it redislock.WithFencing", thief.Token(), sem.Token())
	}
	return thief
}

// ForceLossRW makes rw lose its current hold. A read hold is dropped
// from the readers, as if it had expired (reason must be Expired); a write
// hold is lost as ForceLoss loses a Lock's, with Expired or TakenOver (a
// watched writer hears of it within milliseconds). rw learns of it as
// ForceLoss describes. It fails the test when rw holds nothing on this
// server.
func (s *Server) ForceLossRW(rw *redislock.RWMutex, reason error) {
	s.t.Helper()
	if reason != Expired && reason != TakenOver {
		s.t.Fatalf("redislocktest: ForceLossRW reason %v: want redislocktest.Expired or redislocktest.TakenOver", reason)
	}
	if s.holds(rw.Key(), rw.ID()) {
		if err := s.overwrite(rw.Key(), reason == TakenOver, thiefID); err != nil {
			s.t.Fatalf("redislocktest: ForceLossRW: %v", err)
		}
		return
	}
	if reason != Expired {
		s.t.Fatalf("redislocktest: ForceLossRW: a read hold cannot be taken over: use redislocktest.Expired")
	}
	s.mustHoldMember("ForceLossRW", rw.ReadersKey(), rw.ID())
	if err := s.dropMember(rw.ReadersKey(), rw.ID()); err != nil {
		s.t.Fatalf("redislocktest: ForceLossRW: %v", err)
	}
}

// holds reports whether the string key holds id.
func (s *Server) holds(key, id string) bool {
	var (
		v   string
		err error
	)
	if s.mini != nil {
		v, err = s.mini.Get(key)
	} else {
		v, err = s.admin.Get(context.Background(), key).Result()
	}
	return err == nil && v == id
}

// mustHoldMember fails the test unless id is in the sorted set key with
// an expiry still ahead.
func (s *Server) mustHoldMember(helper, key, id string) {
	s.t.Helper()
	var (
		score float64
		err   error
	)
	if s.mini != nil {
		score, err = s.mini.ZScore(key, id)
	} else {
		score, err = s.admin.ZScore(context.Background(), key, id).Result()
	}
	if err != nil || score <= float64(time.Now().Add(-time.Second).UnixMilli()) {
		s.t.Fatalf("redislocktest: %s: %q holds nothing in %q on %v (%v)", helper, id, key, s, err)
	}
}

// dropMember removes id from the sorted set key.
func (s *Server) dropMember(key, id string) error {
	if s.mini != nil {
		_, err := s.mini.ZRem(key, id)
		return err
	}
	return s.admin.ZRem(context.Background(), key, id).Err()
}
