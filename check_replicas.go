package redislock

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxClockSkew is how far apart Check lets the clocks of a master and of
// its replica be before it warns. Fencing tokens are at least the server's
// clock, and Redis replicates expires as absolute times: a replica whose
// clock is behind issues, once promoted, tokens below those its master
// granted, and one whose clock is ahead expires every lock early.
const maxClockSkew = 500 * time.Millisecond

// checkReplicas inspects each replica the master at addr reports in INFO
// replication, over a connection of its own with the master's options.
func checkReplicas(ctx context.Context, master *redis.Client, addr string) []Finding {
	info, err := master.Info(ctx, "replication").Result()
	if err != nil {
		return nil // reported by checkMaster
	}
	var addrs []string
	for k, v := range infoFields(info) {
		if n, ok := strings.CutPrefix(k, "slave"); !ok || n == "" || strings.Trim(n, "0123456789") != "" {
			continue
		}
		f := map[string]string{}
		for _, kv := range strings.Split(v, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		if f["ip"] != "" && f["port"] != "" {
			addrs = append(addrs, net.JoinHostPort(f["ip"], f["port"]))
		}
	}
	slices.Sort(addrs)
	var fs []Finding
	for _, raddr := range addrs {
		fs = append(fs, checkReplica(ctx, master, addr, raddr)...)
	}
	return fs
}

// checkReplica inspects the replica at raddr of the master at addr.
func checkReplica(ctx context.Context, master *redis.Client, addr, raddr string) []Finding {
	var fs []Finding
	add := func(sev Severity, format string, args ...any) {
		fs = append(fs, Finding{Severity: sev, Node: raddr, Message: fmt.Sprintf(format, args...)})
	}
	o := *master.Options()
	if o.Addr == "FailoverClient" {
		o.Dialer = nil // the failover client's dialer asks Sentinel for the master
	}
	o.Addr = raddr
	o.PoolSize, o.MinIdleConns, o.MaxRetries = 1, 0, -1
	r := redis.NewClient(&o)
	defer r.Close()
	if err := r.Ping(ctx).Err(); err != nil {
		add(SeverityWarning, "replica of %s could not be reached (%v): its maxmemory-policy and clock were not checked", addr, err)
		return fs
	}
	if policy, err := configGet(ctx, r, "maxmemory-policy"); err != nil {
		add(SeverityWarning, "could not read the maxmemory-policy of this replica of %s (%v): make sure it is noeviction", addr, err)
	} else if policy != "noeviction" {
		add(SeverityProblem, "replica of %s with maxmemory-policy %s: once a failover promotes it, it may evict lock keys and let a second owner in; set noeviction", addr, policy)
	}
	mo, merr := clockOffset(ctx, master)
	ro, rerr := clockOffset(ctx, r)
	if merr != nil || rerr != nil {
		add(SeverityWarning, "could not compare this replica's clock with its master %s (%v): make sure they agree", addr, joinErrs(merr, rerr))
		return fs
	}
	switch skew := (ro - mo).Round(time.Millisecond); {
	case skew > maxClockSkew:
		add(SeverityWarning, "clock %v ahead of its master %s: after a failover to it, locks expire %v early (expires replicate as absolute times) and a second owner may get in; synchronise the clocks", skew, addr, skew)
	case skew < -maxClockSkew:
		add(SeverityWarning, "clock %v behind its master %s: after a failover to it, fencing tokens may go back by up to that much, below tokens already granted; synchronise the clocks", -skew, addr)
	}
	return fs
}

// clockOffset estimates how far the server's clock is from the local one:
// its TIME less the middle of the round trip.
func clockOffset(ctx context.Context, c redis.UniversalClient) (time.Duration, error) {
	before := time.Now()
	t, err := c.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	after := time.Now()
	return t.Sub(before.Add(after.Sub(before) / 2)), nil
}
