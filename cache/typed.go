package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// A Codec turns values into bytes and back, for Typed.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSONCodec is the Codec of encoding/json, Typed's default.
type JSONCodec struct{}

func (JSONCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// Typed is a Cache for values of type T, stored through a Codec.
type Typed[T any] struct {
	cache *Cache
	codec Codec
}

// NewTyped returns a Typed on cache; a nil codec means JSONCodec.
func NewTyped[T any](cache *Cache, codec Codec) *Typed[T] {
	if codec == nil {
		codec = JSONCodec{}
	}
	return &Typed[T]{cache: cache, codec: codec}
}

// GetOrCompute is Cache.GetOrCompute for a T: fn's value is encoded with
// the codec before it is stored, and decoded after it is read. A value
// that does not decode is an error (nothing is computed over it).
func (t *Typed[T]) GetOrCompute(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) (T, error)) (T, Result, error) {
	var zero T
	if fn == nil {
		return zero, 0, t.cache.checkCall(key, ttl, false)
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
