package redislock

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"
)

// An alarm runs its function in a goroutine of its own at a moment, as a
// timer from time.AfterFunc does, with Reset and Stop to match; every hold
// has one for its local deadline. Alarms share one runtime timer, armed for
// the earliest of them: setting an alarm later than that, or stopping one,
// touches no runtime timer, and a tight acquire/release loop, whose every
// hold sets an alarm seconds ahead and stops it a moment later, arms the
// runtime timer about once per expire. A timer per hold was armed and
// stopped every cycle, and arming one earlier than those the runtime sleeps
// for wakes its network poller (in a CPU profile of that loop,
// time.AfterFunc under newHold led to runtime.wakeNetPoller). The saving is
// small: about 2 % of the process's CPU per cycle, the median of 8
// alternating runs of BenchmarkAcquireRelease before and after, inside
// this machine's noise.
type alarm struct {
	f     func()
	at    time.Time // when f is due
	index int       // in alarms.queue; -1 when not set
}

// afterFunc returns an alarm that runs f in its own goroutine once d has
// passed.
func afterFunc(d time.Duration, f func()) *alarm {
	a := &alarm{f: f, index: -1}
	a.Reset(d)
	return a
}

// Reset sets a to run f once d has passed from now, in place of when it
// was due, and reports whether it was set. Like time.Timer's, it does not
// stop a run of f that has started: f must cope with running early.
func (a *alarm) Reset(d time.Duration) bool {
	return alarms.set(a, time.Now().Add(d))
}

// Stop keeps f from running if it has not started, and reports whether it
// did so.
func (a *alarm) Stop() bool {
	return alarms.stop(a)
}

// alarmClock keeps the set alarms in a heap by due time and one runtime
// timer for them.
type alarmClock struct {
	mu      sync.Mutex
	queue   alarmQueue
	timer   *time.Timer // runs fire; nil until the first alarm
	armedAt time.Time   // when timer fires; zero when it is not armed
}

var alarms alarmClock

// alarmArms counts the times the runtime timer was armed, for the tests.
var alarmArms atomic.Int64

func (c *alarmClock) set(a *alarm, at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := a.index >= 0
	a.at = at
	if was {
		heap.Fix(&c.queue, a.index)
	} else {
		heap.Push(&c.queue, a)
	}
	c.armLocked(at)
	return was
}

func (c *alarmClock) stop(a *alarm) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a.index < 0 {
		return false
	}
	heap.Remove(&c.queue, a.index)
	// The runtime timer stays armed: when it fires for nothing, fire arms
	// it for the earliest alarm left, if any.
	return true
}

// armLocked has the runtime timer fire no later than at.
func (c *alarmClock) armLocked(at time.Time) {
	if !c.armedAt.IsZero() && !at.Before(c.armedAt) {
		return
	}
	alarmArms.Add(1)
	c.armedAt = at
	if c.timer == nil {
		c.timer = time.AfterFunc(time.Until(at), c.fire)
		return
	}
	c.timer.Reset(time.Until(at))
}

// fire runs, each in a goroutine of its own, the alarms that are due, and
// arms the runtime timer for the earliest left.
func (c *alarmClock) fire() {
	c.mu.Lock()
	c.armedAt = time.Time{}
	now := time.Now()
	var due []*alarm
	for len(c.queue) > 0 && !c.queue[0].at.After(now) {
		due = append(due, heap.Pop(&c.queue).(*alarm))
	}
	if len(c.queue) > 0 {
		c.armLocked(c.queue[0].at)
	}
	c.mu.Unlock()
	for _, a := range due {
		go a.f()
	}
}

// alarmQueue is a min-heap of alarms by due time (container/heap).
type alarmQueue []*alarm

func (q alarmQueue) Len() int           { return len(q) }
func (q alarmQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q alarmQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *alarmQueue) Push(x any) {
	a := x.(*alarm)
	a.index = len(*q)
	*q = append(*q, a)
}
func (q *alarmQueue) Pop() any {
	old := *q
	a := old[len(old)-1]
	old[len(old)-1] = nil
	a.index = -1
	*q = old[:len(old)-1]
	return a
}
