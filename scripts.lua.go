package redislock

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
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)

	//go:embed lua/release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed lua/extend.lua
	extendLua    string
	extendScript = redis.NewScript(extendLua)

	//go:embed lua/reset.lua
	resetLua    string
	resetScript = redis.NewScript(resetLua)

	//go:embed lua/giveback.lua
	givebackLua    string
	givebackScript = redis.NewScript(givebackLua)

	//go:embed lua/store.lua
	storeLua    string
	storeScript = redis.NewScript(storeLua)
)

// The semaphore's scripts, each with lua/sem_lib.lua before it.
var (
	//go:embed lua/sem_lib.lua
	semLib string

	//go:embed lua/sem_acquire.lua
	semAcquireLua    string
	semAcquireScript = redis.NewScript(semLib + semAcquireLua)

	//go:embed lua/sem_release.lua
	semReleaseLua    string
	semReleaseScript = redis.NewScript(semLib + semReleaseLua)

	//go:embed lua/sem_extend.lua
	semExtendLua    string
	semExtendScript = redis.NewScript(semLib + semExtendLua)

	//go:embed lua/sem_giveback.lua
	semGivebackLua    string
	semGivebackScript = redis.NewScript(semLib + semGivebackLua)

	//go:embed lua/sem_reset.lua
	semResetLua    string
	semResetScript = redis.NewScript(semLib + semResetLua)

	//go:embed lua/sem_holders.lua
	semHoldersLua    string
	semHoldersScript = redis.NewScript(semLib + semHoldersLua)
)

// The RWMutex's scripts, each with lua/sem_lib.lua and lua/rw_lib.lua
// before it.
var (
	//go:embed lua/rw_lib.lua
	rwLib string

	//go:embed lua/rw_wacquire.lua
	rwWAcquireLua    string
	rwWAcquireScript = redis.NewScript(semLib + rwLib + rwWAcquireLua)

	//go:embed lua/rw_racquire.lua
	rwRAcquireLua    string
	rwRAcquireScript = redis.NewScript(semLib + rwLib + rwRAcquireLua)

	//go:embed lua/rw_wrelease.lua
	rwWReleaseLua    string
	rwWReleaseScript = redis.NewScript(semLib + rwLib + rwWReleaseLua)

	//go:embed lua/rw_rrelease.lua
	rwRReleaseLua    string
	rwRReleaseScript = redis.NewScript(semLib + rwLib + rwRReleaseLua)

	//go:embed lua/rw_wgiveback.lua
	rwWGivebackLua    string
	rwWGivebackScript = redis.NewScript(semLib + rwLib + rwWGivebackLua)

	//go:embed lua/rw_rgiveback.lua
	rwRGivebackLua    string
	rwRGivebackScript = redis.NewScript(semLib + rwLib + rwRGivebackLua)

	//go:embed lua/rw_wleave.lua
	rwWLeaveLua    string
	rwWLeaveScript = redis.NewScript(semLib + rwLib + rwWLeaveLua)

	//go:embed lua/rw_rleave.lua
	rwRLeaveLua    string
	rwRLeaveScript = redis.NewScript(semLib + rwLib + rwRLeaveLua)

	//go:embed lua/rw_reset.lua
	rwResetLua    string
	rwResetScript = redis.NewScript(semLib + rwLib + rwResetLua)

	//go:embed lua/rw_info.lua
	rwInfoLua    string
	rwInfoScript = redis.NewScript(semLib + rwLib + rwInfoLua)
)

// evalShaCmd returns the whole EVALSHA command line of script s with keys
// and args, to be built once and sent many times with Do: the hot path then
// boxes no argument into an interface.
func evalShaCmd(s *redis.Script, keys []string, args []any) []any {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", s.Hash(), strconv.Itoa(len(keys)))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	return append(cmd, args...)
}

// runPrepared sends the prepared EVALSHA cmd (made by evalShaCmd for s,
// keys and args) and, when Redis has not cached the script, runs it with
// EVAL, which caches it.
func runPrepared(ctx context.Context, c redis.UniversalClient, cmd []any, s *redis.Script, keys []string, args []any) *redis.Cmd {
	r := c.Do(ctx, cmd...)
	if isNoScript(r.Err()) {
		return s.Eval(ctx, c, keys, args...)
	}
	return r
}

// acquireStatus is the first element of the acquire script's reply.
type acquireStatus int64

const (
	statusAcquired acquireStatus = 0 // the lock is now ours
	statusBusy     acquireStatus = 1 // another id holds it
	statusOurs     acquireStatus = 2 // it already holds our caller-given id

	statusOtherSize acquireStatus = 3 // a semaphore's holders use another size
)

// acquireResult is the acquire script's reply.
type acquireResult struct {
	status acquireStatus
	pttl   int64  // busy: the holder's remaining TTL in ms; -1 when it never expires
	token  int64  // acquired: the fencing token; 0 without fencing
	id     string // the owner id the try was sent with
}

var errBadReply = errors.New("redislock: unexpected reply from Redis")

// parseAcquire decodes the acquire script's {status, pttl} reply.
func parseAcquire(cmd *redis.Cmd) (acquireResult, error) {
	vals, err := cmd.Int64Slice()
	if err != nil {
		return acquireResult{}, err
	}
	if len(vals) == 2 && acquireStatus(vals[0]) == statusOtherSize {
		return acquireResult{}, &sizeMismatchError{stored: vals[1]}
	}
	if len(vals) != 2 || vals[0] < 0 || vals[0] > 2 {
		return acquireResult{}, errBadReply
	}
	res := acquireResult{status: acquireStatus(vals[0])}
	if res.status == statusAcquired {
		res.token = vals[1]
	} else {
		res.pttl = vals[1]
	}
	return res, nil
}

// isNoScript reports whether err is Redis's NOSCRIPT reply to EVALSHA.
func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}
