// Command redislock works with go-redis-lock locks from the shell.
//
//	redislock demo [flags]     run N workers that share one lock and check the result
//	redislock version          print the version
//	redislock help             print this help
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/redis/go-redis/v9"
)

const usage = `redislock: distributed locks on Redis, compatible with python-redis-lock.

Usage:
  redislock demo [flags]   run workers that share one lock, on an in-process
                           Redis unless --redis is given, and check that no
                           increment of a shared counter was lost
  redislock version        print the version
  redislock help           print this help

Run "redislock demo --help" for the demo's flags.
`

// exit codes
const (
	exitOK    = 0
	exitFail  = 1 // the job ran and failed (lost updates, Redis errors)
	exitUsage = 2 // bad flags or arguments
)

func main() {
	// go-redis logs connection failures itself; the tool reports each
	// failure once, in its own words.
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "demo":
		return runDemo(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "redislock", version())
		return exitOK
	case "help", "--help", "-help", "-h":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "redislock: unknown command %q (run \"redislock help\")\n", args[0])
		return exitUsage
	}
}

// version returns the module version the binary was built from.
func version() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}

// parseFlags parses args with fs, mapping -h to exit 0 and errors to a
// usage exit; fs prints its own message.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

// quietLogger drops go-redis's internal log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
