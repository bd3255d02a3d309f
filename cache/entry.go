package cache

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Stored values: the header "\xffRLC1", a type byte, then for a value the
// hard TTL it was stored with (8 bytes, big-endian milliseconds: its age is
// that less the key's PTTL, both the server's) and the bytes fn returned;
// for an absence (ErrNoValue), nothing more. A key that does not start
// with the header was written by something else (ErrForeignValue).
const (
	storedHeader = "\xffRLC1"
	tagValue     = 'v'
	tagAbsent    = 'n'
)

func encodeValue(v []byte, ttl time.Duration) []byte {
	h := len(storedHeader)
	b := make([]byte, h+9+len(v))
	copy(b, storedHeader)
	b[h] = tagValue
	binary.BigEndian.PutUint64(b[h+1:h+9], uint64(ttl.Milliseconds()))
	copy(b[h+9:], v)
	return b
}

func encodeAbsent() []byte { return []byte(storedHeader + string(rune(tagAbsent))) }

// entry is what a read of the value key found.
type entry struct {
	found  bool
	absent bool // a cached ErrNoValue
	value  []byte
	age    time.Duration // since it was stored, by the server's TTL
}

// read gets key and its TTL in one round trip.
func (c *Cache) read(ctx context.Context, key string) (entry, error) {
	var get *redis.StringCmd
	var pttl *redis.DurationCmd
	_, err := c.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		get, pttl = p.Get(ctx, key), p.PTTL(ctx, key)
		return nil
	})
	if errors.Is(err, redis.Nil) {
		return entry{}, nil
	}
	if err != nil {
		return entry{}, err
	}
	b, _ := get.Bytes()
	h := len(storedHeader)
	if len(b) <= h || string(b[:h]) != storedHeader {
		return entry{}, fmt.Errorf("%w (%q)", ErrForeignValue, key)
	}
	switch b = b[h:]; {
	case len(b) == 1 && b[0] == tagAbsent:
		return entry{found: true, absent: true}, nil
	case len(b) >= 9 && b[0] == tagValue:
		e := entry{found: true, value: b[9:]}
		if left := pttl.Val(); left > 0 {
			stored := time.Duration(binary.BigEndian.Uint64(b[1:9])) * time.Millisecond
			e.age = max(stored-left, 0)
		}
		return e, nil
	}
	return entry{}, fmt.Errorf("%w (%q)", ErrForeignValue, key)
}

// answer turns an entry into GetOrCompute's result.
func (e entry) answer(key string, res Result) ([]byte, Result, error) {
	if e.absent {
		return nil, res, fmt.Errorf("cache %q: %w", key, ErrNoValue)
	}
	return e.value, res, nil
}
