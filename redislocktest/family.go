package redislocktest

import (
	"context"
	"time"

	"github.com/go-redis-lock/redislock"
)

// The Semaphore and the RWMutex: a permit (a read permit too) and a write
// hold are lost (see ForceLoss) and a permit stolen as a Lock's hold is.

// dropHold drops id from the holders in the sorted set key (a permit, a
// read hold), as if it had expired; it fails the test when id is not
// there.
func (s *Server) dropHold(key, id string) {
	s.t.Helper()
	s.mustHoldMember("ForceLoss", key, id)
	if err := s.dropMember(key, id); err != nil {
		s.t.Fatalf("redislocktest: ForceLoss: %v", err)
	}
}

// StealPermit makes another holder take p, a permit of sem, and returns
// the thief's permit, taken through a new Semaphore of the same name and
// size with opts (give it sem's options, at least redislock.WithKeyPrefix
// and redislock.WithFencing when sem has them: the thief's fencing token
// is then above p's). p is dropped first, so the thief takes it even when
// the semaphore is full; p learns of the loss as ForceLoss describes.
// Needs the server up.
func (s *Server) StealPermit(sem *redislock.Semaphore, p *redislock.Permit, opts ...redislock.Option) *redislock.Permit {
	s.t.Helper()
	thief, err := redislock.NewSemaphore(s.admin, sem.Name(), sem.Size(), opts...)
	if err != nil {
		s.t.Fatalf("redislocktest: StealPermit: %v", err)
	}
	if thief.Key() != p.Key() {
		s.t.Fatalf("redislocktest: StealPermit: the thief's key %q is not %q: give it the semaphore's WithKeyPrefix", thief.Key(), p.Key())
	}
	s.dropHold(p.Key(), p.ID())
	stolen, err := thief.TryAcquire(context.Background())
	if err != nil {
		s.t.Fatalf("redislocktest: StealPermit: %v", err)
	}
	if p.Token() != 0 && stolen.Token() <= p.Token() {
		s.t.Fatalf("redislocktest: StealPermit: the thief's fencing token %d is not above the holder's %d: give it redislock.WithFencing", stolen.Token(), p.Token())
	}
	return stolen
}

// forceLossRW is ForceLoss of rw's write hold, lost as a Lock's (a read
// permit is a *redislock.Permit).
func (s *Server) forceLossRW(rw *redislock.RWMutex, reason error) {
	s.t.Helper()
	if !s.holds(rw.Key(), rw.ID()) {
		s.t.Fatalf("redislocktest: ForceLoss: RWMutex %q does not hold its write lock (a read permit is lost through its *redislock.Permit)", rw.Name())
	}
	if err := s.overwrite(rw.Key(), reason == TakenOver, thiefID); err != nil {
		s.t.Fatalf("redislocktest: ForceLoss: %v", err)
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
