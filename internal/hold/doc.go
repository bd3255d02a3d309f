// Package hold is one acquisition of a lock, from its acquire to its
// release or loss: its local validity deadline (the expire less the safety
// margin, on the local clock, counted from when the acquire or the last
// extend was sent), its renewal goroutine, the one-at-a-time order of its
// extends, its key watch (internal/watch), and how it ended (Done, Err).
//
// A Hold never points back to its primitive, so that a primitive dropped
// without a release can be collected; its cleanup (Abandon) stops the
// renewal. The primitive (the root package's Lock, Semaphore, RWMutex)
// makes a Hold after each acquire with New, extends and releases it, and
// gives it an Events for its observers and logger.
//
// Correctness never depends on the watch: the renewal and the local
// deadline end every hold in time; the watch only makes a loss known
// sooner.
//
// # Lock order
//
// A Hold's mu is never held while calling into internal/watch (its Watch
// is read under mu, then used after unlocking), nor while calling Events;
// evMu is never held with mu.
package hold
