package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-redis-lock/redislock/cache"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// BenchmarkCacheRead measures a Cache read that finds the value, fresh
// (hit) and past its soft TTL (stale, with its refresh held up the whole
// time), against a plain GET of the same server: both are one round trip
// (a pipelined GET and PTTL).
//
//	go test -run '^$' -bench CacheRead -benchmem ./cache
func BenchmarkCacheRead(b *testing.B) {
	s := redistest.Start(b)
	ctx := context.Background()
	c := s.Client()
	b.Run("GET", func(b *testing.B) {
		c.Set(ctx, "plain", "value", time.Hour)
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Get(ctx, "plain").Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, stale := range []bool{false, true} {
		name := "hit"
		if stale {
			name = "stale"
		}
		b.Run(name, func(b *testing.B) {
			cc, err := cache.New(c, cache.WithStaleAfter(time.Millisecond))
			if err != nil {
				b.Fatal(err)
			}
			if !stale {
				cc, err = cache.New(c)
				if err != nil {
					b.Fatal(err)
				}
			}
			block := make(chan struct{})
			defer func() { close(block); cc.Close(ctx) }()
			first := true
			fn := func(context.Context) ([]byte, error) {
				if !first {
					<-block // the refresh never ends while the reads run
				}
				first = false
				return []byte("value"), nil
			}
			key := "cached:" + name
			if _, _, err := cc.GetOrCompute(ctx, key, time.Hour, fn); err != nil {
				b.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond) // past the soft TTL
			b.ReportAllocs()
			for b.Loop() {
				_, res, err := cc.GetOrCompute(ctx, key, time.Hour, fn)
				if err != nil || (stale && res != cache.Stale) || (!stale && res != cache.Hit) {
					b.Fatalf("%v, %v", res, err)
				}
			}
		})
	}
}
