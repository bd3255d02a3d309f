package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

const statusHelp = `Usage: redislock status [flags] NAME

Prints whether the lock NAME is held, by which owner id, and how long its
key has left to live. Exit code 0 whether it is held or free; 1 when Redis
cannot be reached; 2 for bad arguments.

With --json it prints one object:
  {"name":"nightly","key":"lock:nightly","held":true,"owner":"...","ttl_ms":12345}
where ttl_ms is -1 for a lock without expire, and owner and ttl_ms are left
out when the lock is free.
`

const listHelp = `Usage: redislock list [flags] [PATTERN]

Prints every held lock under the prefix whose name matches the glob PATTERN
(default: all), with its owner id and remaining time to live. It walks the
keys with SCAN (never KEYS), on every master of a cluster, and changes
nothing. With --json it prints an array of status objects.
`

const resetHelp = `Usage: redislock reset [flags] NAME

Deletes the lock NAME whoever holds it and wakes one of its waiters, like
python-redis-lock's reset(). Its holder is not told: use it to clear a lock
left by a crashed process that had no expire.
`

const resetAllHelp = `Usage: redislock reset-all [flags]

Deletes every lock under the prefix (SCAN, every master of a cluster) and
wakes one waiter of each, like python-redis-lock's reset_all(). It asks for
confirmation when standard input is a terminal; otherwise, and to skip the
question, pass --yes.
`

// lockStatus is the JSON form of status and list.
type lockStatus struct {
	Name  string `json:"name"`
	Key   string `json:"key"`
	Held  bool   `json:"held"`
	Owner string `json:"owner,omitempty"`
	TTLms *int64 `json:"ttl_ms,omitempty"`
}

func newStatus(name, key, owner string, ttl time.Duration) lockStatus {
	ms := int64(-1)
	if ttl >= 0 {
		ms = ttl.Milliseconds()
	}
	return lockStatus{Name: name, Key: key, Held: true, Owner: owner, TTLms: &ms}
}

func (s lockStatus) String() string {
	switch {
	case !s.Held:
		return fmt.Sprintf("%s: free", s.Name)
	case *s.TTLms < 0:
		return fmt.Sprintf("%s: held by %q, no expire", s.Name, s.Owner)
	default:
		return fmt.Sprintf("%s: held by %q, expires in %v", s.Name, s.Owner, time.Duration(*s.TTLms)*time.Millisecond)
	}
}

// adminSetup parses an admin command's flags and connects. It returns the
// positional arguments; ok false means return code.
func adminSetup(ctx context.Context, command, help string, args []string, minPos, maxPos int, stderr io.Writer,
	extra func(*flag.FlagSet)) (client redis.UniversalClient, conn connFlags, pos []string, code int, ok bool) {
	fs := newFlagSet(command, help, stderr)
	conn.register(fs)
	if extra != nil {
		extra(fs)
	}
	pos, after, dashdash, code, ok := parseArgs(fs, args)
	if !ok {
		return nil, conn, nil, code, false
	}
	if dashdash {
		pos = append(pos, after...)
	}
	if len(pos) < minPos || len(pos) > maxPos {
		want := fmt.Sprintf("%d", minPos)
		if maxPos != minPos {
			want = fmt.Sprintf("%d to %d", minPos, maxPos)
		}
		return nil, conn, nil, fail(stderr, command, exitUsage, fmt.Errorf("want %s arguments, got %d (see --help)", want, len(pos))), false
	}
	for _, name := range pos {
		if minPos == 1 && name == "" {
			return nil, conn, nil, fail(stderr, command, exitUsage, redislock.ErrInvalidName), false
		}
	}
	if conn.prefix == "" {
		return nil, conn, nil, fail(stderr, command, exitUsage, redislock.ErrInvalidPrefix), false
	}
	client, where, err := conn.client()
	if err != nil {
		return nil, conn, nil, fail(stderr, command, exitUsage, err), false
	}
	if err := check(ctx, client, where); err != nil {
		client.Close()
		return nil, conn, nil, fail(stderr, command, exitFail, err), false
	}
	return client, conn, pos, 0, true
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var asJSON bool
	client, conn, pos, code, ok := adminSetup(ctx, "status", statusHelp, args, 1, 1, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	})
	if !ok {
		return code
	}
	defer client.Close()
	lock, err := redislock.New(client, pos[0], redislock.WithKeyPrefix(conn.prefix))
	if err != nil {
		return fail(stderr, "status", exitUsage, err)
	}
	info, held, err := lock.Info(ctx)
	if err != nil {
		return fail(stderr, "status", exitFail, err)
	}
	st := lockStatus{Name: info.Name, Key: info.Key}
	if held {
		st = newStatus(info.Name, info.Key, info.Owner, info.TTL)
	}
	return output(stdout, stderr, "status", asJSON, st, st.String())
}

func runList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var asJSON bool
	client, conn, pos, code, ok := adminSetup(ctx, "list", listHelp, args, 0, 1, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	})
	if !ok {
		return code
	}
	defer client.Close()
	pattern := "*"
	if len(pos) == 1 {
		pattern = pos[0]
	}
	infos, err := redislock.List(ctx, client, pattern, redislock.WithKeyPrefix(conn.prefix))
	if err != nil {
		return fail(stderr, "list", exitFail, err)
	}
	all := make([]lockStatus, len(infos))
	var text strings.Builder
	tw := tabwriter.NewWriter(&text, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tOWNER\tTTL")
	for i, li := range infos {
		all[i] = newStatus(li.Name, li.Key, li.Owner, li.TTL)
		ttl := "none"
		if li.TTL >= 0 {
			ttl = li.TTL.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", li.Name, li.Owner, ttl)
	}
	tw.Flush()
	if len(infos) == 0 {
		text.Reset()
		fmt.Fprintf(&text, "no lock held under prefix %q matches %q", conn.prefix, pattern)
	}
	return output(stdout, stderr, "list", asJSON, all, strings.TrimSuffix(text.String(), "\n"))
}

func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	client, conn, pos, code, ok := adminSetup(ctx, "reset", resetHelp, args, 1, 1, stderr, nil)
	if !ok {
		return code
	}
	defer client.Close()
	lock, err := redislock.New(client, pos[0], redislock.WithKeyPrefix(conn.prefix))
	if err != nil {
		return fail(stderr, "reset", exitUsage, err)
	}
	owner, err := lock.OwnerID(ctx)
	if err == nil {
		err = lock.Reset(ctx)
	}
	if err != nil {
		return fail(stderr, "reset", exitFail, err)
	}
	if owner == "" {
		fmt.Fprintf(stdout, "%s was not held; a wake-up signal was sent anyway\n", lock.Name())
	} else {
		fmt.Fprintf(stdout, "%s reset (was held by %q)\n", lock.Name(), owner)
	}
	return exitOK
}

func runResetAll(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var yes bool
	client, conn, _, code, ok := adminSetup(ctx, "reset-all", resetAllHelp, args, 0, 0, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&yes, "yes", false, "do not ask for confirmation")
	})
	if !ok {
		return code
	}
	defer client.Close()
	if !yes {
		if !isTerminal(stdin) {
			return fail(stderr, "reset-all", exitUsage, errors.New("refusing to reset every lock without --yes (standard input is not a terminal)"))
		}
		held, err := redislock.List(ctx, client, "*", redislock.WithKeyPrefix(conn.prefix))
		if err != nil {
			return fail(stderr, "reset-all", exitFail, err)
		}
		fmt.Fprintf(stdout, "Reset all %d locks under prefix %q? [y/N] ", len(held), conn.prefix)
		answer, _ := bufio.NewReader(stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			fmt.Fprintln(stdout, "nothing reset")
			return exitFail
		}
	}
	n, err := redislock.ResetAll(ctx, client, redislock.WithKeyPrefix(conn.prefix))
	if err != nil {
		return fail(stderr, "reset-all", exitFail, err)
	}
	fmt.Fprintf(stdout, "reset %d locks under prefix %q\n", n, conn.prefix)
	return exitOK
}

// output prints v as JSON, or text.
func output(stdout, stderr io.Writer, command string, asJSON bool, v any, text string) int {
	if !asJSON {
		fmt.Fprintln(stdout, text)
		return exitOK
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(v); err != nil {
		return fail(stderr, command, exitFail, err)
	}
	return exitOK
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

const checkHelp = `Usage: redislock check [flags]

Inspects the Redis deployment (every master of a cluster) for what makes
locks unsafe: a maxmemory-policy other than noeviction, a replica where a
primary should be, replicas without acknowledgement (--replica-ack), no
persistence, and what it could not read (an ACL without CONFIG is a
warning). It only reads.

Exit codes: 0 no problem (warnings may be printed), 3 problems found,
1 Redis unreachable, 2 bad arguments.
`

// exitProblems is check's exit code when it found problems.
const exitProblems = 3

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var (
		asJSON     bool
		ackN       int
		ackTimeout time.Duration
	)
	client, _, _, code, ok := adminSetup(ctx, "check", checkHelp, args, 0, 0, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
		fs.IntVar(&ackN, "replica-ack", 0, "the replicas your locks wait for (WithReplicaAck); 0: none")
		fs.DurationVar(&ackTimeout, "replica-ack-timeout", time.Second, "their timeout")
	})
	if !ok {
		return code
	}
	defer client.Close()
	var opts []redislock.Option
	if ackN != 0 {
		opts = append(opts, redislock.WithReplicaAck(ackN, ackTimeout))
	}
	report, err := redislock.Check(ctx, client, opts...)
	switch {
	case errors.Is(err, redislock.ErrInvalidArgument):
		return fail(stderr, "check", exitUsage, err)
	case err != nil:
		return fail(stderr, "check", exitFail, err)
	}
	type finding struct {
		Severity string `json:"severity"`
		Node     string `json:"node"`
		Message  string `json:"message"`
	}
	out := make([]finding, len(report))
	lines := make([]string, len(report))
	for i, f := range report {
		out[i] = finding{f.Severity.String(), f.Node, f.Message}
		lines[i] = f.String()
	}
	text := "no findings: locks are safe to use here"
	if len(lines) > 0 {
		text = strings.Join(lines, "\n")
	}
	if code := output(stdout, stderr, "check", asJSON, out, text); code != exitOK {
		return code
	}
	if !report.OK() {
		return exitProblems
	}
	return exitOK
}
