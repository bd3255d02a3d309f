package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/wire"
)

const statusHelp = `Usage: redislock status [flags] NAME

Prints whether the lock NAME is held, by which owner id, and how long its
key has left to live; then, if the semaphore NAME (redislock run
--semaphore) has holders, its size and each holder with its time left;
then, if the reader/writer lock NAME (run --shared, --exclusive) is held,
its writer or readers, and how many wait.

{{flags}}

Exit code 0 whether it is held or free; 1 when Redis cannot be reached; 2
for bad arguments.

The owner id is printed Go-quoted ("\xff" for a byte that is not UTF-8,
"\n" for a newline), as is a name that is not printable UTF-8.

With --json it prints one object:
  {"name":"nightly","key":"lock:nightly","held":true,"owner":"...","ttl_ms":12345}
where ttl_ms is -1 for a lock without expire, and owner and ttl_ms are left
out when the lock is free. A semaphore's holders are in "semaphore_holders",
objects of the same form with "kind":"semaphore" and "size"; a
reader/writer lock's in "rwmutex_holders", with "kind" "writer" or
"reader". An owner id of the library's default form
(HOST:PID:UUID) also gives "host" and "pid", and the text names them:
  nightly: held by "web-3:4242:..." (pid 4242 on web-3), expires in 12.3s

Ids are stored byte for byte, and JSON strings cannot hold bytes that are
not UTF-8: for an owner, name or key that is not valid UTF-8, the string
shows each such byte as U+FFFD and a field of the same name with "_base64"
appended (owner_base64, name_base64, key_base64) holds its exact bytes in
standard base64. Control characters are escaped as JSON does (\u0001), and
kept exactly.
`

const listHelp = `Usage: redislock list [flags] [PATTERN]

Prints every held lock under the prefix whose name matches the glob PATTERN
(default: all), every holder of a semaphore of such a name (KIND
semaphore/N, one line per holder), and the writer or each reader of a
reader/writer lock (KIND writer, reader), with its owner id (Go-quoted, as
status prints it) and remaining time to live.

{{flags}}

It walks the keys with SCAN (never KEYS), on every master of a cluster, and
changes nothing. With --json it prints an array of the objects status
--json prints (see "redislock status --help", also for ids that are not
UTF-8).
`

// lockStatus is the JSON form of status and list. The _base64 fields hold
// the exact bytes of the string before them when it is not valid UTF-8.
type lockStatus struct {
	Name        string `json:"name"`
	NameBase64  string `json:"name_base64,omitempty"`
	Key         string `json:"key"`
	KeyBase64   string `json:"key_base64,omitempty"`
	Held        bool   `json:"held"`
	Owner       string `json:"owner,omitempty"`
	OwnerBase64 string `json:"owner_base64,omitempty"`
	Host        string `json:"host,omitempty"` // from an owner id of the library's default form
	PID         int    `json:"pid,omitempty"`
	TTLms       *int64 `json:"ttl_ms,omitempty"`
	Kind        string `json:"kind,omitempty"` // in list: "lock" or "semaphore"
	Size        int    `json:"size,omitempty"` // a semaphore's

	// SemaphoreHolders, in status, are the holders of the semaphore of the
	// same name, if any (see "redislock run --semaphore").
	SemaphoreHolders []lockStatus `json:"semaphore_holders,omitempty"`

	// RWMutexHolders, in status, are the writer or the readers of the
	// reader/writer lock of the same name, if any (see "redislock run
	// --shared"), with "kind" "writer" or "reader".
	RWMutexHolders []lockStatus `json:"rwmutex_holders,omitempty"`
}

// freeStatus is the status of the free lock name, whose key is key.
func freeStatus(name, key string) lockStatus {
	return lockStatus{Name: name, NameBase64: exactBytes(name), Key: key, KeyBase64: exactBytes(key)}
}

// heldStatus is the status of a lock held by owner for ttl more
// (negative: no expire).
func heldStatus(name, key, owner string, ttl time.Duration) lockStatus {
	ms := int64(-1)
	if ttl >= 0 {
		ms = ttl.Milliseconds()
	}
	st := freeStatus(name, key)
	st.Held, st.Owner, st.OwnerBase64, st.TTLms = true, owner, exactBytes(owner), &ms
	if o, ok := wire.ParseOwner(owner); ok {
		st.Host, st.PID = o.Host, o.PID
	}
	return st
}

// holder says which process holds the lock, when its owner id tells.
func (s lockStatus) holder() string {
	if s.PID == 0 {
		return ""
	}
	return fmt.Sprintf("pid %d on %s", s.PID, s.Host)
}

func (s lockStatus) String() string {
	switch {
	case !s.Held:
		return fmt.Sprintf("%s: free", shown(s.Name))
	}
	by := fmt.Sprintf("%q", s.Owner)
	if h := s.holder(); h != "" {
		by += " (" + h + ")"
	}
	if *s.TTLms < 0 {
		return fmt.Sprintf("%s: held by %s, no expire", shown(s.Name), by)
	}
	return fmt.Sprintf("%s: held by %s, expires in %v", shown(s.Name), by, time.Duration(*s.TTLms)*time.Millisecond)
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var asJSON bool
	client, conn, pos, code, ok := adminSetup(ctx, "status", statusHelp, args, 1, 1, true, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	}, nil)
	if !ok {
		return code
	}
	defer client.Close()
	lock, err := redislock.New(client, pos[0], conn.lockOptions(stderr)...)
	if err != nil {
		return fail(stderr, "status", exitUsage, err)
	}
	ls, err := lock.Status(ctx)
	if err != nil {
		return fail(stderr, "status", exitFail, err)
	}
	st := freeStatus(lock.Name(), lock.Key())
	for _, h := range ls.Holders {
		st = heldStatus(h.Name, h.Key, h.Owner, h.TTL)
	}
	text := st.String()
	// The semaphore of the same name, if it has holders. Its size does
	// not matter for reading.
	sem, err := redislock.NewSemaphore(client, pos[0], 1, conn.lockOptions(stderr)...)
	if err == nil { // a name that cannot be a semaphore's has none
		ss, err := sem.Status(ctx)
		if err != nil {
			return fail(stderr, "status", exitFail, err)
		}
		for _, h := range ss.Holders {
			hs := heldStatus(h.Name, h.Key, h.Owner, h.TTL)
			hs.Kind, hs.Size = string(h.Kind), h.Size
			st.SemaphoreHolders = append(st.SemaphoreHolders, hs)
		}
		if len(ss.Holders) > 0 {
			text += fmt.Sprintf("\n%s: semaphore of %d, %d held:", shown(pos[0]), ss.Holders[0].Size, len(ss.Holders))
			for _, h := range st.SemaphoreHolders {
				text += "\n  " + strings.TrimPrefix(h.String(), shown(pos[0])+": ")
			}
		}
	}
	if rw, err := redislock.NewRWMutex(client, pos[0], conn.lockOptions(stderr)...); err == nil {
		rs, err := rw.Status(ctx)
		if err != nil {
			return fail(stderr, "status", exitFail, err)
		}
		for _, h := range rs.Holders {
			hs := heldStatus(h.Name, h.Key, h.Owner, h.TTL)
			hs.Kind = string(h.Kind)
			st.RWMutexHolders = append(st.RWMutexHolders, hs)
		}
		if len(st.RWMutexHolders) > 0 {
			text += fmt.Sprintf("\n%s: reader/writer lock, %d waiting writers, %d waiting readers:", shown(pos[0]), rs.WaitingWriters, rs.WaitingReaders)
			for _, h := range st.RWMutexHolders {
				text += "\n  " + h.Kind + " " + strings.TrimPrefix(h.String(), shown(pos[0])+": ")
			}
		}
	}
	return output(stdout, stderr, "status", asJSON, st, text)
}

func runList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var asJSON bool
	client, conn, pos, code, ok := adminSetup(ctx, "list", listHelp, args, 0, 1, false, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	}, nil)
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
	fmt.Fprintln(tw, "NAME\tKIND\tHOLDER\tOWNER\tTTL")
	for i, li := range infos {
		all[i] = heldStatus(li.Name, li.Key, li.Owner, li.TTL)
		all[i].Kind, all[i].Size = string(li.Kind), li.Size
		kind := string(li.Kind)
		if li.Kind == redislock.KindSemaphore {
			kind = fmt.Sprintf("semaphore/%d", li.Size)
		}
		ttl := "none"
		if li.TTL >= 0 {
			ttl = li.TTL.Round(time.Millisecond).String()
		}
		holder := all[i].holder()
		if holder == "" {
			holder = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%q\t%s\n", shown(li.Name), kind, holder, li.Owner, ttl)
	}
	tw.Flush()
	if len(infos) == 0 {
		text.Reset()
		fmt.Fprintf(&text, "no lock held under prefix %q matches %q", conn.prefix, pattern)
	}
	return output(stdout, stderr, "list", asJSON, all, strings.TrimSuffix(text.String(), "\n"))
}
