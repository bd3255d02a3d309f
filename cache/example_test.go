package cache_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/cache"
)

// newExampleClient returns a client of an in-process Redis, and what
// closes both.
func newExampleClient() (*redis.Client, func()) {
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	return c, func() { c.Close(); m.Close() }
}

// Computing a missing value once across every process: the first caller
// computes, the others wait on the lock's signal and share the value.
func ExampleCache_GetOrCompute() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	c, err := cache.New(client)
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	render := func(ctx context.Context) ([]byte, error) {
		return []byte("<h1>report</h1>"), nil // the expensive part
	}
	v, res, err := c.GetOrCompute(ctx, "page:report", time.Minute, render)
	fmt.Println(string(v), res, err)
	v, res, err = c.GetOrCompute(ctx, "page:report", time.Minute, render)
	fmt.Println(string(v), res, err)
	// Output:
	// <h1>report</h1> computed <nil>
	// <h1>report</h1> hit <nil>
}

// A typed cache: values go through JSON.
func ExampleTyped() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	c, err := cache.New(client)
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	type user struct{ Name string }
	users := cache.NewTyped[user](c, nil)
	u, res, err := users.GetOrCompute(ctx, "user:42", time.Minute, func(context.Context) (user, error) {
		return user{Name: "Ada"}, nil // from the database
	})
	fmt.Println(u.Name, res, err)
	// Output: Ada computed <nil>
}
