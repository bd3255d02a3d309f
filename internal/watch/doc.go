// Package watch tells a hold at once when its key is lost: the key
// expired, was deleted, or holds another owner's id now.
//
// Renewal finds a lost lock only when it next runs, up to two thirds of
// the expire later. To be told at once, a hold's key is watched with
// Redis's server-assisted client-side caching: a tracker reads the key on
// a connection with CLIENT TRACKING on, and Redis then sends an
// invalidation message the moment anyone changes the key (a Reset, a DEL,
// another owner's SET after it expired, an eviction, an expiry). The
// tracker reads the key again on each one, which also tracks it again: a
// value other than the hold's id ends the hold at once. Our own renewals
// and Extends change the key too; their re-read finds our id and changes
// nothing, so they cost one GET each.
//
// The invalidations travel, RESP2 style, as messages on the channel
// __redis__:invalidate of a second connection (CLIENT TRACKING ... REDIRECT
// <its id>): go-redis v9.0 does not deliver RESP3 pushes. A tracker thus
// has two connections of its own, made from the options of the user's
// client (or, on a cluster, of the master that holds the key), shared by
// all the holds of that client and node in this process. Its two
// goroutines run while it watches at least one hold, and runLinger after;
// its connections are kept trackerIdle longer for the next hold, then
// closed.
//
// Where tracking cannot be set up (an ACL without HELLO, CLIENT ID, CLIENT
// SETNAME, CLIENT LIST, CLIENT TRACKING, SUBSCRIBE or the channel, a proxy
// or server that refuses it, a client type other than *redis.Client and
// *redis.ClusterClient) holds are not watched, and a loss is found by
// renewal as before; Check says so. Redis sends no invalidation for a
// SWAPDB: such a change too is found by renewal.
//
// Correctness never depends on the watch: it only makes a loss known
// sooner. With it off, refused or broken, renewal and the hold's local
// deadline still end every hold in time.
//
// Lock order: a tracker's mu, then a Watch's mu (the tracker clears a
// Watch's tracker under its own lock). Two trackers' mu are never held
// together.
package watch
