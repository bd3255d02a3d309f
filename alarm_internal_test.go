package redislock

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAlarmsRunInOrderAndNotEarly(t *testing.T) {
	start := time.Now()
	type run struct {
		i  int
		at time.Duration
	}
	ch := make(chan run, 3)
	for i, d := range []time.Duration{30 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond} {
		afterFunc(d, func() { ch <- run{i, time.Since(start)} })
	}
	want := []struct {
		i  int
		at time.Duration
	}{{1, 10 * time.Millisecond}, {2, 20 * time.Millisecond}, {0, 30 * time.Millisecond}}
	for _, w := range want {
		select {
		case r := <-ch:
			if r.i != w.i || r.at < w.at {
				t.Fatalf("alarm %d ran at %v; want alarm %d, not before %v", r.i, r.at, w.i, w.at)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("alarm %d did not run", w.i)
		}
	}
}

func TestAlarmStopAndReset(t *testing.T) {
	ran := make(chan string, 3)
	stopped := afterFunc(20*time.Millisecond, func() { ran <- "stopped" })
	if !stopped.Stop() {
		t.Fatal("Stop of a set alarm = false")
	}
	if stopped.Stop() {
		t.Fatal("second Stop = true")
	}
	later := afterFunc(10*time.Millisecond, func() { ran <- "later" })
	if !later.Reset(60 * time.Millisecond) {
		t.Fatal("Reset of a set alarm = false")
	}
	sooner := afterFunc(time.Hour, func() { ran <- "sooner" })
	sooner.Reset(30 * time.Millisecond)
	start := time.Now()
	for _, want := range []string{"sooner", "later"} {
		select {
		case got := <-ran:
			if got != want {
				t.Fatalf("ran %q, want %q", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%q did not run", want)
		}
	}
	if el := time.Since(start); el < 60*time.Millisecond-5*time.Millisecond {
		t.Fatalf("the reset alarm ran after %v, before its 60 ms", el)
	}
	select {
	case got := <-ran:
		t.Fatalf("%q ran too", got)
	case <-time.After(50 * time.Millisecond):
	}
	if stopped.Reset(10*time.Millisecond) || !stopped.Stop() {
		t.Fatal("a stopped alarm could not be set again")
	}
}

// A function that blocks does not hold up the alarms due after it: each
// runs in a goroutine of its own, as time.AfterFunc's do.
func TestAlarmFunctionsRunApart(t *testing.T) {
	release := make(chan struct{})
	second := make(chan struct{})
	afterFunc(5*time.Millisecond, func() { <-release })
	afterFunc(10*time.Millisecond, func() { close(second) })
	select {
	case <-second:
	case <-time.After(5 * time.Second):
		t.Fatal("an alarm waited for a blocked one")
	}
	close(release)
}

// The point of alarms: holds that come and go, each with its deadline
// seconds ahead, do not arm the runtime timer each time (the broken
// variant, mutation alarm-armed-per-set, arms it 1,000 times here).
func TestTightLoopDoesNotArmATimerPerHold(t *testing.T) {
	before := alarmArms.Load()
	for range 1000 {
		a := afterFunc(10*time.Second, func() { t.Error("a stopped alarm ran") })
		a.Stop()
	}
	if n := alarmArms.Load() - before; n > 10 {
		t.Fatalf("1,000 set-and-stopped alarms armed the runtime timer %d times; want a few at most", n)
	}
}

// Alarms set, reset and stopped from many goroutines at once each run
// exactly once when not stopped, and never when stopped in time (with
// -race).
func TestAlarmsConcurrent(t *testing.T) {
	const n = 400
	var (
		runs    [n]atomic.Int32
		stopped [n]bool // Stop returned true: it must never run
		wg      sync.WaitGroup
		kept    sync.WaitGroup
	)
	for i := range n {
		keep := i%3 != 0
		if keep {
			kept.Add(1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := afterFunc(time.Hour, func() { // moved by the Reset below
				if runs[i].Add(1) == 1 && keep {
					kept.Done()
				}
			})
			a.Reset(time.Duration(i%11) * time.Millisecond)
			if !keep {
				stopped[i] = a.Stop()
			}
		}()
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { kept.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("alarms did not all run")
	}
	time.Sleep(30 * time.Millisecond) // room for a run that should not happen
	for i := range n {
		want := int32(1)
		if stopped[i] {
			want = 0
		}
		if got := runs[i].Load(); got != want {
			t.Fatalf("alarm %d (stopped: %v) ran %d times, want %d", i, stopped[i], got, want)
		}
	}
}
