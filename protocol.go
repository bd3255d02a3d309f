package redislock

import (
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/wire"
)

// A protocol is what a primitive brings to the machinery (core): its
// scripts, each taking the KEYS and ARGV layout of the Lock's own (see
// the headers in internal/wire/lua/), and what its keys allow.
//
// Every acquire script takes KEYS {main, signal, third[, fence]} and ARGV
// {id, expire ms, own flag, try mode, extra...}, and answers {status,
// value} as acquire.lua does; release and giveback take KEYS {main,
// signal, third} and answer as release.lua and giveback.lua do; extend
// answers as extend.lua does.
type protocol struct {
	kind     string // what errors call it: "lock", "semaphore"
	ref      Kind   // what events call it (LockRef.Kind)
	acquire  *redis.Script
	release  *redis.Script
	extend   *redis.Script
	giveback *redis.Script

	// readsKey: the main key is a string holding the owner id (the Lock's),
	// which the machinery may read (GET, PTTL) and watch (WithTracking).
	readsKey bool

	// extendKeys returns the extend script's KEYS, from the primitive's
	// keys.
	extendKeys func(keys []string) []string

	// solo returns the acquire script's KEYS for a try in mode "0", which
	// must not touch the signal and turn keys (see lua/acquire.lua in internal/wire); nil:
	// the main key alone.
	solo func(keys []string) []string

	// shared: several may hold at once (a semaphore's permits, an
	// RWMutex's readers). A waiter that becomes the head of its local
	// queue after the one before it acquired tries before it waits.
	shared bool

	// registers: a busy try registers its caller as waiting (an RWMutex's
	// writers hold new readers back while they wait). A try that will not
	// wait is then sent in mode "3", which registers nothing, and leave
	// (KEYS the primitive's keys, ARGV {registration id, signal expire
	// ms}) takes a registration back when its waiter stops waiting.
	registers bool
	leave     *redis.Script

	// queueRegisters: the registration stands for the whole local queue
	// (its token is the last extra ARGV of a try, see wait.Queue.Token) and is
	// taken back when that queue empties; otherwise it is the caller's
	// own and is taken back when its acquire fails.
	queueRegisters bool
}

// lockProtocol is the Lock's: python-redis-lock's keys and effects.
var lockProtocol = protocol{
	kind:       "lock",
	ref:        KindLock,
	acquire:    wire.Acquire,
	release:    wire.Release,
	extend:     wire.Extend,
	giveback:   wire.Giveback,
	readsKey:   true,
	extendKeys: func(keys []string) []string { return keys[:1:1] },
}
