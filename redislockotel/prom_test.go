package redislockotel_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
	"github.com/go-redis-lock/redislock/redislockotel"
)

// Every metric, through OpenTelemetry's Prometheus exporter with the
// default observer (no lock name), scraped over loopback HTTP beside an
// application metric of the same registry: the scrape succeeds and names
// every series as the README says.
func TestPrometheusNames(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	app := prometheus.NewCounter(prometheus.CounterOpts{Name: "app_jobs_total", Help: "the application's own"})
	reg.MustRegister(app)
	app.Inc()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(ctx)
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(ctx)
	obs, err := redislockotel.NewObserver(redislockotel.WithMeterProvider(mp), redislockotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	l, err := redislock.New(s.Client(), "job", redislock.WithExpire(10*time.Second), redislock.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Client().Del(ctx, l.Key()).Err(); err != nil { // a loss, seen by the watch
		t.Fatal(err)
	}
	<-l.Done()

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	var body string
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("scrape: %s\n%s", resp.Status, body)
		}
		if strings.Contains(body, "redislock_lost_total") || time.Now().After(deadline) {
			break // HoldEnd comes just after Done
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, want := range []string{
		"app_jobs_total 1",
		`redislock_acquire_duration_seconds_bucket{`,
		`redislock_hold_duration_seconds_count{`,
		`redislock_reason="expired"`,
		`redislock_held{`,
		`redislock_lost_total{`,
		`redislock_extend_total{`,
		`redislock_renewal="manual"`,
		`redislock_result="extended"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in the scrape:\n%s", want, body)
		}
	}
	if strings.Contains(body, "redislock_name") {
		t.Errorf("the lock name is a label without WithLockName:\n%s", body)
	}
}

// Two OpenTelemetry observers on one Lock each end their own spans.
func TestTwoObserversEndTheirSpans(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	obs1, _, rec1, _ := setup(t)
	obs2, _, rec2, _ := setup(t)
	l, err := redislock.New(s.Client(), "job", redislock.WithObserver(obs1), redislock.WithObserver(obs2))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if s1, e1 := len(rec1.Started()), len(rec1.Ended()); s1 != 2 || e1 != 2 {
		t.Errorf("observer 1: %d spans started, %d ended; want 2 and 2", s1, e1)
	}
	if s2, e2 := len(rec2.Started()), len(rec2.Ended()); s2 != 2 || e2 != 2 {
		t.Errorf("observer 2: %d spans started, %d ended; want 2 and 2", s2, e2)
	}
}
