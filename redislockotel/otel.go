package redislockotel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/go-redis-lock/redislock"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/go-redis-lock/redislock/redislockotel"

// Attribute keys.
const (
	AttrMode    = attribute.Key("redislock.mode")    // blocking, try
	AttrResult  = attribute.Key("redislock.result")  // a redislock.Outcome
	AttrReason  = attribute.Key("redislock.reason")  // why a hold ended: "" (released), or the redislock.Outcome of its loss
	AttrRenewal = attribute.Key("redislock.renewal") // auto, manual
	AttrCause   = attribute.Key("redislock.cause")   // signal, timeout
	AttrName    = attribute.Key("redislock.name")    // the lock's name, with WithLockName
	AttrToken   = attribute.Key("redislock.token")   // the fencing token (spans)
	AttrKey     = attribute.Key("redislock.key")     // the lock key (spans)
)

type config struct {
	mp       metric.MeterProvider
	tp       trace.TracerProvider
	withName bool
}

// An Option configures NewObserver.
type Option func(*config)

// WithMeterProvider sets the meter provider; the default is the global one
// (otel.GetMeterProvider) at the time NewObserver runs.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider sets the tracer provider; the default is the global
// one (otel.GetTracerProvider) at the time NewObserver runs.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithLockName adds the lock's name to every metric as the attribute
// redislock.name. The default leaves it out: each name makes a time series
// of its own, so add it only when the names are few and fixed (not one
// per job or per document). Spans always carry it.
func WithLockName() Option {
	return func(c *config) { c.withName = true }
}

// observer records the events of the Locks it is given to.
type observer struct {
	tracer   trace.Tracer
	withName bool
	// sets holds the measurement options of every attribute combination
	// known in advance, built once, so that recording allocates nothing
	// for them; read-only after NewObserver. Empty with WithLockName.
	sets map[attrPair]metric.MeasurementOption

	acquireDur metric.Float64Histogram
	holdDur    metric.Float64Histogram
	held       metric.Int64UpDownCounter
	lost       metric.Int64Counter
	extend     metric.Int64Counter
	wakeups    metric.Int64Counter
	refused    metric.Int64Counter
}

// NewObserver returns a redislock.Observer that records OpenTelemetry
// metrics and spans on the given providers. Give it to every Lock with
// redislock.WithObserver; one Observer serves any number of Locks, from any
// goroutines. It fails only when the meter refuses an instrument.
//
// Metrics (durations in seconds):
//   - redislock.acquire.duration, histogram: from the start of Acquire or
//     TryAcquire to its end; attributes redislock.mode (blocking, try) and
//     redislock.result (acquired, busy, timeout, error).
//   - redislock.hold.duration, histogram: from the acquire to the end of
//     the hold, released or lost; attribute redislock.reason ("" when
//     released).
//   - redislock.held, up-down counter: holds of this process now.
//   - redislock.lost, counter: holds lost; attribute redislock.reason
//     (expired, taken_over, unreachable, max_hold, not_expirable,
//     abandoned: a Lock dropped while holding, and collected).
//   - redislock.extend, counter: extends of the key; attributes
//     redislock.renewal (auto, manual) and redislock.result (extended,
//     expired, taken_over, not_expirable, canceled: a renewal stopped by
//     Release, error).
//   - redislock.wakeups, counter: returns of a waiter's BLPOP; attribute
//     redislock.cause (signal, timeout).
//   - redislock.watch.refused, counter: holds whose key watch Redis
//     refused (tracking unknown or denied: see redislock.Check); their
//     loss is found by renewal or the local deadline only.
//
// Spans, of kind internal: redislock.acquire, redislock.release and
// redislock.extend, with the lock's name and key, the result, and the
// fencing token of an acquire; a result of error sets the span's status to
// Error. go-redis's own command spans (redisotel) nest under them.
func NewObserver(opts ...Option) (*redislock.Observer, error) {
	c := config{}
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	meter := c.mp.Meter(ScopeName)
	o := &observer{tracer: c.tp.Tracer(ScopeName), withName: c.withName}
	var err, e error
	o.acquireDur, e = meter.Float64Histogram("redislock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the start of an acquire to its end."))
	err = first(err, e)
	o.holdDur, e = meter.Float64Histogram("redislock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a lock was held, from its acquire to its release or loss."))
	err = first(err, e)
	o.held, e = meter.Int64UpDownCounter("redislock.held", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks held by this process now."))
	err = first(err, e)
	o.lost, e = meter.Int64Counter("redislock.lost", metric.WithUnit("{lock}"),
		metric.WithDescription("Holds lost before their release."))
	err = first(err, e)
	o.extend, e = meter.Int64Counter("redislock.extend", metric.WithUnit("{extend}"),
		metric.WithDescription("Extends of a lock's key, by renewal or by hand."))
	err = first(err, e)
	o.wakeups, e = meter.Int64Counter("redislock.wakeups", metric.WithUnit("{wakeup}"),
		metric.WithDescription("Returns of a waiter's BLPOP, by a release's signal or the end of its slice."))
	err = first(err, e)
	o.refused, e = meter.Int64Counter("redislock.watch.refused", metric.WithUnit("{lock}"),
		metric.WithDescription("Holds whose key watch Redis refused: their loss is found by renewal or the local deadline."))
	err = first(err, e)
	if err != nil {
		return nil, fmt.Errorf("redislockotel: %w", err)
	}
	if !o.withName {
		o.sets = map[attrPair]metric.MeasurementOption{}
		add := func(kvs ...attribute.KeyValue) {
			p := attrPair{}
			if len(kvs) > 0 {
				p.a = kvs[0]
			}
			if len(kvs) > 1 {
				p.b = kvs[1]
			}
			o.sets[p] = metric.WithAttributeSet(attribute.NewSet(kvs...))
		}
		add() // no attribute: redislock.held
		for _, m := range []bool{true, false} {
			for _, r := range []redislock.Outcome{redislock.OutcomeAcquired, redislock.OutcomeBusy, redislock.OutcomeTimeout, redislock.OutcomeError} {
				add(mode(m), AttrResult.String(string(r)))
			}
			for _, r := range []redislock.Outcome{redislock.OutcomeExtended, redislock.OutcomeExpired, redislock.OutcomeTakenOver, redislock.OutcomeNotExpirable, redislock.OutcomeCanceled, redislock.OutcomeError} {
				add(renewal(m), AttrResult.String(string(r)))
			}
		}
		for _, w := range []bool{true, false} {
			add(cause(w))
		}
		for _, r := range []redislock.Outcome{redislock.OutcomeReleased, redislock.OutcomeExpired, redislock.OutcomeTakenOver, redislock.OutcomeUnreachable, redislock.OutcomeMaxHold, redislock.OutcomeNotExpirable, redislock.OutcomeAbandoned, redislock.OutcomeError} {
			add(reason(r))
		}
	}
	return &redislock.Observer{
		AcquireStart: o.AcquireStart, AcquireEnd: o.AcquireEnd, Wakeup: o.Wakeup,
		ReleaseStart: o.ReleaseStart, ReleaseEnd: o.ReleaseEnd,
		ExtendStart: o.ExtendStart, ExtendEnd: o.ExtendEnd,
		HoldEnd: o.HoldEnd, WatchRefused: o.WatchRefused,
	}, nil
}

// attrPair is the key of a precomputed attribute set: up to two
// attributes, the second zero when there is one.
type attrPair struct{ a, b attribute.KeyValue }

func first(err, e error) error {
	if err != nil {
		return err
	}
	return e
}

// spanKey is the context key of an observer's span: one per Observer, so
// that another observer's span in the same context is never ended in its
// place.
type spanKey struct{ o *observer }

func (o *observer) start(ctx context.Context, name string, in redislock.Event, attrs ...attribute.KeyValue) context.Context {
	attrs = append(attrs, AttrName.String(in.Name), AttrKey.String(in.Key))
	ctx, span := o.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, spanKey{o}, span)
}

func (o *observer) end(ctx context.Context, result string, err error, attrs ...attribute.KeyValue) {
	span, ok := ctx.Value(spanKey{o}).(trace.Span)
	if !ok {
		return
	}
	span.SetAttributes(append(attrs, AttrResult.String(result))...)
	if result == string(redislock.OutcomeError) && err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// set returns the measurement option for the attributes a and b (either
// may be the zero KeyValue: none), with the lock's name when asked.
func (o *observer) set(in redislock.Event, a, b attribute.KeyValue) metric.MeasurementOption {
	if opt, ok := o.sets[attrPair{a, b}]; ok {
		return opt
	}
	attrs := make([]attribute.KeyValue, 0, 3)
	for _, kv := range []attribute.KeyValue{a, b} {
		if kv.Key != "" {
			attrs = append(attrs, kv)
		}
	}
	if o.withName {
		attrs = append(attrs, AttrName.String(in.Name))
	}
	return metric.WithAttributes(attrs...)
}

var none attribute.KeyValue

func mode(blocking bool) attribute.KeyValue {
	if blocking {
		return AttrMode.String("blocking")
	}
	return AttrMode.String("try")
}

// cause is a wake-up's: a release's signal, or the end of its slice.
func cause(woken bool) attribute.KeyValue {
	if woken {
		return AttrCause.String("signal")
	}
	return AttrCause.String("timeout")
}

// reason is why a hold with outcome o ended: "" when it was released.
func reason(o redislock.Outcome) attribute.KeyValue {
	if o == redislock.OutcomeReleased {
		return AttrReason.String("")
	}
	return AttrReason.String(string(o))
}

func renewal(auto bool) attribute.KeyValue {
	if auto {
		return AttrRenewal.String("auto")
	}
	return AttrRenewal.String("manual")
}

// AcquireStart opens the span redislock.acquire.
func (o *observer) AcquireStart(ctx context.Context, e redislock.Event) context.Context {
	return o.start(ctx, "redislock.acquire", e, mode(e.Blocking))
}

// AcquireEnd records redislock.acquire.duration and, for a hold that
// starts, redislock.held.
func (o *observer) AcquireEnd(ctx context.Context, e redislock.Event) {
	o.acquireDur.Record(ctx, e.Wait.Seconds(), o.set(e, mode(e.Blocking), AttrResult.String(string(e.Outcome))))
	if e.Outcome == redislock.OutcomeAcquired {
		o.held.Add(ctx, 1, o.set(e, none, none))
		o.end(ctx, string(e.Outcome), e.Err, AttrToken.Int64(e.Token))
		return
	}
	o.end(ctx, string(e.Outcome), e.Err)
}

// Wakeup counts redislock.wakeups.
func (o *observer) Wakeup(ctx context.Context, e redislock.Event) {
	o.wakeups.Add(ctx, 1, o.set(e, cause(e.Woken), none))
}

// ReleaseStart opens the span redislock.release.
func (o *observer) ReleaseStart(ctx context.Context, e redislock.Event) context.Context {
	return o.start(ctx, "redislock.release", e)
}

// ReleaseEnd ends it.
func (o *observer) ReleaseEnd(ctx context.Context, e redislock.Event) {
	o.end(ctx, string(e.Outcome), e.Err)
}

// ExtendStart opens the span redislock.extend.
func (o *observer) ExtendStart(ctx context.Context, e redislock.Event) context.Context {
	return o.start(ctx, "redislock.extend", e, renewal(e.Auto))
}

// ExtendEnd counts redislock.extend and ends the span.
func (o *observer) ExtendEnd(ctx context.Context, e redislock.Event) {
	o.extend.Add(ctx, 1, o.set(e, renewal(e.Auto), AttrResult.String(string(e.Outcome))))
	o.end(ctx, string(e.Outcome), e.Err)
}

// HoldEnd records redislock.hold.duration and redislock.held, and counts
// redislock.lost for a loss.
func (o *observer) HoldEnd(e redislock.Event) {
	ctx := context.Background()
	o.holdDur.Record(ctx, e.Held.Seconds(), o.set(e, reason(e.Outcome), none))
	o.held.Add(ctx, -1, o.set(e, none, none))
	if e.Outcome != redislock.OutcomeReleased {
		o.lost.Add(ctx, 1, o.set(e, reason(e.Outcome), none))
	}
}

// WatchRefused counts redislock.watch.refused.
func (o *observer) WatchRefused(e redislock.Event) {
	o.refused.Add(context.Background(), 1, o.set(e, none, none))
}
