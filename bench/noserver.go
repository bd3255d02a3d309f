package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"runtime"
	"strings"
	"time"
	"unsafe"
)

// The no-server table: each library's uncontended cycle against an
// in-process replier that answers every command at once from memory (see
// fakeReply), over net.Pipe. No kernel socket, no server, no waiting for
// a reply: the process's CPU per cycle is go-redis's work, the library's
// own work around it, and the replier's (which grows with each
// command's length). Against a real server the cycle is several times
// longer, and mostly the kernel's and the scheduler's; this table shows
// what a library itself costs on top of the client it runs on, without
// that noise.

// fakeReply is the reply to one command, as the contenders' commands need
// them for an uncontended cycle: go-redis-lock's acquire and release
// scripts (three keys), bsm/redislock's and redsync's scripts (one key),
// SET, DEL and SCRIPT LOAD. args holds the command's first three
// arguments, n is how many it has. Anything else, HELLO among them, gets
// an error reply: go-redis then speaks RESP2.
func fakeReply(args []string, n int) string {
	if len(args) == 0 {
		return "-ERR empty command\r\n"
	}
	switch strings.ToLower(args[0]) {
	case "evalsha", "eval":
		switch {
		case len(args) >= 3 && args[2] == "3" && n >= 10: // our acquire: acquired, token 0
			return "*2\r\n:0\r\n:0\r\n"
		case len(args) >= 3 && args[2] == "3": // our release: released
			return ":0\r\n"
		case n == 7: // bsm/redislock's obtain: EVALSHA sha 1 key value token-length ttl
			return "+OK\r\n"
		default: // a one-key release (bsm/redislock, redsync): deleted
			return ":1\r\n"
		}
	case "script": // SCRIPT LOAD (the bare scripts'): a made-up SHA1
		return "$40\r\n" + strings.Repeat("f", 40) + "\r\n"
	case "set":
		return "+OK\r\n"
	case "del":
		return ":1\r\n"
	}
	return "-ERR unknown command '" + args[0] + "'\r\n"
}

// serveFake answers the commands read from c until it is closed. It keeps
// only what fakeReply reads (the first three arguments, in buffers used
// again) and skips the rest, so that its work per command is reading the
// command's bytes, with no allocation per argument.
func serveFake(c net.Conn) {
	defer c.Close()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	var (
		bufs [3][]byte
		args = make([]string, 0, 3)
	)
	for {
		n, err := readLen(r, '*')
		if err != nil {
			return
		}
		args = args[:0]
		for i := range n {
			size, err := readLen(r, '$')
			if err != nil {
				return
			}
			if i >= len(bufs) {
				if _, err := r.Discard(size + 2); err != nil {
					return
				}
				continue
			}
			if cap(bufs[i]) < size+2 {
				bufs[i] = make([]byte, size+2)
			}
			b := bufs[i][:size+2]
			if _, err := io.ReadFull(r, b); err != nil {
				return
			}
			args = append(args, unsafeString(b[:size]))
		}
		w.WriteString(fakeReply(args, n))
		if err := w.Flush(); err != nil {
			return
		}
	}
}

// unsafeString is b as a string without a copy; fakeReply keeps none of
// its arguments.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// readLen reads a RESP length line: the prefix, then the number.
func readLen(r *bufio.Reader, prefix byte) (int, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 4 || line[0] != prefix || line[len(line)-2] != '\r' {
		return 0, fmt.Errorf("bad RESP line %q", line)
	}
	n := 0
	for _, c := range line[1 : len(line)-2] {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("bad RESP line %q", line)
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

// fakeDial connects to a new replier.
func fakeDial(context.Context, string, string) (net.Conn, error) {
	a, b := net.Pipe()
	go serveFake(b)
	return a, nil
}

// noServerContenders are those that run on go-redis (rueidis has its own
// client and needs RESP3): the raw loop, the bare scripts, and the peers.
func noServerContenders() []contender {
	var out []contender
	for _, c := range append([]contender{rawContender, bareContender}, contenders...) {
		if !strings.HasPrefix(c.name, "rueidis") {
			out = append(out, c)
		}
	}
	return out
}

// noServerRow is one library in one configuration: per round, its CPU
// and wall time per cycle.
type noServerRow struct {
	name, config string
	cpu, wall    []time.Duration
}

// noServerMatrix runs every go-redis contender against the replier, with
// the machine's cores and on one core, in rounds of windows of d, in an
// order rotated each round.
func noServerMatrix(ctx context.Context, rounds int, d time.Duration) ([]*noServerRow, error) {
	all := noServerContenders()
	var rows []*noServerRow
	index := map[string]*noServerRow{}
	for _, oneCore := range []bool{false, true} {
		for _, c := range all {
			r := &noServerRow{name: c.name, config: clientCfg{defaults: true, oneCore: oneCore}.configName()}
			rows = append(rows, r)
			index[r.name+"/"+r.config] = r
		}
	}
	for round := range rounds {
		for _, oneCore := range []bool{false, true} {
			for i := range all {
				c := all[(i+round)%len(all)]
				cc := clientCfg{addr: "in-process:0", defaults: true, oneCore: oneCore, dial: fakeDial}
				procs := runtime.GOMAXPROCS(0)
				if oneCore {
					runtime.GOMAXPROCS(1)
				}
				cpu, wall, err := noServerWindow(ctx, c, cc, d)
				runtime.GOMAXPROCS(procs)
				if err != nil {
					return nil, fmt.Errorf("%s, no server: %w", c.name, err)
				}
				r := index[c.name+"/"+cc.configName()]
				r.cpu, r.wall = append(r.cpu, cpu), append(r.wall, wall)
			}
		}
	}
	log.Printf("no-server table: %d rounds done", rounds)
	return rows, nil
}

// noServerWindow runs c's cycle against the replier for d and returns the
// process CPU and the wall time per cycle.
func noServerWindow(ctx context.Context, c contender, cc clientCfg, d time.Duration) (cpu, wall time.Duration, err error) {
	w, err := c.worker(cc, uniqueName("noserver"))
	if err != nil {
		return 0, 0, err
	}
	defer w.close()
	for range 100 { // connections dialled, the key watch refused, outside the measure
		if err := w.lock(ctx); err != nil {
			return 0, 0, err
		}
		if err := w.unlock(ctx); err != nil {
			return 0, 0, err
		}
	}
	cpu0, start, n := processCPU(), time.Now(), 0
	for time.Since(start) < d {
		if err := w.lock(ctx); err != nil {
			return 0, 0, err
		}
		if err := w.unlock(ctx); err != nil {
			return 0, 0, err
		}
		n++
	}
	elapsed, cpu1 := time.Since(start), processCPU()
	return (cpu1 - cpu0) / time.Duration(n), elapsed / time.Duration(n), nil
}

// noServerTable is the table: medians over the rounds, and go-redis-lock
// against each row, as the median of the per-round ratios.
func noServerTable(rows []*noServerRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| library | cores | process CPU / cycle | wall time / cycle | go-redis-lock's CPU ÷ this one's (median of rounds) |\n")
	fmt.Fprintf(&b, "|---|---|---:|---:|---:|\n")
	ours := map[string]*noServerRow{}
	for _, r := range rows {
		if r.name == contenders[0].name {
			ours[r.config] = r
		}
	}
	for _, r := range rows {
		o := ours[r.config]
		var ratios []float64
		for i := range min(len(o.cpu), len(r.cpu)) {
			if r.cpu[i] > 0 {
				ratios = append(ratios, float64(o.cpu[i])/float64(r.cpu[i]))
			}
		}
		cores := fmt.Sprintf("all (%d)", runtime.NumCPU())
		if strings.HasSuffix(r.config, "one core") {
			cores = "one"
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f µs | %.2f µs | %.2f |\n", r.name, cores,
			float64(medianD(r.cpu, func(x time.Duration) time.Duration { return x }))/1e3,
			float64(medianD(r.wall, func(x time.Duration) time.Duration { return x }))/1e3,
			medianF(ratios, func(x float64) float64 { return x }))
	}
	return b.String()
}
