package redislock

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// A Codec turns values into bytes and back, for TypedCache.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSONCodec is the Codec of encoding/json, TypedCache's default.
type JSONCodec struct{}

func (JSONCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// TypedCache is a Cache for values of type T, stored through a Codec.
type TypedCache[T any] struct {
	cache *Cache
	codec Codec
}

// NewTypedCache returns a TypedCache on cache; a nil codec means
// JSONCodec.
func NewTypedCache[T any](cache *Cache, codec Codec) *TypedCache[T] {
	if codec == nil {
		codec = JSONCodec{}
	}
	return &TypedCache[T]{cache: cache, codec: codec}
}

// GetOrCompute is Cache.GetOrCompute for a T: fn's value is encoded with
// the codec before it is stored, and decoded after it is read. A value
// that does not decode is an error (nothing is computed over it).
func (t *TypedCache[T]) GetOrCompute(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) (T, error)) (T, Result, error) {
	var zero T
	if fn == nil {
		return zero, 0, fmt.Errorf("cache %q: %w", key, ErrInvalidCacheCall)
	}
	b, res, err := t.cache.GetOrCompute(ctx, key, ttl, func(ctx context.Context) ([]byte, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		return t.codec.Marshal(v)
	})
	if err != nil {
		return zero, res, err
	}
	var v T
	if err := t.codec.Unmarshal(b, &v); err != nil {
		return zero, res, fmt.Errorf("cache %q: decode: %w", key, err)
	}
	return v, res, nil
}
