package wait

import (
	"context"
	"sync"
)

// Cleanups counts the giveback scripts of a Lock still running, like a
// sync.WaitGroup whose wait can end with a context.
type Cleanups struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while n is 0
}

func (c *Cleanups) Add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		c.idle = make(chan struct{})
	}
	c.n++
}

func (c *Cleanups) Done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.n == 0 {
		close(c.idle)
		c.idle = nil
	}
}

// wait returns nil once none is running, or ctx's error if ctx ends first.
func (c *Cleanups) Wait(ctx context.Context) error {
	c.mu.Lock()
	idle := c.idle
	c.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
