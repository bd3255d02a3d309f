// Command prometheus is a runnable example: workers that share a lock,
// observed by redislockotel, with the metrics served for Prometheus on
// /metrics through OpenTelemetry's Prometheus exporter.
//
//	go run ./example/prometheus                                  # an in-process Redis
//	go run ./example/prometheus -redis redis://127.0.0.1:6379/0  # a server of yours
//	curl -s 127.0.0.1:9464/metrics | grep redislock_
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/redislockotel"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9464", "address to serve /metrics on")
	redisURL := flag.String("redis", "", "Redis URL; empty: an in-process Redis (miniredis)")
	workers := flag.Int("workers", 3, "workers sharing the lock")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	client, closeRedis, err := connect(*redisURL)
	if err != nil {
		log.Fatal(err)
	}
	defer closeRedis()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("metrics on http://%s/metrics (Ctrl-C to stop)\n", ln.Addr())
	if err := run(ctx, ln, client, *workers, redislockotel.WithLockName()); err != nil {
		log.Fatal(err)
	}
}

// connect returns a client for url, or for an in-process Redis when url
// is empty.
func connect(url string) (*redis.Client, func(), error) {
	if url == "" {
		m, err := miniredis.Run()
		if err != nil {
			return nil, nil, err
		}
		c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
		return c, func() { c.Close(); m.Close() }, nil
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, nil, err
	}
	opts.ContextTimeoutEnabled = true
	c := redis.NewClient(opts)
	return c, func() { c.Close() }, nil
}

// run serves /metrics on ln and runs workers that take turns at the lock
// "report" on client, until ctx ends; opts configure the observer.
func run(ctx context.Context, ln net.Listener, client redis.UniversalClient, workers int, opts ...redislockotel.Option) error {
	// OpenTelemetry's Prometheus exporter is a metric reader that feeds a
	// Prometheus registry, which promhttp serves.
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	obs, err := redislockotel.NewObserver(append([]redislockotel.Option{redislockotel.WithMeterProvider(mp)}, opts...)...)
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(ctx, client, obs)
		}()
	}
	<-ctx.Done()
	wg.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// work takes the lock, holds it for a moment, and releases it, until ctx
// ends.
func work(ctx context.Context, client redis.UniversalClient, obs *redislock.Observer) {
	l, err := redislock.New(client, "report", redislock.WithExpire(5*time.Second), redislock.WithObserver(obs))
	if err != nil {
		log.Print(err)
		return
	}
	for ctx.Err() == nil {
		wait, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := l.Acquire(wait)
		cancel()
		if err != nil {
			continue // busy for too long: counted as a timeout
		}
		select {
		case <-time.After(20 * time.Millisecond): // the job
		case <-ctx.Done():
		}
		_ = l.Extend(context.Background(), 0) // a manual extend, for redislock_extend_total
		_ = l.Release(context.Background())
	}
	_ = l.Settle(context.Background())
}
