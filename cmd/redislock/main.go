// Command redislock takes, inspects and clears go-redis-lock locks from the
// shell: a distributed flock for cron jobs and scripts, compatible with
// python-redis-lock. Run "redislock help" for the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

const usage = `redislock: distributed locks on Redis, compatible with python-redis-lock.

Usage:
  redislock run [flags] NAME -- COMMAND [ARGS...]
                             run COMMAND while holding the lock NAME
  redislock status [flags] NAME
                             is NAME held, by whom, for how long
  redislock list [flags] [PATTERN]
                             every held lock (whose name matches PATTERN)
  redislock reset [flags] NAME
                             force-release NAME and wake one waiter
  redislock reset-all [flags]
                             force-release every lock under the prefix
  redislock check [flags]    report what makes locks unsafe on this Redis
  redislock demo [flags]     workers sharing one lock, on an in-process Redis
  redislock version          print the version
  redislock help             print this help

Connection flags (every command but demo and version):
  --redis URL      redis://[user:pass@]host:port/db, rediss:// (TLS),
                   unix:///path, or host[:port[/db]]
                   (default: $REDIS_URL, else redis://127.0.0.1:6379/0); the
                   password is never printed, in help or in errors
  --cluster ADDRS  comma-separated seed addresses of a Redis Cluster
  --prefix P       lock key prefix (default "lock:", python-redis-lock's)

Examples:
  # run the nightly job on one host only; the others skip it (exit 75)
  17 3 * * *  redislock run --no-wait nightly -- /usr/local/bin/nightly-job
  redislock run --wait 10m --expire 1m reindex -- ./reindex.sh --full
  redislock status nightly --json
  redislock list 'report:*'
  redislock reset nightly

Run "redislock COMMAND --help" for a command's flags and exit codes.
`

// Exit codes, documented in the help of each command.
const (
	exitOK        = 0
	exitFail      = 1  // Redis unreachable, a Redis error, lost updates in the demo
	exitUsage     = 2  // bad flags or arguments
	exitLost      = 69 // run: the lock was lost while COMMAND ran (EX_UNAVAILABLE)
	exitBusy      = 75 // run: the lock is busy, with --no-wait or after --wait (EX_TEMPFAIL)
	exitCannotRun = 126
	exitNotFound  = 127
)

func main() {
	// go-redis logs connection failures itself; the tool reports each
	// failure once, in its own words.
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	if cmd == "help" && len(rest) > 0 { // help COMMAND: that command's --help
		cmd, rest = rest[0], []string{"--help"}
	}
	if asksHelp(rest) {
		stderr = stdout // asked for, help is the output: redislock run --help | less
	}
	switch cmd {
	case "run":
		return runCommand(ctx, rest, stdout, stderr)
	case "status":
		return runStatus(ctx, rest, stdout, stderr)
	case "list":
		return runList(ctx, rest, stdout, stderr)
	case "reset":
		return runReset(ctx, rest, stdout, stderr)
	case "reset-all":
		return runResetAll(ctx, rest, stdin, stdout, stderr)
	case "check":
		return runCheck(ctx, rest, stdout, stderr)
	case "demo":
		return runDemo(ctx, rest, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "redislock", version())
		return exitOK
	case "help", "--help", "-help", "-h":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "redislock: unknown command %q (run \"redislock help\")\n", cmd)
		return exitUsage
	}
}

// asksHelp reports whether args, before any "--", ask for help.
func asksHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// version returns the module version the binary was built from: the tag
// when it was installed with go install ...@vX or built at a tag; the
// pseudo-version (v0.0.0-time-revision, "+dirty" with uncommitted changes)
// that go build stamps in a clone since Go 1.24; "(devel)" with the VCS
// revision for a build that carries a revision but no version; and a plain
// "(devel)" from go run or -buildvcs=false, which record neither.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	return versionOf(info)
}

// versionOf is version for the given build info.
func versionOf(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	v := "(devel)"
	if rev := settings["vcs.revision"]; rev != "" {
		v += " " + rev[:min(len(rev), 12)]
		if t := settings["vcs.time"]; t != "" {
			v += " " + t
		}
		if settings["vcs.modified"] == "true" {
			v += " (modified)"
		}
	}
	return v
}

// quietLogger drops go-redis's internal log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// newFlagSet returns a flag set for command that prints help to stderr:
// the usage text with the flags where it says {{flags}} (after it, when it
// does not).
func newFlagSet(command, help string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		head, tail, found := strings.Cut(help, "{{flags}}\n")
		if !found {
			head += "\n"
		}
		fmt.Fprint(stderr, head)
		fmt.Fprintln(stderr, "Flags:")
		printFlags(stderr, fs)
		fmt.Fprint(stderr, tail)
	}
	return fs
}

// printFlags lists fs's flags, one line each (wrapped at 80 columns), a
// short form ("short for --X") beside its long one.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	short := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if long, ok := strings.CutPrefix(f.Usage, "short for --"); ok {
			short[long] = f.Name
		}
	})
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, "short for --") {
			return
		}
		names := "    --" + f.Name
		if s, ok := short[f.Name]; ok {
			names = "-" + s + ", --" + f.Name
		}
		kind, usage := flag.UnquoteUsage(f)
		if kind != "" {
			names += " " + kind
		}
		switch f.DefValue {
		case "", "0", "false", "0s":
		default:
			usage += " (default " + f.DefValue + ")"
		}
		line := fmt.Sprintf("  %-24s ", names)
		for _, word := range strings.Fields(usage) {
			if len(line)+len(word) > 80 && strings.TrimSpace(line) != "" && len(line) > 27 {
				fmt.Fprintln(w, strings.TrimRight(line, " "))
				line = strings.Repeat(" ", 27)
			}
			line += word + " "
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	})
}

// parseArgs parses flags that may appear before, between and after the
// positional arguments; everything after a "--" is returned apart, with
// dashdash telling whether there was one. ok is false when the caller must
// return code (after -h: 0; after a bad flag: the usage code; fs has
// printed why).
func parseArgs(fs *flag.FlagSet, args []string) (positional, afterDashDash []string, dashdash bool, code int, ok bool) {
	for i, a := range args {
		if a == "--" {
			args, afterDashDash, dashdash = args[:i], args[i+1:], true
			break
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, nil, false, exitOK, false
			}
			return nil, nil, false, exitUsage, false
		}
		if fs.NArg() == 0 {
			return positional, afterDashDash, dashdash, 0, true
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// connFlags are the connection and lock flags the commands share.
type connFlags struct {
	redisURL  string
	cluster   string
	prefix    string
	verbose   bool
	logFormat string
}

// defaultRedisURL is --redis's default when $REDIS_URL is unset or empty.
const defaultRedisURL = "redis://127.0.0.1:6379/0"

func (c *connFlags) register(fs *flag.FlagSet) {
	def := os.Getenv("REDIS_URL")
	if def == "" {
		def = defaultRedisURL
	}
	fs.StringVar(&c.redisURL, "redis", def, "redis://, rediss://, unix:// `URL` or host[:port[/db]]; $REDIS_URL")
	// The help shows the default, which may come from $REDIS_URL, without
	// its password.
	fs.Lookup("redis").DefValue = redactURL(def)
	fs.StringVar(&c.cluster, "cluster", "", "a Redis Cluster's seed `ADDRS`, comma-separated")
	fs.StringVar(&c.prefix, "prefix", redislock.DefaultKeyPrefix, "lock key `PREFIX`")
	fs.BoolVar(&c.verbose, "verbose", false, "log the lock's events to stderr")
	fs.BoolVar(&c.verbose, "v", false, "short for --verbose")
	fs.StringVar(&c.logFormat, "log-format", "text", "--verbose lines: text or json")
}

// syncWriter returns w, made safe for writes from several goroutines
// unless it is a file (whose writes the OS orders).
func syncWriter(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok {
		return w
	}
	return &lockedWriter{w: w}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// logger returns the logger of --verbose, writing to w; nil without it.
func (c *connFlags) logger(w io.Writer) *slog.Logger {
	if !c.verbose {
		return nil
	}
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// lockOptions are the library options the flags give, logging to w.
func (c *connFlags) lockOptions(w io.Writer) []redislock.Option {
	return []redislock.Option{redislock.WithKeyPrefix(c.prefix), redislock.WithLogger(c.logger(w))}
}

// validate checks the flags, and the lock names the command will use,
// before anything is sent: the error is one line in the command line's
// terms.
func (c *connFlags) validate(names ...string) error {
	if c.prefix == "" {
		return errors.New("--prefix must not be empty")
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return fmt.Errorf("--log-format must be text or json, not %q", c.logFormat)
	}
	if c.cluster != "" && strings.ContainsAny(c.prefix, "{}") {
		return errors.New("with --cluster, --prefix must not contain '{' or '}' (the keys carry the lock name as a hash tag)")
	}
	for _, name := range names {
		switch {
		case name == "":
			return errors.New("lock NAME must not be empty")
		case c.cluster != "" && strings.Contains(name, "}"):
			return fmt.Errorf("with --cluster, lock NAME must not contain '}' (the keys carry it as a hash tag): %q", name)
		}
	}
	return nil
}

// client returns a client for the flags, without any I/O. The error is one
// line fit for the user.
func (c *connFlags) client() (redis.UniversalClient, string, error) {
	if c.cluster != "" {
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 strings.Split(c.cluster, ","),
			ContextTimeoutEnabled: true,
			MaxRetries:            1,
		}), c.cluster, nil
	}
	opts, err := parseRedisURL(c.redisURL)
	if err != nil {
		return nil, "", badURL(c.redisURL)
	}
	opts.ContextTimeoutEnabled = true
	opts.MaxRetries = 1
	return redis.NewClient(opts), opts.Addr, nil
}

// check makes sure the server at where answers PING; the error is one line
// fit for the user.
func check(ctx context.Context, client redis.UniversalClient, where string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot reach Redis at %s: %v", where, err)
	}
	return nil
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// fail prints a one-line error for command and returns code.
func fail(stderr io.Writer, command string, code int, err error) int {
	fmt.Fprintf(stderr, "redislock %s: %v\n", command, err)
	return code
}
