// Package wait is how an Acquire waits for a lock to be released: in
// Redis, in BLPOP on the lock's signal list, on connections of the
// library's own; and in the process, in a queue per (client, lock key).
//
// # Queues
//
// Goroutines of one process that wait for one lock through one client
// queue here (Join): the head of the queue waits in Redis, the others on
// a channel (Ticket.Turn), and when the head leaves (it acquired, or its
// context ended) the next one becomes head and learns what the head knew
// of the holder's expiry. Between processes, Redis serves the heads'
// BLPOPs in arrival order. A queue lives only while someone waits in it.
//
// # Runtimes and lanes
//
// A BLPOP holds its connection for a whole slice. Sent through the user's
// client it would hold a connection of the user's pool, and that client's
// other commands (a holder's renewals and releases) would queue behind it.
// So waits (On) run on a wait runtime: per user client and node, a
// go-redis client of the library's own, made from the options of the
// user's client (address, dialer, TLS, credentials, database, protocol,
// OnConnect; not its hooks, which go-redis keeps per client), whose
// connections only ever carry waits and the wake-ups of waits.
//
// A lane is one connection's loop: it sends one BLPOP on the signal lists
// of every waiter assigned to it and on a wake key of its own. A waiter
// alone on its lane has its next try pipelined behind the BLPOP, so a
// hand-off takes one round trip; a waiter that shares a lane tries after
// its BLPOP returns, one round trip more. A new waiter takes an idle lane,
// else a new one up to maxLanes, else shares the lane with the fewest
// waiters; a lane blocked in BLPOP is woken through its wake key to take a
// new waiter in, or to let one that gave up out (Req.Abandon). On a
// cluster, keys of two slots cannot share a BLPOP (CROSSSLOT): there a
// lane only takes waiters of one hash tag, and lanes are not capped (one
// per name with waiters at most, on the node that serves it).
//
// A lane that a waiter starts runs in that waiter's goroutine until its
// round ends (Run, serveFor), and in a goroutine of its own after that if
// others joined it: under contention most rounds are one waiter's, and a
// goroutine between the BLPOP's reply and the waiter cost a fifth of the
// hand-off rate (a wake-up of another thread each way). On a single node
// each lane has a client and a connection of its own, so that a waiter
// whose context ends can stop its round: it wakes the BLPOP through the
// wake key, and if that has not landed within cutAfter (Redis does not
// answer) it cuts the read short with a past deadline, when no other
// waiter shares the BLPOP (beyond maxLanes waiters on one client); go-redis drops the
// connection and the round ends as on a lost one. On a cluster, and on a
// user's client that has no options, a waiter whose context can end has
// its lane run by a goroutine, and leaves at once when its context ends.
//
// A runtime closes its connections runtimeIdle after its last wait ended;
// Close closes them at once.
//
// # Lock order
//
// A Queue's mu, a runtime's mu and a Cleanups' mu are never held together,
// and none of them while sending to Redis. A runtime's mu also guards the
// fields of its lanes and of the Reqs assigned to them that say so.
package wait
