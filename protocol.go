package redislock

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/wait"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// A protocol is what a primitive brings to the machinery (core): its
// names, its scripts, where its keys go in them, and how its waiters
// register in Redis. The Lock, the Semaphore and the two sides of an
// RWMutex each implement it.
//
// Every acquire script takes KEYS {main, signal, third[, fence]} and ARGV
// {id, expire ms, own flag, try mode, extra...}, and answers {status,
// value} as acquire.lua does (see the headers in internal/wire/lua/);
// release and giveback take KEYS {main, signal, third} and answer as
// release.lua and giveback.lua do; extend answers as extend.lua does.
type protocol interface {
	// kind is what errors call the primitive ("lock", "semaphore"), ref
	// what events call it (Event.Kind).
	kind() string
	ref() Kind
	scripts() scripts
	// layout returns, from the primitive's keys, the acquire script's
	// KEYS for a try in mode "0", which must not touch the signal and turn
	// keys (see acquire.lua), and the extend script's KEYS.
	layout(keys []string) (solo, extend []string)
	// readsOwner reports that the main key is a string holding the owner
	// id, which the machinery may read (GET, PTTL) and watch.
	readsOwner() bool
	// shared reports that several may hold at once (a semaphore's
	// permits, an RWMutex's readers): a waiter that becomes the head of
	// its local queue after the one before it acquired tries before it
	// waits, since that says nothing of its own share.
	shared() bool
	// registration is how a busy try registers its caller as waiting.
	registration() registration
}

// scripts are a primitive's scripts.
type scripts struct {
	acquire, release, extend, giveback *redis.Script
}

// A registration is how a primitive's busy tries register their caller
// as waiting in Redis (an RWMutex's waiting writers hold new readers
// back), and how that is taken back when the caller stops waiting.
type registration interface {
	// joinsFirst reports that a blocking acquire joins its local queue
	// before its first try, whose ARGV then carry the queue's token.
	joinsFirst() bool
	// only reports that a try that will not wait is sent in mode "3",
	// which registers nothing.
	only() bool
	// token returns the last extra ARGV of a try of the queue q, and
	// false when tries carry none.
	token(t *wait.Ticket) (string, bool)
	// end takes the registration of the attempt a back, if it has one to
	// take back, as a leaves its queue having acquired or not; lastOf is
	// the token of a's generation when a was its last waiter and it may
	// be registered (see wait.Ticket.Leave).
	end(l *core, a *attempt, lastOf string, acquired bool)
	// passOn runs when a waiter's BLPOP took a signal that did not end
	// in a hold: its try came back busy, or the hold it took was released
	// because its caller had given up (see abandonWait). It passes the
	// signal on where it was meant for another waiter, and reports
	// whether it may have.
	passOn(ctx context.Context, l *core) bool
}

// unregistered is the registration of primitives whose tries register
// nothing: the Lock's and the Semaphore's.
type unregistered struct{}

func (unregistered) joinsFirst() bool                  { return false }
func (unregistered) only() bool                        { return false }
func (unregistered) token(*wait.Ticket) (string, bool) { return "", false }
func (unregistered) end(*core, *attempt, string, bool) {}

// passOn does nothing: the signal's release was someone else's hold,
// whose own release signals again, or ours, which did.
func (unregistered) passOn(context.Context, *core) bool { return false }

// ownRegistration registers each waiter for itself (an RWMutex's
// writers); leave is the script that takes it back.
type ownRegistration struct{ leave *redis.Script }

func (ownRegistration) joinsFirst() bool                  { return false }
func (ownRegistration) only() bool                        { return true }
func (ownRegistration) token(*wait.Ticket) (string, bool) { return "", false }

// end stops waiting in Redis, where others wait behind us. (A try whose
// reply did not come may have registered us too: the giveback that
// follows it takes that back.)
func (r ownRegistration) end(l *core, a *attempt, _ string, acquired bool) {
	if a.registered && !acquired {
		l.unregister(r.leave, l.ownerID(), l.abandons)
	}
}

// passOn does nothing: a writer's signal is for any writer.
func (ownRegistration) passOn(context.Context, *core) bool { return false }

// queueRegistration registers the waiters of a local queue under one token
// (an RWMutex's readers, who come in together): the token of their
// generation (see wait.Ticket.Token); leave is the script that takes it
// back once the generation's last waiter leaves.
type queueRegistration struct{ leave *redis.Script }

func (queueRegistration) joinsFirst() bool { return true }
func (queueRegistration) only() bool       { return true }

func (queueRegistration) token(t *wait.Ticket) (string, bool) { return t.Token(), true }

// end takes back the generation's registration, and the admission it may
// have been given, once nobody waits in it: whoever leaves last, even
// one that came in at its first try and registered nothing itself. The
// generation ends when one of its readers got in (later readers of the
// client join a new one): else a client whose readers keep its queue from
// ever emptying kept its admission, and the writers out, until the
// admission lapsed (1 writer, 12 readers on one client and 4 on their
// own: 53 writes in 10 s, waits of up to 2.1 s).
func (r queueRegistration) end(l *core, a *attempt, lastOf string, _ bool) {
	if lastOf != "" {
		l.unregister(r.leave, lastOf, &a.t.Queue().Abandons)
	}
}

// passOn passes on a signal that was one of the admitted readers':
// a writer's release signals each reader it admits, and a reader that
// registered after that release (not admitted, and kept out by the
// waiting writer) may pop one first, while the admitted reader it was for
// is between two BLPOPs. That reader then slept a whole slice, and its
// admission kept the writer out meanwhile (all of them waited about 1 s,
// some 35 times in 10 s with 1 writer and 4 readers on a client each).
// The giveback script pushes the signal back while admitted readers are
// still to come in (see rw_rgiveback.lua). So does a reader that gave up
// as its try came in with the signal: a read's release wakes no reader,
// and the next reader of its client, admitted in the same generation,
// slept out its slice (a writer stalled about 2 s, 4 times in 10 s, with
// readers giving up in a loop on one client).
func (queueRegistration) passOn(ctx context.Context, l *core) bool {
	l.giveBackNow(ctx)
	return true
}

// lockProtocol is the Lock's: python-redis-lock's keys and effects.
type lockProtocol struct{}

func (lockProtocol) kind() string { return "lock" }
func (lockProtocol) ref() Kind    { return KindLock }
func (lockProtocol) scripts() scripts {
	return scripts{wire.Acquire, wire.Release, wire.Extend, wire.Giveback}
}
func (lockProtocol) layout(keys []string) (solo, extend []string) { return keys[:1:1], keys[:1:1] }
func (lockProtocol) readsOwner() bool                             { return true }
func (lockProtocol) shared() bool                                 { return false }
func (lockProtocol) registration() registration                   { return unregistered{} }
