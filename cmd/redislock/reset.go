package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-redis-lock/redislock"
)

const resetHelp = `Usage: redislock reset [flags] NAME

Deletes the lock NAME whoever holds it and wakes one of its waiters, like
python-redis-lock's reset(). Its holder is not told: use it to clear a lock
left by a crashed process that had no expire.
`

const resetAllHelp = `Usage: redislock reset-all [flags]

Deletes every lock under the prefix (SCAN, every master of a cluster) and
wakes one waiter of each, like python-redis-lock's reset_all().

Without --yes it asks for confirmation when standard input is a terminal,
and resets nothing unless the answer is y (exit 1 otherwise). When standard
input is not a terminal (cron, systemd, a pipe, /dev/null), there is no one
to ask: without --yes it resets nothing and exits 2. Pass --yes to reset
without asking.
`

func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	client, conn, pos, code, ok := adminSetup(ctx, "reset", resetHelp, args, 1, 1, true, stderr, nil, nil)
	if !ok {
		return code
	}
	defer client.Close()
	lock, err := redislock.New(client, pos[0], conn.lockOptions(stderr)...)
	if err != nil {
		return fail(stderr, "reset", exitUsage, err)
	}
	owner, err := lock.OwnerID(ctx)
	if err == nil {
		_, err = lock.Reset(ctx)
	}
	if err != nil {
		return fail(stderr, "reset", exitFail, err)
	}
	if owner == "" {
		fmt.Fprintf(stdout, "%s was not held; a wake-up signal was sent anyway\n", shown(lock.Name()))
	} else {
		fmt.Fprintf(stdout, "%s reset (was held by %q)\n", shown(lock.Name()), owner)
	}
	return exitOK
}

func runResetAll(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var yes bool
	client, conn, _, code, ok := adminSetup(ctx, "reset-all", resetAllHelp, args, 0, 0, false, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&yes, "yes", false, "do not ask for confirmation (needed when standard input is not a terminal)")
	}, nil)
	if !ok {
		return code
	}
	defer client.Close()
	if !yes {
		if f, ok := stdin.(*os.File); !ok || !isTerminal(f) {
			return fail(stderr, "reset-all", exitUsage, errors.New("refusing to reset every lock without --yes (standard input is not a terminal, so there is no one to ask)"))
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
	n, err := redislock.ResetAll(ctx, client, conn.lockOptions(stderr)...)
	if err != nil {
		return fail(stderr, "reset-all", exitFail, err)
	}
	fmt.Fprintf(stdout, "reset %d locks under prefix %q\n", n, conn.prefix)
	return exitOK
}
