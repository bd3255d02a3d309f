package redislockotel_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/leakcheck"
	"github.com/go-redis-lock/redislock/internal/redistest"
	"github.com/go-redis-lock/redislock/redislockotel"
)

func TestMain(m *testing.M) {
	// leakcheck.Run, not goleak.VerifyTestMain with goleak.Cleanup: a
	// Cleanup replaces VerifyTestMain's os.Exit, and the leak's exit code
	// was dropped (the package passed with goroutines left).
	os.Exit(leakcheck.Run(m))
}

// setup returns an observer on a manual metric reader and a span recorder.
func setup(t *testing.T, opts ...redislockotel.Option) (*redislock.Observer, *sdkmetric.ManualReader, *tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	obs, err := redislockotel.NewObserver(append([]redislockotel.Option{
		redislockotel.WithMeterProvider(mp), redislockotel.WithTracerProvider(tp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return obs, reader, rec, tp
}

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// histCount returns the count of the histogram's points whose attributes
// include want.
func histCount(t *testing.T, m metricdata.Metrics, want ...attribute.KeyValue) uint64 {
	t.Helper()
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is %T, want a float64 histogram", m.Name, m.Data)
	}
	var n uint64
	for _, p := range h.DataPoints {
		if has(p.Attributes, want) {
			n += p.Count
		}
	}
	return n
}

// sum returns the sum of the int64 sum's points whose attributes include want.
func sum(t *testing.T, m metricdata.Metrics, want ...attribute.KeyValue) int64 {
	t.Helper()
	if m.Data == nil {
		return 0 // not recorded yet
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is %T, want an int64 sum", m.Name, m.Data)
	}
	var n int64
	for _, p := range s.DataPoints {
		if has(p.Attributes, want) {
			n += p.Value
		}
	}
	return n
}

func has(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// A contended pair on a real server: the waiter times out once, then is
// woken by the holder's release and acquires. Every metric of the pair
// shows it.
func TestContendedPairMetrics(t *testing.T) {
	s := redistest.Start(t)
	obs, reader, _, _ := setup(t)
	ctx := context.Background()
	opts := []redislock.Option{redislock.WithExpire(10 * time.Second), redislock.WithObserver(obs)}
	holder, err := redislock.New(s.Client(), "job", opts...)
	if err != nil {
		t.Fatal(err)
	}
	waiter, err := redislock.New(s.Client(), "job", opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waiter.TryAcquire(ctx); !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("TryAcquire() = %v, want ErrLocked", err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err = waiter.Acquire(short)
	cancel()
	if !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("Acquire() with 100ms = %v, want ErrLocked", err)
	}
	if err := waiter.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- waiter.Acquire(ctx) }()
	// The waiter is in BLPOP once a wake-up is counted... it cannot be
	// seen from here; wait for it to block in Redis instead.
	waitBlocked(t, s.Client(), 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Acquire() after the release = %v", err)
	}
	if err := holder.Extend(ctx, 0); !errors.Is(err, redislock.ErrNotAcquired) { // the waiter's key now
		t.Fatalf("holder.Extend() after its release = %v, want ErrNotAcquired", err)
	}
	if err := waiter.Extend(ctx, 0); err != nil {
		t.Fatal(err)
	}

	ms := collect(t, reader)
	blocking, try := redislockotel.AttrMode.String("blocking"), redislockotel.AttrMode.String("try")
	for _, c := range []struct {
		attrs []attribute.KeyValue
		want  uint64
	}{
		{[]attribute.KeyValue{blocking, redislockotel.AttrResult.String("acquired")}, 2},
		{[]attribute.KeyValue{blocking, redislockotel.AttrResult.String("timeout")}, 1},
		{[]attribute.KeyValue{try, redislockotel.AttrResult.String("busy")}, 1},
	} {
		if n := histCount(t, ms["redislock.acquire.duration"], c.attrs...); n != c.want {
			t.Errorf("redislock.acquire.duration %v: %d samples, want %d", c.attrs, n, c.want)
		}
	}
	if n := sum(t, ms["redislock.held"]); n != 1 {
		t.Errorf("redislock.held = %d, want 1 (the waiter holds)", n)
	}
	if n := histCount(t, ms["redislock.hold.duration"], redislockotel.AttrReason.String("")); n != 1 {
		t.Errorf("redislock.hold.duration of released holds: %d samples, want 1", n)
	}
	if n := sum(t, ms["redislock.wakeups"], redislockotel.AttrCause.String("signal")); n < 1 {
		t.Errorf("redislock.wakeups{cause=signal} = %d, want at least 1", n)
	}
	manual := redislockotel.AttrRenewal.String("manual")
	if n := sum(t, ms["redislock.extend"], manual, redislockotel.AttrResult.String("extended")); n != 1 {
		t.Errorf("redislock.extend{manual,extended} = %d, want 1", n)
	}
	if n := sum(t, ms["redislock.extend"], manual, redislockotel.AttrResult.String("taken_over")); n != 1 {
		t.Errorf("redislock.extend{manual,taken_over} = %d, want 1", n)
	}
	if err := waiter.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := sum(t, collect(t, reader)["redislock.held"]); n != 0 {
		t.Errorf("redislock.held after both released = %d, want 0", n)
	}
}

// waitBlocked waits until n clients are blocked in Redis (BLPOP).
func waitBlocked(t *testing.T, c *redis.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		info, err := c.Info(context.Background(), "clients").Result()
		if err != nil {
			t.Fatal(err)
		}
		if blockedClients(info) >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("fewer than %d clients blocked after 5s", n)
}

func blockedClients(info string) int {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "blocked_clients:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// spanHook is a go-redis hook that passes the span context of each
// command's context to f.
type spanHook func(trace.SpanContext)

func (h spanHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h spanHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h(trace.SpanContextFromContext(ctx))
		return next(ctx, cmd)
	}
}
func (h spanHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h(trace.SpanContextFromContext(ctx))
		return next(ctx, cmds)
	}
}

// A key deleted under a renewing hold: the hold is lost with reason
// expired, counted in redislock.lost; auto renewals before it are counted
// as such.
func TestLostMetric(t *testing.T) {
	s := redistest.Start(t)
	obs, reader, _, _ := setup(t)
	ctx := context.Background()
	l, err := redislock.New(s.Client(), "job", redislock.WithExpire(300*time.Millisecond), redislock.WithAutoRenewal(), redislock.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	// Let a renewal or two run (every ~190 ms).
	waitFor(t, func() bool {
		return sum(t, collect(t, reader)["redislock.extend"], redislockotel.AttrRenewal.String("auto"), redislockotel.AttrResult.String("extended")) >= 1
	})
	if err := s.Client().Del(ctx, l.Key()).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done still open 5s after the key was deleted")
	}
	if !errors.Is(l.Err(), redislock.ErrExpired) {
		t.Fatalf("Err() = %v, want ErrExpired", l.Err())
	}
	// HoldEnd comes just after Done closes.
	waitFor(t, func() bool { _, ok := collect(t, reader)["redislock.lost"]; return ok })
	ms := collect(t, reader)
	if n := sum(t, ms["redislock.lost"], redislockotel.AttrReason.String("expired")); n != 1 {
		t.Errorf("redislock.lost{reason=expired} = %d, want 1", n)
	}
	if n := sum(t, ms["redislock.held"]); n != 0 {
		t.Errorf("redislock.held after the loss = %d, want 0", n)
	}
	if n := histCount(t, ms["redislock.hold.duration"], redislockotel.AttrReason.String("expired")); n != 1 {
		t.Errorf("redislock.hold.duration{reason=expired}: %d samples, want 1", n)
	}
	if err := l.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
		t.Fatalf("Release() after the loss = %v, want ErrNotAcquired", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Spans nest: redislock.acquire under the caller's span, and the Redis
// commands of the acquire under redislock.acquire (a go-redis hook sees
// its span in the command's context, as redisotel would).
func TestSpansNest(t *testing.T) {
	s := redistest.Start(t)
	obs, _, rec, tp := setup(t)
	ctx := context.Background()
	c := s.Client()
	var cmdSpans []trace.SpanContext
	c.AddHook(spanHook(func(sc trace.SpanContext) { cmdSpans = append(cmdSpans, sc) }))
	l, err := redislock.New(c, "job", redislock.WithExpire(10*time.Second), redislock.WithFencing(), redislock.WithObserver(obs), redislock.WithTracking(false))
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := tp.Tracer("test").Start(ctx, "job")
	if err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	acquireCmds := len(cmdSpans)
	if err := l.Extend(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	parent.End()

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		spans[sp.Name()] = sp
	}
	for _, name := range []string{"redislock.acquire", "redislock.extend", "redislock.release"} {
		sp, ok := spans[name]
		if !ok {
			t.Fatalf("no span %s among %d", name, len(spans))
		}
		if sp.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%s's parent = %v, want the caller's span %v", name, sp.Parent().SpanID(), parent.SpanContext().SpanID())
		}
		if sp.SpanKind() != trace.SpanKindInternal {
			t.Errorf("%s kind = %v, want internal", name, sp.SpanKind())
		}
	}
	acq := spans["redislock.acquire"]
	attrs := attribute.NewSet(acq.Attributes()...)
	if v, _ := attrs.Value(redislockotel.AttrResult); v.AsString() != "acquired" {
		t.Errorf("acquire span result = %q, want acquired", v.AsString())
	}
	if v, _ := attrs.Value(redislockotel.AttrToken); v.AsInt64() <= 0 {
		t.Errorf("acquire span token = %d, want the fencing token", v.AsInt64())
	}
	if acquireCmds == 0 {
		t.Fatal("no Redis command during Acquire")
	}
	for i, sc := range cmdSpans[:acquireCmds] {
		if sc.SpanID() != acq.SpanContext().SpanID() {
			t.Errorf("command %d of Acquire ran under span %v, want redislock.acquire's %v", i, sc.SpanID(), acq.SpanContext().SpanID())
		}
	}
	rel := spans["redislock.release"]
	if last := cmdSpans[len(cmdSpans)-1]; last.SpanID() != rel.SpanContext().SpanID() {
		t.Errorf("the release command ran under span %v, want redislock.release's %v", last.SpanID(), rel.SpanContext().SpanID())
	}
}

// With WithLockName the metrics carry the name; without it they do not.
func TestLockNameAttribute(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	for _, withName := range []bool{false, true} {
		var opts []redislockotel.Option
		if withName {
			opts = append(opts, redislockotel.WithLockName())
		}
		obs, reader, _, _ := setup(t, opts...)
		l, err := redislock.New(s.Client(), "job", redislock.WithObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		h := collect(t, reader)["redislock.acquire.duration"].Data.(metricdata.Histogram[float64])
		for _, p := range h.DataPoints {
			v, ok := p.Attributes.Value(redislockotel.AttrName)
			if ok != withName || (ok && v.AsString() != "job") {
				t.Errorf("WithLockName %v: redislock.name = %q (present %v)", withName, v.AsString(), ok)
			}
		}
	}
}

// A holder that dies (its key expires, no release): the waiter's BLPOP
// ends with its slice, capped by the holder's TTL, and is counted as a
// wake-up by timeout.
func TestWakeupByTimeout(t *testing.T) {
	s := redistest.Start(t)
	obs, reader, _, _ := setup(t)
	ctx := context.Background()
	dead, err := redislock.New(s.Client(), "job", redislock.WithExpire(200*time.Millisecond), redislock.WithTracking(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	waiter, err := redislock.New(s.Client(), "job", redislock.WithExpire(10*time.Second), redislock.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	if err := waiter.Acquire(ctx); err != nil { // once the dead holder's key expires
		t.Fatal(err)
	}
	defer waiter.Release(ctx)
	if n := sum(t, collect(t, reader)["redislock.wakeups"], redislockotel.AttrCause.String("timeout")); n < 1 {
		t.Fatalf("redislock.wakeups{cause=timeout} = %d, want at least 1", n)
	}
}

// A hold whose key watch Redis refuses (an ACL without CLIENT and
// SUBSCRIBE) counts one redislock.watch.refused.
func TestWatchRefusedMetric(t *testing.T) {
	s := redistest.Start(t)
	obs, reader, _, _ := setup(t)
	ctx := context.Background()
	acl := "ACL SETUSER plain on >secret resetkeys ~lock:* ~lock-signal:* resetchannels -@all " +
		"+evalsha +eval +script|load +blpop +get +set +del +exists +lpush +pexpire +pttl +time +ping"
	var args []any
	for _, f := range strings.Fields(acl) {
		args = append(args, f)
	}
	if err := s.Client().Do(ctx, args...).Err(); err != nil {
		t.Fatal(err)
	}
	user := s.Client(func(o *redis.Options) { o.Username, o.Password = "plain", "secret" })
	l, err := redislock.New(user, "job", redislock.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	waitFor(t, func() bool { _, ok := collect(t, reader)["redislock.watch.refused"]; return ok })
	if n := sum(t, collect(t, reader)["redislock.watch.refused"]); n != 1 {
		t.Errorf("redislock.watch.refused = %d, want 1", n)
	}
}
