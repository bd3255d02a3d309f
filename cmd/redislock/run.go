package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

const runHelp = `Usage: redislock run [flags] NAME -- COMMAND [ARGS...]

Takes the lock NAME (waiting unless --no-wait), runs COMMAND, renewing the
lock, and releases it when COMMAND exits: flock(1) across the hosts of one
Redis, on python-redis-lock's lock:NAME keys. --shared and --exclusive make
NAME a reader/writer lock, --semaphore N a semaphore of N permits.

{{flags}}

Exit codes:
  COMMAND's  COMMAND ran and the lock held throughout
  75         the lock is busy: --no-wait, or --wait ran out (see -E)
  69         the lock was lost while COMMAND ran (SIGTERM, then SIGKILL)
  128+N      signal N came before COMMAND started (SIGINT 130, SIGTERM 143)
  1          Redis unreachable, a Redis error
  2          bad flags or arguments (nothing was sent to Redis)
  126, 127   COMMAND could not be run, or was not found

Examples:
  redislock run -n -q nightly -- ./nightly-job  # cron: skip silently if busy

Signals, the terminal, a lost lock, kill -9: docs/command.md.
`

// rwWriter is the write side of an RWMutex as run holds it (rwReader,
// below, the read side).
type rwWriter struct{ *redislock.RWMutex }

func (w rwWriter) Acquire(ctx context.Context) error    { return w.Lock(ctx) }
func (w rwWriter) TryAcquire(ctx context.Context) error { return w.TryLock(ctx) }
func (w rwWriter) Release(ctx context.Context) error    { return w.Unlock(ctx) }

// semHolder holds one permit of a Semaphore, as run holds it: Done and Err
// are the permit's once Acquire or TryAcquire returned one.
type semHolder struct {
	*redislock.Semaphore
	p *redislock.Permit
}

func (s *semHolder) Acquire(ctx context.Context) (err error) {
	s.p, err = s.Semaphore.Acquire(ctx)
	return err
}

func (s *semHolder) TryAcquire(ctx context.Context) (err error) {
	s.p, err = s.Semaphore.TryAcquire(ctx)
	return err
}

func (s *semHolder) Release(ctx context.Context) error { return s.p.Release(ctx) }
func (s *semHolder) Done() <-chan struct{}             { return s.p.Done() }
func (s *semHolder) Err() error                        { return s.p.Err() }

// rwReader holds one read permit of an RWMutex, as semHolder a permit.
type rwReader struct {
	*redislock.RWMutex
	p *redislock.Permit
}

func (r *rwReader) Acquire(ctx context.Context) (err error) {
	r.p, err = r.RLock(ctx)
	return err
}

func (r *rwReader) TryAcquire(ctx context.Context) (err error) {
	r.p, err = r.TryRLock(ctx)
	return err
}

func (r *rwReader) Release(ctx context.Context) error { return r.p.Release(ctx) }
func (r *rwReader) Done() <-chan struct{}             { return r.p.Done() }
func (r *rwReader) Err() error                        { return r.p.Err() }

// holdable is what run holds: a Lock, a Semaphore's permit, or a side of
// an RWMutex.
type holdable interface {
	Acquire(ctx context.Context) error
	TryAcquire(ctx context.Context) error
	Release(ctx context.Context) error
	Settle(ctx context.Context) error
	Done() <-chan struct{}
	Err() error
}

// runFlags are run's own flags.
type runFlags struct {
	noWait     bool
	wait       time.Duration
	expire     time.Duration
	maxHold    time.Duration
	id         string
	busyCode   int
	quiet      bool // nothing printed when busy
	killAfter  time.Duration
	relTimeout time.Duration
	semaphore  int  // a semaphore's size; 0: a lock
	shared     bool // an RWMutex held for reading
	exclusive  bool // an RWMutex held for writing
}

// validate checks the flags in the command line's terms, before anything
// is sent; idGiven tells whether --id was on the command line.
func (f *runFlags) validate(idGiven bool) error {
	switch {
	case f.noWait && f.wait != 0:
		return errors.New("--no-wait and --wait exclude each other")
	case f.wait < 0:
		return errors.New("--wait must not be negative")
	case f.expire < time.Millisecond:
		return errors.New("--expire must be at least 1ms (the lock is renewed while COMMAND runs, so it needs an expire)")
	case f.maxHold < 0 || (f.maxHold != 0 && f.maxHold < f.expire):
		return fmt.Errorf("--max-hold must be 0 (no limit) or at least --expire (%v)", f.expire)
	case idGiven && f.id == "":
		return errors.New("--id must not be empty")
	case f.busyCode < 0 || f.busyCode > 255:
		return errors.New("--conflict-exit-code must be between 0 and 255")
	case f.killAfter < 0:
		return errors.New("--kill-after must not be negative")
	case f.relTimeout <= 0:
		return errors.New("--release-timeout must be more than 0")
	case f.semaphore < 0:
		return errors.New("--semaphore must be at least 1 (or 0: a lock)")
	case f.shared && f.exclusive:
		return errors.New("--shared and --exclusive exclude each other")
	case (f.shared || f.exclusive) && f.semaphore != 0:
		return errors.New("--semaphore excludes --shared and --exclusive")
	}
	return nil
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// --verbose's lines and COMMAND's own stderr (copied by a goroutine of
	// os/exec unless it is a file) go to stderr at the same time.
	stderr = syncWriter(stderr)
	var (
		conn connFlags
		f    runFlags
	)
	fs := newFlagSet("run", runHelp, stderr)
	conn.register(fs)
	fs.BoolVar(&f.noWait, "no-wait", false, "fail at once (exit 75) if the lock is busy")
	fs.BoolVar(&f.noWait, "n", false, "short for --no-wait")
	fs.DurationVar(&f.wait, "wait", 0, "give up (exit 75) after `D`; 0: never")
	fs.DurationVar(&f.wait, "w", 0, "short for --wait")
	fs.DurationVar(&f.expire, "expire", 30*time.Second, "expire after `D`, renewed every 2/3 of it")
	fs.DurationVar(&f.maxHold, "max-hold", 0, "stop renewing after `D` (>= --expire); 0: no limit")
	fs.StringVar(&f.id, "id", "", "owner `ID` (default HOST:PID:RANDOM-UUID)")
	fs.IntVar(&f.busyCode, "conflict-exit-code", exitBusy, "exit `CODE` when busy; 0: silent")
	fs.IntVar(&f.busyCode, "E", exitBusy, "short for --conflict-exit-code")
	fs.BoolVar(&f.quiet, "quiet", false, "print nothing when the lock is busy (as flock -n)")
	fs.BoolVar(&f.quiet, "q", false, "short for --quiet")
	fs.DurationVar(&f.killAfter, "kill-after", 10*time.Second, "on a loss, SIGKILL `D` after SIGTERM")
	fs.DurationVar(&f.relTimeout, "release-timeout", 5*time.Second, "how long `D` the final release may take")
	fs.IntVar(&f.semaphore, "semaphore", 0, "NAME is a semaphore of `N` permits: hold one")
	fs.BoolVar(&f.shared, "shared", false, "hold NAME, a reader/writer lock, for reading")
	fs.BoolVar(&f.exclusive, "exclusive", false, "hold NAME, a reader/writer lock, for writing")
	pos, command, dashdash, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	switch {
	case !dashdash || len(command) == 0:
		return fail(stderr, "run", exitUsage, errors.New("missing -- COMMAND [ARGS...] after the lock name"))
	case len(pos) != 1:
		return fail(stderr, "run", exitUsage, fmt.Errorf("want exactly one lock NAME before --, got %d arguments", len(pos)))
	}
	name := pos[0]
	if err := conn.validate(name); err != nil {
		return fail(stderr, "run", exitUsage, err)
	}
	if err := f.validate(flagSet(fs, "id")); err != nil {
		return fail(stderr, "run", exitUsage, err)
	}
	opts := append(conn.lockOptions(stderr), redislock.WithExpire(f.expire), redislock.WithAutoRenewal(),
		redislock.WithSafetyMargin(runMargin(f.expire, f.killAfter)))
	if flagSet(fs, "id") {
		opts = append(opts, redislock.WithID(f.id))
	}
	if f.maxHold != 0 {
		opts = append(opts, redislock.WithMaxHold(f.maxHold))
	}
	client, where, err := conn.client()
	if err != nil {
		return fail(stderr, "run", exitUsage, err)
	}
	defer client.Close()
	// New checks every argument before the first byte goes to Redis; the
	// flags were checked above, so an error here is a case they missed.
	var (
		lock holdable
		busy func(ctx context.Context) string // why it is busy, for the message
	)
	switch {
	case f.shared || f.exclusive:
		rw, err := redislock.NewRWMutex(client, name, opts...)
		if err != nil {
			return fail(stderr, "run", exitUsage, err)
		}
		side := "for writing"
		lock = rwWriter{rw}
		if f.shared {
			side, lock = "for reading", &rwReader{RWMutex: rw}
		}
		busy = func(ctx context.Context) string {
			st, err := rw.Status(ctx)
			switch {
			case err != nil:
				return fmt.Sprintf("reader/writer lock %q is busy %s", name, side)
			case len(st.Holders) > 0 && st.Holders[0].Kind == redislock.KindWriter:
				return fmt.Sprintf("reader/writer lock %q is busy %s (a writer holds it: %q)", name, side, st.Holders[0].Owner)
			case f.shared && st.WaitingWriters > 0:
				return fmt.Sprintf("reader/writer lock %q is busy %s (%d readers hold it, and a writer waits)", name, side, len(st.Holders))
			}
			return fmt.Sprintf("reader/writer lock %q is busy %s (%d readers hold it)", name, side, len(st.Holders))
		}
	case f.semaphore > 0:
		sem, err := redislock.NewSemaphore(client, name, f.semaphore, opts...)
		if err != nil {
			return fail(stderr, "run", exitUsage, err)
		}
		lock, busy = &semHolder{Semaphore: sem}, func(context.Context) string {
			return fmt.Sprintf("semaphore %q is busy (all %d permits held)", name, f.semaphore)
		}
	default:
		l, err := redislock.New(client, name, opts...)
		if err != nil {
			return fail(stderr, "run", exitUsage, err)
		}
		lock, busy = l, func(ctx context.Context) string {
			owner, err := l.OwnerID(ctx)
			if err != nil {
				return fmt.Sprintf("lock %q is busy (its owner could not be read: %v)", name, err)
			}
			if owner == "" {
				return fmt.Sprintf("lock %q is busy (and was released just after)", name)
			}
			return fmt.Sprintf("lock %q is busy (held by %q)", name, owner)
		}
	}

	// Signals: until COMMAND starts they end redislock; while COMMAND runs
	// they are passed on to it. run handles SIGINT, SIGTERM and SIGHUP
	// itself, through sigs: main's signal context, which sees the same
	// signals, must not end the wait first and turn an interruption into a
	// plain failure.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	sig, err := takeLock(context.WithoutCancel(ctx), lock, client, where, f, sigs)
	if err != nil {
		// An Acquire that gave up returned at once; what it had sent to
		// Redis is finished behind it (a wake-up it took is passed on, a
		// lock its last try took is released). Wait for that, briefly,
		// so that exiting leaves nothing behind.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), f.relTimeout)
		_ = lock.Settle(sctx)
		scancel()
	}
	if sig != 0 {
		state := "COMMAND did not start"
		if err == nil {
			// The signal raced with a successful acquire.
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), f.relTimeout)
			defer rcancel()
			if lock.Release(rctx) == nil {
				state += "; lock released"
			} else {
				state += "; the lock it took expires on its own"
			}
		}
		return fail(stderr, "run", 128+int(sig), fmt.Errorf("interrupted by %s before COMMAND started; %s", signalName(sig), state))
	}
	switch {
	case err == nil:
	case errors.As(err, new(unreachableError)):
		return fail(stderr, "run", exitFail, err)
	case errors.Is(err, redislock.ErrLocked) && (f.noWait || errors.Is(err, context.DeadlineExceeded)):
		if f.busyCode == 0 || f.quiet {
			return f.busyCode // asked for: silent, as flock -n (cron mails any output)
		}
		// Who holds it is read with a deadline of its own: the message
		// must not wait on a Redis that stopped answering.
		bctx, bcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer bcancel()
		return fail(stderr, "run", f.busyCode, errors.New(busy(bctx)))
	default:
		return fail(stderr, "run", exitFail, err)
	}

	code, lostErr := runHolding(lock, command, sigs, f.killAfter, stdout, stderr)

	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), f.relTimeout)
	defer rcancel()
	relErr := lock.Release(rctx)
	switch {
	case lostErr != nil:
		return fail(stderr, "run", exitLost, fmt.Errorf("%v while COMMAND ran; COMMAND was terminated", lostErr))
	case errors.Is(relErr, redislock.ErrNotAcquired):
		what := "lock"
		switch {
		case f.semaphore > 0:
			what = "semaphore permit of"
		case f.shared:
			what = "read hold of"
		case f.exclusive:
			what = "write hold of"
		}
		return fail(stderr, "run", exitLost, fmt.Errorf("%s %q was lost before COMMAND finished", what, name))
	case relErr != nil:
		fmt.Fprintf(stderr, "redislock run: %v (the lock expires on its own)\n", relErr)
	}
	return code
}

// runMargin is run's safety margin (see the help): --kill-after + 1s, so
// that COMMAND is killed before its key can expire, but at most half the
// expire.
func runMargin(expire, killAfter time.Duration) time.Duration {
	return min(killAfter+time.Second, expire/2)
}

// unreachableError is takeLock's error when Redis did not answer PING.
type unreachableError struct{ error }

// takeLock checks that Redis answers, then acquires lock as f says
// (waiting, with a deadline, or not at all). A signal on sigs ends it: it
// returns that signal, and the acquire's error (nil when the lock was
// taken all the same). With no signal, sig is 0 and err is the acquire's
// error, or an unreachableError.
func takeLock(ctx context.Context, lock holdable, client redis.UniversalClient, where string, f runFlags, sigs <-chan os.Signal) (sig syscall.Signal, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The watcher is joined before takeLock returns, so it cannot swallow a
	// signal meant for COMMAND.
	interrupted := make(chan syscall.Signal, 1)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case s := <-sigs:
			interrupted <- s.(syscall.Signal)
			cancel()
		case <-ctx.Done():
		}
	}()
	if err = check(ctx, client, where); err != nil {
		err = unreachableError{err}
	} else {
		actx := ctx
		if f.wait > 0 {
			var cancelWait context.CancelFunc
			actx, cancelWait = context.WithTimeout(ctx, f.wait)
			defer cancelWait()
		}
		if f.noWait {
			err = lock.TryAcquire(actx)
		} else {
			err = lock.Acquire(actx)
		}
	}
	cancel()
	<-watched
	select {
	case sig = <-interrupted:
	default:
	}
	return sig, err
}

// signalName returns the usual name of the signals run handles.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return sig.String()
}
