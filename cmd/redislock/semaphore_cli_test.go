package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// mostAtOnce returns the most intervals of a start/end log (see overlaps)
// that were open at once.
func mostAtOnce(t *testing.T, log string) (most, n int) {
	type event struct {
		at    int64
		delta int
	}
	var events []event
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("bad log line %q", line)
		}
		at, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("bad log line %q", line)
		}
		d := 1
		if f[0] == "end" {
			d, n = -1, n+1
		}
		events = append(events, event{at, d})
	}
	slices.SortStableFunc(events, func(a, b event) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.delta - b.delta // an end before a start at the same instant
	})
	open := 0
	for _, e := range events {
		open += e.delta
		most = max(most, open)
	}
	return most, n
}

// run --semaphore 2: six commands started at once, at most two run at a
// time, and two do. In the broken variant each uses a semaphore of its
// own name, and more than two run at once.
func TestRunSemaphore(t *testing.T) {
	quick(t)
	for _, tc := range []struct {
		name   string
		shared bool
	}{{"one semaphore", true}, {"broken/a semaphore each", false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t)
			url := "redis://" + s.Addr + "/0"
			log := filepath.Join(t.TempDir(), "log")
			script := `echo "start $(date +%s%N)" >> "$0"; sleep 0.2; echo "end $(date +%s%N)" >> "$0"`
			const procs = 6
			var wg sync.WaitGroup
			for p := range procs {
				name := "pool"
				if !tc.shared {
					name += strconv.Itoa(p)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					code, errOut := exitOf(t, cliCmd(t, "run", "--semaphore", "2", "--redis", url, name, "--", "sh", "-c", script, log))
					if code != 0 {
						t.Errorf("run exit %d: %s", code, errOut)
					}
				}()
			}
			wg.Wait()
			data, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			most, n := mostAtOnce(t, string(data))
			t.Logf("%d commands, at most %d at once", n, most)
			if n != procs {
				t.Fatalf("%d commands ran, want %d", n, procs)
			}
			if want := most == 2; want != tc.shared {
				t.Fatalf("at most %d ran at once; want exactly 2 = %v", most, tc.shared)
			}
		})
	}
}

// With every permit held: run --semaphore -n is busy (exit 75) and says
// so; another size is an error, not a silent mix; list and status show the
// holders.
func TestRunSemaphoreBusyAndStatus(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	url := "redis://" + s.Addr + "/0"
	var ids []string
	for i := range 2 {
		h, err := redislock.NewSemaphore(s.Client(), "pool", 2, redislock.WithID("holder-"+strconv.Itoa(i)), redislock.WithExpire(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		p, err := h.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID())
	}
	code, errOut := exitOf(t, cliCmd(t, "run", "-n", "--semaphore", "2", "--redis", url, "pool", "--", "true"))
	if code != exitBusy || !strings.Contains(errOut, "all 2 permits held") {
		t.Fatalf("run -n --semaphore 2 with both held: exit %d, %q; want %d", code, errOut, exitBusy)
	}
	code, errOut = exitOf(t, cliCmd(t, "run", "-n", "--semaphore", "3", "--redis", url, "pool", "--", "true"))
	if code != exitFail || !strings.Contains(errOut, "another size") {
		t.Fatalf("run --semaphore 3 while size-2 holders hold: exit %d, %q; want %d and the size error", code, errOut, exitFail)
	}
	if code, errOut := exitOf(t, cliCmd(t, "run", "--semaphore", "-1", "--redis", url, "pool", "--", "true")); code != exitUsage {
		t.Fatalf("run --semaphore -1: exit %d, %q; want %d", code, errOut, exitUsage)
	}
	out, err := cliCmd(t, "list", "--redis", url).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !strings.Contains(string(out), "semaphore/2") || !strings.Contains(string(out), strconv.Quote(id)) {
			t.Fatalf("list does not show holder %s of the semaphore:\n%s", id, out)
		}
	}
	out, err = cliCmd(t, "status", "--json", "--redis", url, "pool").Output()
	if err != nil {
		t.Fatal(err)
	}
	var st lockStatus
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json: %v: %s", err, out)
	}
	if st.Held || len(st.SemaphoreHolders) != 2 || st.SemaphoreHolders[0].Size != 2 {
		t.Fatalf("status --json = %s; want the lock free and two semaphore holders of size 2", out)
	}
	text, _ := cliCmd(t, "status", "--redis", url, "pool").Output()
	if !strings.Contains(string(text), "semaphore of 2, 2 held") {
		t.Fatalf("status = %q", text)
	}
}

// run --shared and --exclusive: four shared commands and two exclusive
// ones started together; the shared ones overlap, an exclusive one never
// overlaps anything. In the broken variant the writers use a plain "run
// NAME" (the Lock, which --shared holders do not see), and overlap them.
func TestRunSharedExclusive(t *testing.T) {
	quick(t)
	for _, tc := range []struct {
		name   string
		writer []string
		broken bool
	}{{"--exclusive", []string{"--exclusive"}, false}, {"broken/plain run as the writer", nil, true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t)
			url := "redis://" + s.Addr + "/0"
			dir := t.TempDir()
			script := `echo "start $(date +%s%N)" >> "$0"; sleep 0.3; echo "end $(date +%s%N)" >> "$0"`
			var wg sync.WaitGroup
			for i := range 6 {
				writer := i%3 == 0
				args := []string{"run", "--shared"}
				log := filepath.Join(dir, "r"+strconv.Itoa(i))
				if writer {
					args = append([]string{"run"}, tc.writer...)
					log = filepath.Join(dir, "w"+strconv.Itoa(i))
				}
				args = append(args, "--redis", url, "config", "--", "sh", "-c", script, log)
				wg.Add(1)
				go func() {
					defer wg.Done()
					if code, errOut := exitOf(t, cliCmd(t, args...)); code != 0 {
						t.Errorf("run exit %d: %s", code, errOut)
					}
				}()
			}
			wg.Wait()
			type interval struct {
				writer     bool
				start, end int64
			}
			var ivs []interval
			var readers string
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				b, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				var iv interval
				if _, err := fmt.Sscanf(string(b), "start %d\nend %d\n", &iv.start, &iv.end); err != nil {
					t.Fatalf("log %s: %q: %v", e.Name(), b, err)
				}
				iv.writer = strings.HasPrefix(e.Name(), "w")
				if !iv.writer {
					readers += string(b)
				}
				ivs = append(ivs, iv)
			}
			n := len(ivs)
			writerOverlaps := false
			for a := range ivs {
				for b := range ivs {
					if a != b && ivs[a].writer && ivs[a].start < ivs[b].end && ivs[b].start < ivs[a].end {
						writerOverlaps = true
					}
				}
			}
			mostReaders, _ := mostAtOnce(t, readers)
			t.Logf("%d commands; at most %d readers together; a writer overlapped another: %v", n, mostReaders, writerOverlaps)
			if n != 6 {
				t.Fatalf("%d commands ran, want 6", n)
			}
			if writerOverlaps != tc.broken {
				t.Fatalf("a writer overlapped another command = %v; want %v", writerOverlaps, tc.broken)
			}
			if !tc.broken && mostReaders < 2 {
				t.Fatalf("at most %d --shared commands ran together; want them to share", mostReaders)
			}
		})
	}
}

// status and list show a reader/writer lock's readers, then its writer.
func TestStatusShowsRWMutex(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	url := "redis://" + s.Addr + "/0"
	r, err := redislock.NewRWMutex(s.Client(), "config", redislock.WithID("reader-1"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cliCmd(t, "status", "--json", "--redis", url, "config").Output()
	if err != nil {
		t.Fatal(err)
	}
	var st lockStatus
	if err := json.Unmarshal(out, &st); err != nil || len(st.RWMutexHolders) != 1 || st.RWMutexHolders[0].Kind != "reader" || st.RWMutexHolders[0].Owner != "reader-1" {
		t.Fatalf("status --json = %s, %v; want the reader", out, err)
	}
	p.Release(ctx)
	w, _ := redislock.NewRWMutex(s.Client(), "config", redislock.WithID("writer-1"))
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	text, _ := cliCmd(t, "list", "--redis", url).Output()
	if !strings.Contains(string(text), "writer") || !strings.Contains(string(text), `"writer-1"`) {
		t.Fatalf("list = %q; want the writer", text)
	}
	// A busy run names the writer that holds it.
	for _, mode := range []string{"--shared", "--exclusive"} {
		code, stderr := exitOf(t, cliCmd(t, "run", mode, "-n", "--redis", url, "config", "--", "true"))
		if code != exitBusy || !strings.Contains(stderr, `a writer holds it: "writer-1"`) {
			t.Fatalf("run %s -n while writer-1 writes: exit %d, %q; want %d and the writer named", mode, code, stderr, exitBusy)
		}
	}
	// One writer waits, no reader: status says which is which.
	w2, _ := redislock.NewRWMutex(s.Client(), "config", redislock.WithID("writer-2"))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- w2.Lock(wctx) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if st, err := w.Status(ctx); err == nil && st.WaitingWriters == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second writer never registered as waiting")
		}
	}
	text, _ = cliCmd(t, "status", "--redis", url, "config").Output()
	if !strings.Contains(string(text), "reader/writer lock, 1 waiting writers, 0 waiting readers") || !strings.Contains(string(text), `writer held by "writer-1"`) {
		t.Fatalf("status = %q; want the writer-1 holding, 1 waiting writer and no waiting reader", text)
	}
	cancel()
	<-waited
}

// --semaphore excludes --shared and --exclusive: a usage error, before
// anything is sent.
func TestRunSemaphoreExcludesTheRWModes(t *testing.T) {
	for _, mode := range []string{"--shared", "--exclusive"} {
		code, _, errOut := runCLI(t, "run", "--semaphore", "2", mode, "--redis", "127.0.0.1:1", "job", "--", "true")
		if code != exitUsage || !strings.Contains(errOut, "--semaphore excludes") {
			t.Errorf("run --semaphore 2 %s: exit %d, %q; want %d and the usage error", mode, code, errOut, exitUsage)
		}
	}
}
