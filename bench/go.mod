module github.com/go-redis-lock/redislock/bench

// go 1.26.0, not the library's 1.24: the peers benchmarked here (redsync
// v4.18.1, go-redis v9.23.0, golang.org/x/sys v0.48.0) declare go 1.26.0.
go 1.26.0

replace github.com/go-redis-lock/redislock => ../

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-redis-lock/redislock v0.0.0-00010101000000-000000000000
	github.com/go-redis/cache/v9 v9.0.0
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redis/rueidis v1.0.79
	golang.org/x/sync v0.25.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/klauspost/compress v1.13.6 // indirect
	github.com/vmihailenco/go-tinylfu v0.2.2 // indirect
	github.com/vmihailenco/msgpack/v5 v5.3.4 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
