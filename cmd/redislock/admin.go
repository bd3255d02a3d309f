package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// adminSetup parses an admin command's flags (its own registered by flags,
// checked by validate after parsing; either may be nil), checks the lock
// names among the positional arguments when names is set, and connects. It
// returns the positional arguments; ok false means return code.
func adminSetup(ctx context.Context, command, help string, args []string, minPos, maxPos int, names bool, stderr io.Writer,
	flags func(*flag.FlagSet), validate func() error) (client redis.UniversalClient, conn connFlags, pos []string, code int, ok bool) {
	fs := newFlagSet(command, help, stderr)
	conn.register(fs)
	if flags != nil {
		flags(fs)
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
	var lockNames []string
	if names {
		lockNames = pos
	}
	if err := conn.validate(lockNames...); err != nil {
		return nil, conn, nil, fail(stderr, command, exitUsage, err), false
	}
	if validate != nil {
		if err := validate(); err != nil {
			return nil, conn, nil, fail(stderr, command, exitUsage, err), false
		}
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

// shown returns s for a line of text: as it is when it is printable UTF-8,
// Go-quoted otherwise, so that a control byte in a name never reaches the
// terminal.
func shown(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// exactBytes returns the bytes of s in standard base64 when s is not valid
// UTF-8, which JSON cannot carry (encoding/json writes U+FFFD for each bad
// byte), and "" otherwise.
func exactBytes(s string) string {
	if utf8.ValidString(s) {
		return ""
	}
	return base64.StdEncoding.EncodeToString([]byte(s))
}
