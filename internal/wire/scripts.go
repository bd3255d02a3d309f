package wire

import (
	"context"
	_ "embed"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts, one per file in lua/, each with a header listing its KEYS
// and ARGV. Every ownership decision is made inside a script by comparing
// the stored id; nothing user-supplied is spliced into Lua source. Scripts
// are run with EVALSHA, falling back to EVAL when Redis has not cached them
// (go-redis Script.Run).
var (
	//go:embed lua/acquire.lua
	acquireLua string
	Acquire    = redis.NewScript(acquireLua)

	//go:embed lua/release.lua
	releaseLua string
	Release    = redis.NewScript(releaseLua)

	//go:embed lua/extend.lua
	extendLua string
	Extend    = redis.NewScript(extendLua)

	//go:embed lua/reset.lua
	resetLua string
	Reset    = redis.NewScript(resetLua)

	//go:embed lua/giveback.lua
	givebackLua string
	Giveback    = redis.NewScript(givebackLua)

	//go:embed lua/store.lua
	storeLua string
	Store    = redis.NewScript(storeLua)
)

// The semaphore's scripts, each with lua/sem_lib.lua before it.
var (
	//go:embed lua/sem_lib.lua
	semLib string

	//go:embed lua/sem_acquire.lua
	semAcquireLua string
	SemAcquire    = redis.NewScript(semLib + semAcquireLua)

	//go:embed lua/sem_release.lua
	semReleaseLua string
	SemRelease    = redis.NewScript(semLib + semReleaseLua)

	//go:embed lua/sem_extend.lua
	semExtendLua string
	SemExtend    = redis.NewScript(semLib + semExtendLua)

	//go:embed lua/sem_giveback.lua
	semGivebackLua string
	SemGiveback    = redis.NewScript(semLib + semGivebackLua)

	//go:embed lua/sem_reset.lua
	semResetLua string
	SemReset    = redis.NewScript(semLib + semResetLua)

	//go:embed lua/sem_holders.lua
	semHoldersLua string
	SemHolders    = redis.NewScript(semLib + semHoldersLua)
)

// The RWMutex's scripts, each with lua/sem_lib.lua and lua/rw_lib.lua
// before it.
var (
	//go:embed lua/rw_lib.lua
	rwLib string

	//go:embed lua/rw_wacquire.lua
	rwWAcquireLua string
	RWWAcquire    = redis.NewScript(semLib + rwLib + rwWAcquireLua)

	//go:embed lua/rw_racquire.lua
	rwRAcquireLua string
	RWRAcquire    = redis.NewScript(semLib + rwLib + rwRAcquireLua)

	//go:embed lua/rw_wrelease.lua
	rwWReleaseLua string
	RWWRelease    = redis.NewScript(semLib + rwLib + rwWReleaseLua)

	//go:embed lua/rw_rrelease.lua
	rwRReleaseLua string
	RWRRelease    = redis.NewScript(semLib + rwLib + rwRReleaseLua)

	//go:embed lua/rw_wgiveback.lua
	rwWGivebackLua string
	RWWGiveback    = redis.NewScript(semLib + rwLib + rwWGivebackLua)

	//go:embed lua/rw_rgiveback.lua
	rwRGivebackLua string
	RWRGiveback    = redis.NewScript(semLib + rwLib + rwRGivebackLua)

	//go:embed lua/rw_wleave.lua
	rwWLeaveLua string
	RWWLeave    = redis.NewScript(semLib + rwLib + rwWLeaveLua)

	//go:embed lua/rw_rleave.lua
	rwRLeaveLua string
	RWRLeave    = redis.NewScript(semLib + rwLib + rwRLeaveLua)

	//go:embed lua/rw_reset.lua
	rwResetLua string
	RWReset    = redis.NewScript(semLib + rwLib + rwResetLua)

	//go:embed lua/rw_info.lua
	rwInfoLua string
	RWInfo    = redis.NewScript(semLib + rwLib + rwInfoLua)
)

// EvalShaCmd returns the whole EVALSHA command line of script s with keys
// and args, to be built once and sent many times with Do: the hot path then
// boxes no argument into an interface.
func EvalShaCmd(s *redis.Script, keys []string, args []any) []any {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", s.Hash(), strconv.Itoa(len(keys)))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	return append(cmd, args...)
}

// RunPrepared sends the prepared EVALSHA cmd (made by EvalShaCmd for s,
// keys and args) and, when Redis has not cached the script, runs it with
// EVAL, which caches it.
func RunPrepared(ctx context.Context, c redis.UniversalClient, cmd []any, s *redis.Script, keys []string, args []any) *redis.Cmd {
	r := c.Do(ctx, cmd...)
	if IsNoScript(r.Err()) {
		return s.Eval(ctx, c, keys, args...)
	}
	return r
}

// Status is what an acquire script's reply says, decoded by ParseAcquire
// from its first element (0 for Acquired, 1 for Busy...). The zero Status
// is None, no reply at all, so that a result nobody filled in is never
// taken for a lock that was won.
type Status int64

const (
	None      Status = iota // no reply decoded: nothing was won
	Acquired                // reply 0: the lock is now ours; the value is the fencing token (0 without fencing)
	Busy                    // reply 1: another id holds it; the value is its remaining TTL in ms, -1 when it never expires
	Ours                    // reply 2: it already holds our caller-given id; the value is its remaining TTL
	OtherSize               // reply 3: a semaphore's holders use another size; the value is theirs
)

// ErrBadReply is what a reply of no known shape decodes to.
var ErrBadReply = errors.New("redislock: unexpected reply from Redis")

// ParseAcquire decodes an acquire script's {status, value} reply.
func ParseAcquire(cmd *redis.Cmd) (Status, int64, error) {
	vals, err := cmd.Int64Slice()
	if err != nil {
		return None, 0, err
	}
	if len(vals) != 2 || vals[0] < 0 || vals[0] > int64(OtherSize-Acquired) {
		return None, 0, ErrBadReply
	}
	return Acquired + Status(vals[0]), vals[1], nil
}

// IsNoScript reports whether err is Redis's NOSCRIPT reply to EVALSHA.
func IsNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}
