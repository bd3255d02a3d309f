// Package wire is the library's format in Redis: the keys a lock name
// maps to (Scheme) and the Lua scripts that read and change them (lua/,
// one file per script, each with a header listing its KEYS and ARGV).
//
// The Lock's keys and scripts' effects are python-redis-lock's: the key
// lock:<name> holds the owner id, a release pushes one element onto the
// list lock-signal:<name>, and a waiter pops it with BLPOP, so that Go and
// Python workers lock each other out and wake each other up. The keys of
// fencing, of a Semaphore and of an RWMutex are this library's own, with
// prefixes derived from the lock prefix. What other processes see changes
// only here; the root package's wire tests (mixed_fleet_test.go among
// them) replay python-redis-lock's commands against these scripts.
//
// Every ownership decision is made inside a script, atomically, by
// comparing the stored id; nothing user-supplied is spliced into Lua
// source, names and ids travel only as KEYS and ARGV.
package wire
