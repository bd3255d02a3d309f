package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"time"

	"github.com/go-redis-lock/redislock"
)

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
	flags := func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
		fs.IntVar(&ackN, "replica-ack", 0, "the replicas your locks wait for (WithReplicaAck); 0: none")
		fs.DurationVar(&ackTimeout, "replica-ack-timeout", time.Second, "their timeout, at least 1ms")
	}
	validate := func() error {
		switch {
		case ackN < 0:
			return errors.New("--replica-ack must not be negative")
		case ackN > 0 && ackTimeout < time.Millisecond:
			return errors.New("--replica-ack-timeout must be at least 1ms")
		}
		return nil
	}
	client, _, _, code, ok := adminSetup(ctx, "check", checkHelp, args, 0, 0, false, stderr, flags, validate)
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
