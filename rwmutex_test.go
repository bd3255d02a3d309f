package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// mustRWMutex is redislock.NewRWMutex that fails the test on error.
func mustRWMutex(t testing.TB, c redis.UniversalClient, name string, opts ...redislock.Option) *rwParticipant {
	t.Helper()
	rw, err := redislock.NewRWMutex(c, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	pt := &rwParticipant{RWMutex: rw}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// A hold the test left ends with it (its renewal would outlive
		// the test), before its server stops.
		select {
		case <-pt.Done():
		default:
			if pt.Unlock(ctx) != nil {
				pt.RUnlock(ctx)
			}
		}
		rw.Settle(ctx)
	})
	return pt
}

// rwParticipant is one participant of an RWMutex as most of its tests use
// one, a process's reader or writer: RLock keeps the read Permit that
// RUnlock releases, and Done, Err, Token, Extend and ID are those of the
// last hold it took, the read permit's after an RLock.
type rwParticipant struct {
	*redislock.RWMutex
	mu      sync.Mutex
	p       *redislock.Permit // the last read permit
	reading bool              // the last hold taken was a read
}

func (r *rwParticipant) RLock(ctx context.Context) error { return r.read(r.RWMutex.RLock(ctx)) }
func (r *rwParticipant) TryRLock(ctx context.Context) error {
	return r.read(r.RWMutex.TryRLock(ctx))
}

func (r *rwParticipant) read(p *redislock.Permit, err error) error {
	if err == nil {
		r.mu.Lock()
		r.p, r.reading = p, true
		r.mu.Unlock()
	}
	return err
}

func (r *rwParticipant) Lock(ctx context.Context) error { return r.write(r.RWMutex.Lock(ctx)) }
func (r *rwParticipant) TryLock(ctx context.Context) error {
	return r.write(r.RWMutex.TryLock(ctx))
}

func (r *rwParticipant) write(err error) error {
	if err == nil {
		r.mu.Lock()
		r.reading = false
		r.mu.Unlock()
	}
	return err
}

func (r *rwParticipant) RUnlock(ctx context.Context) error {
	r.mu.Lock()
	p := r.p
	r.mu.Unlock()
	if p == nil {
		return redislock.ErrNotAcquired
	}
	return p.Release(ctx)
}

// rwInfo is an RWMutex's Status as its protocol tests read it: the
// writer, the readers, and the waiters.
type rwInfo struct {
	Writer                                          string
	WriterTTL                                       time.Duration
	Readers                                         []holder
	WaitingWriters, WaitingReaders, AdmittedReaders int
}

// holder is one holder of a Status: its id and time left.
type holder struct {
	ID  string
	TTL time.Duration
}

// take takes the write hold, or a read hold.
func (r *rwParticipant) take(ctx context.Context, write bool) error {
	if write {
		return r.Lock(ctx)
	}
	return r.RLock(ctx)
}

// give gives back what take took.
func (r *rwParticipant) give(ctx context.Context, write bool) error {
	if write {
		return r.Unlock(ctx)
	}
	return r.RUnlock(ctx)
}

// Info is the RWMutex's Status, as an rwInfo.
func (r *rwParticipant) Info(ctx context.Context) (rwInfo, error) {
	st, err := r.Status(ctx)
	if err != nil {
		return rwInfo{}, err
	}
	in := rwInfo{WaitingWriters: st.WaitingWriters, WaitingReaders: st.WaitingReaders, AdmittedReaders: st.AdmittedReaders}
	for _, h := range st.Holders {
		if h.Kind == redislock.KindWriter {
			in.Writer, in.WriterTTL = h.Owner, h.TTL
		} else {
			in.Readers = append(in.Readers, holder{h.Owner, h.TTL})
		}
	}
	return in, nil
}

// semHolders is a Semaphore's Status as its tests read it: each holder's
// id and time left, and the size they use (0 when nobody holds).
func semHolders(ctx context.Context, s *redislock.Semaphore) ([]holder, int, error) {
	st, err := s.Status(ctx)
	if err != nil {
		return nil, 0, err
	}
	var hs []holder
	size := 0
	for _, h := range st.Holders {
		hs = append(hs, holder{h.Owner, h.TTL})
		size = h.Size
	}
	return hs, size, nil
}

// last returns the read permit when the last hold taken was a read.
func (r *rwParticipant) last() *redislock.Permit {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reading {
		return r.p
	}
	return nil
}

func (r *rwParticipant) Done() <-chan struct{} {
	if p := r.last(); p != nil {
		return p.Done()
	}
	return r.RWMutex.Done()
}

func (r *rwParticipant) Err() error {
	if p := r.last(); p != nil {
		return p.Err()
	}
	return r.RWMutex.Err()
}

func (r *rwParticipant) Token() int64 {
	if p := r.last(); p != nil {
		return p.Token()
	}
	return r.RWMutex.Token()
}

func (r *rwParticipant) ID() string {
	if p := r.last(); p != nil {
		return p.ID()
	}
	return r.RWMutex.ID()
}

func (r *rwParticipant) Extend(ctx context.Context, d time.Duration) error {
	if p := r.last(); p != nil {
		return p.Extend(ctx, d)
	}
	return r.RWMutex.Extend(ctx, d)
}

// Readers share, a writer excludes; one participant holds one hold at a
// time; Info shows who holds and who waits; bad input is refused before
// anything is written.
func TestRWMutexBasics(t *testing.T) {
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		r1, r2, w := mustRWMutex(t, c, "cfg"), mustRWMutex(t, c, "cfg"), mustRWMutex(t, c, "cfg")
		if err := r1.RLock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r2.TryRLock(ctx); err != nil {
			t.Fatalf("a second reader: %v", err)
		}
		if err := w.TryLock(ctx); !errors.Is(err, redislock.ErrLocked) {
			t.Fatalf("TryLock with readers in = %v; want ErrLocked", err)
		}
		if err := r1.TryLock(ctx); !errors.Is(err, redislock.ErrLocked) {
			t.Fatalf("TryLock on the RWMutex a goroutine reads through = %v; want ErrLocked, as sync.RWMutex.TryLock is false", err)
		}
		// A TryLock that failed registers nothing: readers still come in.
		info, err := w.Info(ctx)
		if err != nil || info.Writer != "" || len(info.Readers) != 2 || info.WaitingWriters != 0 {
			t.Fatalf("Info = %+v, %v; want two readers and no waiting writer", info, err)
		}
		r3 := mustRWMutex(t, c, "cfg")
		if err := r3.TryRLock(ctx); err != nil {
			t.Fatalf("TryRLock after a failed TryLock: %v", err)
		}
		if err := r3.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		// A Lock that waits makes new readers wait.
		wdone := make(chan error, 1)
		go func() { wdone <- w.Lock(ctx) }()
		for deadline := time.Now().Add(3 * time.Second); ; {
			info, err = w.Info(ctx)
			if err == nil && info.WaitingWriters == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Info = %+v, %v; want the blocked writer registered", info, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := r3.TryRLock(ctx); !errors.Is(err, redislock.ErrLocked) {
			t.Fatalf("TryRLock while a writer waits = %v; want ErrLocked", err)
		}
		for _, r := range []*rwParticipant{r1, r2} {
			if err := r.RUnlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := r1.RUnlock(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("second RUnlock = %v; want ErrNotAcquired", err)
		}
		if err := <-wdone; err != nil {
			t.Fatalf("the writer once the readers left: %v", err)
		}
		if err := r1.TryRLock(ctx); !errors.Is(err, redislock.ErrLocked) {
			t.Fatalf("TryRLock under a writer = %v; want ErrLocked", err)
		}
		if err := w.RUnlock(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("RUnlock by the writer = %v; want ErrNotAcquired", err)
		}
		info, err = w.Info(ctx)
		if err != nil || info.Writer != w.ID() || info.WriterTTL <= 0 || len(info.Readers) != 0 {
			t.Fatalf("Info = %+v, %v; want the writer alone", info, err)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := w.Err(); !errors.Is(err, redislock.ErrReleased) {
			t.Fatalf("Err after Unlock = %v", err)
		}
		// The participant may read now.
		if err := w.TryRLock(ctx); err != nil {
			t.Fatalf("TryRLock after Unlock: %v", err)
		}
		w.RUnlock(ctx)
	})
}

func TestRWMutexBadInput(t *testing.T) {
	quick(t)
	b := miniBackend(t)
	c := b.client()
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		rw     string
		opts   []redislock.Option
		want   error
	}{
		{"nil client", nil, "cfg", nil, redislock.ErrNilClient},
		{"empty name", c, "", nil, redislock.ErrInvalidName},
		{"no expire", c, "cfg", []redislock.Option{redislock.WithExpire(0)}, redislock.ErrInvalidExpire},
		{"brace in name", c, "c}fg", nil, redislock.ErrInvalidHashTag},
		{"bad margin", c, "cfg", []redislock.Option{redislock.WithExpire(time.Second), redislock.WithSafetyMargin(time.Second)}, redislock.ErrInvalidSafetyMargin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw, err := redislock.NewRWMutex(tc.client, tc.rw, tc.opts...)
			if rw != nil || !errors.Is(err, tc.want) || !errors.Is(err, redislock.ErrInvalidArgument) {
				t.Fatalf("NewRWMutex = %v, %v; want %v", rw, err, tc.want)
			}
		})
	}
	ctx := ctxT(t)
	rw := mustRWMutex(t, c, "cfg")
	if err := rw.Unlock(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
		t.Fatalf("Unlock never locked = %v", err)
	}
	if err := rw.RUnlock(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
		t.Fatalf("RUnlock never locked = %v", err)
	}
	if err := rw.Extend(ctx, -time.Second); !errors.Is(err, redislock.ErrInvalidDuration) {
		t.Fatalf("Extend(-1s) = %v", err)
	}
	if n := c.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("%d keys written by bad calls; want none", n)
	}
}

// rwProbe counts who is inside, in Redis: enter and leave return the
// counts after the step, so a writer that finds anyone else inside, or a
// reader that finds a writer, is caught by the test.
type rwProbe struct {
	c    *redis.Client
	keys []string // {readers inside, writers inside}
}

var probeEnter = redis.NewScript(`
local r = tonumber(redis.call('GET', KEYS[1]) or '0')
local w = tonumber(redis.call('GET', KEYS[2]) or '0')
if ARGV[1] == 'w' then w = redis.call('INCR', KEYS[2]) else r = redis.call('INCR', KEYS[1]) end
return {r, w}`)

func (p rwProbe) enter(ctx context.Context, writer bool) (readers, writers int64) {
	who := "r"
	if writer {
		who = "w"
	}
	v, err := probeEnter.Run(ctx, p.c, p.keys, who).Int64Slice()
	if err != nil {
		panic(err)
	}
	return v[0], v[1]
}

func (p rwProbe) leave(ctx context.Context, writer bool) {
	k := p.keys[0]
	if writer {
		k = p.keys[1]
	}
	p.c.Decr(ctx, k)
}

// Eight readers are inside together; readers and writers in a mixed load
// of several seconds never meet a writer inside with anyone else, and
// every participant gets its turns. In the broken variant the writers take
// the mutex for reading, and the probe catches them inside together with
// others.
func TestRWMutexExcludes(t *testing.T) {
	t.Parallel()
	andBroken(t, "rwmutex", "writers read", func(t *testing.T, broken bool) {
		s, ctx, _ := started(t)
		probe := rwProbe{s.Client(), []string{"probe:r", "probe:w"}}

		// Eight readers at once.
		var readers []*rwParticipant
		for range 8 {
			r := mustRWMutex(t, s.Client(), "cfg")
			if err := r.RLock(ctx); err != nil {
				t.Fatal(err)
			}
			readers = append(readers, r)
		}
		most := int64(0)
		for range readers {
			n, _ := probe.enter(ctx, false)
			most = max(most, n)
		}
		for _, r := range readers {
			probe.leave(ctx, false)
			if err := r.RUnlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if most != 8 {
			t.Fatalf("%d readers inside together; want 8", most)
		}

		// A mixed load: 6 readers, 2 writers, each on a client of its own.
		var (
			wg         sync.WaitGroup
			overlaps   atomic.Int64
			reads      atomic.Int64
			writes     atomic.Int64
			mostInside atomic.Int64
		)
		stop := time.Now().Add(2 * time.Second)
		for i := range 8 {
			writer := i < 2
			rw := mustRWMutex(t, s.Client(), "cfg", redislock.WithExpire(10*time.Second))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					var err error
					if writer && !broken {
						err = rw.Lock(ctx)
					} else {
						err = rw.RLock(ctx)
					}
					if err != nil {
						t.Error(err)
						return
					}
					r, w := probe.enter(ctx, writer)
					if writer && (w > 1 || r > 0) || !writer && w > 0 {
						overlaps.Add(1)
					}
					if !writer {
						for m := mostInside.Load(); r > m && !mostInside.CompareAndSwap(m, r); m = mostInside.Load() {
						}
					}
					time.Sleep(2 * time.Millisecond)
					probe.leave(ctx, writer)
					if writer && !broken {
						err = rw.Unlock(ctx)
						writes.Add(1)
					} else {
						err = rw.RUnlock(ctx)
						if writer {
							writes.Add(1)
						} else {
							reads.Add(1)
						}
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		t.Logf("mixed load: %d reads, %d writes, up to %d readers inside together, %d overlaps seen by the probe",
			reads.Load(), writes.Load(), mostInside.Load(), overlaps.Load())
		if reads.Load() == 0 || writes.Load() < 4 {
			t.Fatalf("%d reads and %d writes: one side starved", reads.Load(), writes.Load())
		}
		if (overlaps.Load() > 0) != broken {
			t.Fatalf("%d overlaps of a writer with another; want some = %v", overlaps.Load(), broken)
		}
	})
}

// A writer behind a continuous stream of overlapping readers (each holds
// 200 ms, a new one starting every 50 ms) gets in within the longest read
// hold plus a margin: once it waits, new readers wait behind it. Its
// broken variant is the mutation rw-no-writer-preference.
func TestRWMutexWriterNotStarved(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	const hold = 200 * time.Millisecond
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for i := range 4 {
		rw := mustRWMutex(t, s.Client(), "cfg")
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * hold / 4)
			for {
				select {
				case <-stop:
					return
				default:
				}
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := rw.RLock(rctx)
				cancel()
				if err != nil {
					continue
				}
				reads.Add(1)
				time.Sleep(hold)
				rw.RUnlock(ctx)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond) // the stream runs
	w := mustRWMutex(t, s.Client(), "cfg")
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err := w.Lock(wctx)
	cancel()
	took := time.Since(start)
	close(stop)
	if err == nil {
		w.Unlock(ctx)
	}
	wg.Wait()
	t.Logf("writer behind %d reads of %v: in after %v (%v)", reads.Load(), hold, took, err)
	if err != nil || took > hold+300*time.Millisecond {
		t.Fatalf("writer got in after %v (%v); want within the longest read hold (%v) + 300ms", took, err, hold)
	}
}

// Readers waiting behind a writer get in before the next writer, even one
// that was waiting before them: W1 holds, R1..R3 wait, W2 waits; W1's
// release lets R1..R3 in together first, then W2. Its broken variant is
// the mutation rw-release-wakes-writer-first.
func TestRWMutexWaitingReadersGoFirst(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		w1 := mustRWMutex(t, b.client(), "cfg")
		if err := w1.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		var log entryLog
		log.enter(t, ctx, "W2", mustRWMutex(t, b.client(), "cfg"), true, 300*time.Millisecond)
		waitInfoWithin(t, ctx, w1, 10*time.Second, "W2 waits", func(i rwInfo) bool { return i.WaitingWriters == 1 })
		for i := range 3 {
			log.enter(t, ctx, fmt.Sprintf("R%d", i+1), mustRWMutex(t, b.client(), "cfg"), false, 300*time.Millisecond)
		}
		waitInfoWithin(t, ctx, w1, 10*time.Second, "the readers wait behind W1 and W2", func(i rwInfo) bool { return i.WaitingReaders == 3 })
		if err := w1.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		entries := log.wait()
		order := whoOf(entries)
		t.Logf("order after W1's release: %v", order)
		if len(order) != 4 || order[3] != "W2" {
			t.Fatalf("order %v; want the three readers, then W2", order)
		}
		if spread := entries[2].at.Sub(entries[0].at); spread > 250*time.Millisecond {
			t.Fatalf("the readers came in %v apart; want them inside together (each reads 300ms)", spread)
		}
	})
}

// entryLog records the order in which RWMutex participants get in.
type entryLog struct {
	mu      sync.Mutex
	entries []entry
	wg      sync.WaitGroup
}

// entry is one participant's way in: who, and when.
type entry struct {
	who string
	at  time.Time
}

// enter starts who, taking rw's write or read hold, holding it for hold,
// then letting go.
func (e *entryLog) enter(t *testing.T, ctx context.Context, who string, rw *rwParticipant, write bool, hold time.Duration) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := rw.take(ctx, write); err != nil {
			t.Error(err)
			return
		}
		e.mu.Lock()
		e.entries = append(e.entries, entry{who, time.Now()})
		e.mu.Unlock()
		time.Sleep(hold) // the work under the hold
		if err := rw.give(ctx, write); err != nil {
			t.Error(err)
		}
	}()
}

// wait waits for every participant to have left and returns the entries
// in the order they came in.
func (e *entryLog) wait() []entry {
	e.wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.entries)
}

// whoOf is the entries' participants, in order.
func whoOf(entries []entry) []string {
	var who []string
	for _, e := range entries {
		who = append(who, e.who)
	}
	return who
}

// A SIGKILLed reader holds a waiting writer up only until its own expire
// (1 s): the writer is in within TTL + 1 s. In the broken variant the
// reader's hold lasts an hour, and the same check finds the writer still
// waiting.
func TestRWMutexReaderKilled(t *testing.T) {
	t.Parallel()
	long(t, "kills a reader process")
	for _, tc := range killCases("broken/read hold outlives its reader", "1h") {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx, _ := started(t)
			live := mustRWMutex(t, s.Client(), "cfg", redislock.WithExpire(300*time.Millisecond), redislock.WithAutoRenewal())
			if err := live.RLock(ctx); err != nil {
				t.Fatal(err)
			}
			cmd, _ := startHeld(t, worker(t, "rwread", "W_ADDR="+s.Addr, "W_NAME=cfg", "W_EXPIRE="+tc.expire))
			held := time.Now()
			w := mustRWMutex(t, s.Client(), "cfg")
			got := make(chan error, 1)
			wctx, cancel := context.WithTimeout(ctx, killedTTL+killedSlack+time.Second)
			defer cancel()
			go func() { got <- w.Lock(wctx) }()
			waitBlocked(t, s.Client(), 1)
			if err := live.RUnlock(ctx); err != nil { // the live reader leaves at once
				t.Fatal(err)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			err := <-got
			killedHolderFreed(t, "the writer's Lock()", err, held, tc.wantFreed)
			if err == nil {
				w.Unlock(ctx)
			}
		})
	}
}

// Each reader's hold has its own expiry and renewal: a reader with a short
// expire neither shortens a long one's TTL nor is kept by it, and a
// renewing reader with a 300 ms expire stays for a second.
func TestRWMutexReadersExpireOnTheirOwn(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		long := mustRWMutex(t, c, "cfg", redislock.WithExpire(10*time.Second))
		short := mustRWMutex(t, c, "cfg", redislock.WithExpire(300*time.Millisecond))
		renewed := mustRWMutex(t, c, "cfg", redislock.WithExpire(300*time.Millisecond), redislock.WithAutoRenewal())
		for _, r := range []*rwParticipant{long, short, renewed} {
			if err := r.RLock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second)
		info, err := long.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range info.Readers {
			ids = append(ids, r.ID)
			if r.ID == long.ID() && r.TTL < 8*time.Second {
				t.Fatalf("the long reader's TTL was cut to %v", r.TTL)
			}
		}
		if !slices.Contains(ids, long.ID()) || !slices.Contains(ids, renewed.ID()) || slices.Contains(ids, short.ID()) {
			t.Fatalf("readers after 1s: %v; want the long and the renewed one, not the short one", ids)
		}
		if err := short.Err(); !errors.Is(err, redislock.ErrLost) {
			t.Fatalf("short reader's Err = %v; want ErrLost", err)
		}
		if err := renewed.Err(); err != nil {
			t.Fatalf("renewed reader lost its hold: %v", err)
		}
	})
}

// Locker is a sync.Locker on the write hold: it waits for a reader of
// the same RWMutex, as sync.RWMutex's Lock waits for its RLock's.
func TestRWMutexLockers(t *testing.T) {
	quick(t)
	b := miniBackend(t)
	rw := mustRWMutex(t, b.client(), "cfg")
	l := rw.Locker()
	if err := rw.RLock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { l.Lock(); close(done) }()
	select {
	case <-done:
		t.Fatal("Locker's Lock went in while a reader of the same RWMutex held")
	case <-time.After(100 * time.Millisecond):
	}
	if err := rw.RUnlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	<-done
	other := mustRWMutex(t, b.client(), "cfg")
	if err := other.TryRLock(ctxT(t)); !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("TryRLock while Locker holds = %v", err)
	}
	l.Unlock()
}

// Reset drops the writer and the readers; a renewing reader finds its hold
// gone and is lost, never puts it back; List and ResetAll see the RWMutex.
func TestRWMutexReset(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		r := mustRWMutex(t, c, "cfg", redislock.WithExpire(300*time.Millisecond), redislock.WithAutoRenewal())
		if err := r.RLock(ctx); err != nil {
			t.Fatal(err)
		}
		list, err := redislock.List(ctx, c, "*")
		if err != nil || len(list) != 1 || list[0].Kind != redislock.KindReader || list[0].Owner != r.ID() {
			t.Fatalf("List = %+v, %v; want the reader", list, err)
		}
		n, err := r.Reset(ctx)
		if err != nil || n != 1 {
			t.Fatalf("Reset = %d, %v; want 1", n, err)
		}
		select {
		case <-r.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("the reset reader was not told")
		}
		if err := r.Err(); !errors.Is(err, redislock.ErrLost) {
			t.Fatalf("reset reader's Err = %v; want ErrLost", err)
		}
		if err := r.Extend(ctx, time.Minute); !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("reset reader's Extend = %v; want ErrNotAcquired (never recreated)", err)
		}
		if info, _ := r.Info(ctx); len(info.Readers) != 0 {
			t.Fatalf("readers after the reset: %v", info.Readers)
		}
		w := mustRWMutex(t, c, "cfg")
		if err := w.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		list, err = redislock.List(ctx, c, "c*")
		if err != nil || len(list) != 1 || list[0].Kind != redislock.KindWriter || list[0].Owner != w.ID() {
			t.Fatalf("List = %+v, %v; want the writer", list, err)
		}
		if n, err := redislock.ResetAll(ctx, c); err != nil || n != 1 {
			t.Fatalf("ResetAll = %d, %v; want 1", n, err)
		}
		if err := w.Unlock(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("Unlock after ResetAll = %v; want ErrNotAcquired", err)
		}
	})
}

// One RWMutex shared by goroutines, as a sync.RWMutex: they read
// together (a read Permit each) and write alone; a writer waits for the
// readers, and for the writer before it, of its own process too; never
// a reader and a writer, or two writers, inside at once.
func TestRWMutexSharedByGoroutines(t *testing.T) {
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		rw, err := redislock.NewRWMutex(b.client(), "cfg")
		if err != nil {
			t.Fatal(err)
		}
		var (
			mu                     sync.Mutex
			readers, writers, most int
			bad                    string
			reads, writes          atomic.Int32
			wg                     sync.WaitGroup
		)
		enter := func(write bool) {
			mu.Lock()
			defer mu.Unlock()
			if write {
				writers++
			} else {
				readers++
			}
			most = max(most, readers)
			if writers > 1 || writers == 1 && readers > 0 {
				bad = fmt.Sprintf("%d writers and %d readers inside at once", writers, readers)
			}
		}
		leave := func(write bool) {
			mu.Lock()
			defer mu.Unlock()
			if write {
				writers--
			} else {
				readers--
			}
		}
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				write := i < 2
				for range 5 {
					var (
						p   *redislock.Permit
						err error
					)
					if write {
						err = rw.Lock(ctx)
					} else {
						p, err = rw.RLock(ctx)
					}
					if err != nil {
						t.Error(err)
						return
					}
					enter(write)
					time.Sleep(2 * time.Millisecond)
					leave(write)
					if write {
						err = rw.Unlock(ctx)
						writes.Add(1)
					} else {
						err = p.Release(ctx)
						reads.Add(1)
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if bad != "" || reads.Load() != 20 || writes.Load() != 10 || most < 2 {
			t.Fatalf("%s; %d of 20 reads and %d of 10 writes done, at most %d readers at once; want no overlap, all done, readers together",
				bad, reads.Load(), writes.Load(), most)
		}
	})
}

// Readers that share a client take turns in one local queue, which waits
// in Redis under one registration; a writer's release admits it. Whichever
// reader leaves that queue last takes the admission back, even one that
// came in at its first try and never registered itself: else no writer
// gets in for as long as an admission lasts, though nobody holds the
// mutex (one writer and four readers on one client ran at a tenth of the
// speed of a client each).
//
// The readers' client is slowed by 100 ms each way, so that the second
// reader, which asks after the writer's release, answers after the first.
func TestRWMutexSharedReadersLeaveNoAdmission(t *testing.T) {
	quick(t)
	ctx := ctxT(t)
	s := redistest.Start(t)
	p := proxyTo(t, s)
	shared := clientVia(t, p)
	w := mustRWMutex(t, s.Client(), "cfg")
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	r1, r2 := mustRWMutex(t, shared, "cfg"), mustRWMutex(t, shared, "cfg")
	first := make(chan error, 1)
	go func() { first <- r1.RLock(ctx) }()
	waitInfo(t, ctx, w, "the first reader waits", func(i rwInfo) bool { return i.WaitingReaders == 1 })
	p.SetLatency(100 * time.Millisecond)
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() { second <- r2.RLock(ctx) }() // joins the queue behind the woken first reader
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatalf("RLock() = %v", err)
		}
	}
	p.SetLatency(0)
	for _, r := range []*rwParticipant{r1, r2} {
		if err := r.RUnlock(ctx); err != nil {
			t.Fatalf("RUnlock() = %v", err)
		}
	}
	if err := w.TryLock(ctx); err != nil {
		info, _ := w.Info(ctx)
		t.Fatalf("TryLock() with nobody holding = %v, want nil (Info %+v)", err, info)
	}
}

// Readers on one client that keep coming back (their client's queue never
// empties) let a waiting writer in once the readers who waited at the last
// writer's release are in: those are what the release admitted, not every
// reader the client sends while any of them waits. (The client's
// admission was taken back only when its queue emptied: 1 writer, 12
// readers on one client and 4 on their own, holds of no time, made 53
// writes in 10 s, with waits of up to 2.1 s, the admission's lapse.)
// Counted, not timed: the readers who come in between W1's release and
// W2's acquire.
func TestRWMutexBusySharedClientLetsTheWriterIn(t *testing.T) {
	quick(t)
	ctx := ctxT(t)
	s := redistest.Start(t)
	w1, w2 := mustRWMutex(t, s.Client(), "cfg"), mustRWMutex(t, s.Client(), "cfg")
	if err := w1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	shared := s.Client()
	const n = 8 // enough that the shared queue never empties while they loop
	var (
		in      atomic.Int64
		started sync.WaitGroup
		wg      sync.WaitGroup
	)
	stop := make(chan struct{})
	for range n {
		r := mustRWMutex(t, shared, "cfg")
		started.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := true
			for {
				rctx, cancel := context.WithCancel(ctx)
				go func() {
					select {
					case <-stop:
					case <-rctx.Done():
					}
					cancel()
				}()
				if first {
					started.Done()
					first = false
				}
				err := r.RLock(rctx)
				cancel()
				if err != nil {
					return // stopped
				}
				in.Add(1)
				if err := r.RUnlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	started.Wait()
	waitInfo(t, ctx, w1, "the readers registered", func(i rwInfo) bool { return i.WaitingReaders == 1 })
	got := make(chan int64, 1)
	go func() {
		if err := w2.Lock(ctx); err != nil {
			t.Error(err)
			got <- -1
			return
		}
		got <- in.Load()
		w2.Unlock(ctx)
	}()
	waitInfo(t, ctx, w1, "W2 registered", func(i rwInfo) bool { return i.WaitingWriters == 1 })
	if err := w1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	between := <-got
	close(stop)
	wg.Wait()
	t.Logf("%d reads between W1's release and W2's acquire", between)
	if between < 1 || between > n {
		t.Fatalf("%d reads between W1's release and W2's acquire; want the %d readers that waited, at most", between, n)
	}
}

// One writer and four readers, a client each, for 3 s: nobody waits a
// slice while the mutex is free. A writer's release signals each reader
// it admits; a reader that asked after that release (not admitted, and
// kept out by the writer waiting again) could pop one of those signals
// while the reader it was for was between two BLPOPs, which then slept a
// whole slice (about 1 s) while its admission kept the writer out: all
// five waited, some 35 times in 10 s (5,700-7,100 acquisitions against
// 57,000-60,000 now). The popped signal is passed on.
func TestRWMutexAdmittedReaderIsNotLeftAsleep(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	ctx, cancel := context.WithTimeout(ctxT(t), 3*time.Second)
	defer cancel()
	var mu sync.Mutex
	var n int
	var worst time.Duration
	var wg sync.WaitGroup
	for i := range 5 {
		rw := mustRWMutex(t, s.Client(), "cfg")
		lock, unlock := rw.RLock, rw.RUnlock
		if i == 0 {
			lock, unlock = rw.Lock, rw.Unlock
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				start := time.Now()
				if err := lock(ctx); err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				took := time.Since(start)
				if err := unlock(context.Background()); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				n++
				worst = max(worst, took)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d acquisitions in 3 s, the longest wait %v", n, worst)
	if worst > 700*time.Millisecond {
		t.Fatalf("a wait took %v with holds of no time at all: a reader slept a slice while admitted", worst)
	}
}

// TryDo and TryRDo run fn only when the mutex can be had at once, for
// writing and for reading, and say ErrLocked otherwise, as Lock.TryDo does.
func TestRWMutexTryDo(t *testing.T) {
	b := miniBackend(t)
	ctx := ctxT(t)
	newRW := func() *redislock.RWMutex {
		rw, err := redislock.NewRWMutex(b.client(), "cfg")
		if err != nil {
			t.Fatal(err)
		}
		return rw
	}
	mine, other := newRW(), newRW()
	ran := func(try func(context.Context, func(context.Context) error) error) (bool, error) {
		did := false
		err := try(ctx, func(context.Context) error { did = true; return nil })
		return did, err
	}
	want := func(what string, try func(context.Context, func(context.Context) error) error, runs bool) {
		t.Helper()
		did, err := ran(try)
		if runs && (!did || err != nil) {
			t.Fatalf("%s = ran %v, %v; want fn run and nil", what, did, err)
		}
		if !runs && (did || !errors.Is(err, redislock.ErrLocked)) {
			t.Fatalf("%s = ran %v, %v; want ErrLocked and fn not run", what, did, err)
		}
	}

	want("TryDo on a free mutex", mine.TryDo, true)
	want("TryRDo on a free mutex", mine.TryRDo, true)

	if err := other.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	want("TryDo while another writes", mine.TryDo, false)
	want("TryRDo while another writes", mine.TryRDo, false)
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	p, err := other.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want("TryDo while another reads", mine.TryDo, false)
	want("TryRDo while another reads", mine.TryRDo, true)
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Each left the mutex free: the write hold can be had at once.
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after the TryDo calls = %v", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for name, try := range map[string]func(context.Context, func(context.Context) error) error{"TryDo": mine.TryDo, "TryRDo": mine.TryRDo} {
		if err := try(ctx, nil); !errors.Is(err, redislock.ErrInvalidArgument) {
			t.Fatalf("%s(nil fn) = %v, want ErrInvalidArgument", name, err)
		}
	}
}
