package redislockotel_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
	"github.com/go-redis-lock/redislock/redislockotel"
)

// BenchmarkAcquireReleaseOTel is the root package's BenchmarkAcquireRelease
// (tracking=false) with the OpenTelemetry observer on SDK providers: every
// span sampled (and dropped, with no exporter), every metric recorded.
//
//	go test -run '^$' -bench . -benchmem ./...
func BenchmarkAcquireReleaseOTel(b *testing.B) {
	s := redistest.Start(b)
	ctx := context.Background()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() {
		_ = mp.Shutdown(ctx)
		_ = tp.Shutdown(ctx)
	})
	for _, c := range []struct {
		name string
		opts []redislockotel.Option
	}{
		{"otel", nil},
		{"otel/lock-name", []redislockotel.Option{redislockotel.WithLockName()}},
	} {
		b.Run(c.name, func(b *testing.B) {
			obs, err := redislockotel.NewObserver(append([]redislockotel.Option{
				redislockotel.WithMeterProvider(mp), redislockotel.WithTracerProvider(tp)}, c.opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			l, err := redislock.New(s.Client(), "bench", redislock.WithExpire(10*time.Second),
				redislock.WithTracking(false), redislock.WithObserver(obs))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Acquire(ctx); err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
