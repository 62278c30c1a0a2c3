package oteltrace_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/contrib/oteltrace"
	"github.com/tesserix/idempotency/interceptor"
)

func recorder(t *testing.T) (*tracetest.SpanRecorder, trace.Tracer) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return sr, tp.Tracer("test")
}

func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func eventNames(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, e.Name)
	}
	return out
}

const key = "v1:7ee5000558eb4e3cc8a201c7640c076d7dd6c89de7e5cc7e68e6ad34bb876c51"

func TestWaitedThenDeduplicated(t *testing.T) {
	t.Parallel()
	sr, tracer := recorder(t)
	var forwarded []interceptor.EventKind
	o := oteltrace.New(interceptor.ObserverFunc(func(_ context.Context, e interceptor.Event) { forwarded = append(forwarded, e.Kind) }))
	ctx, span := tracer.Start(context.Background(), "RunActivity:Book")
	base := interceptor.Event{Activity: "Book", ActivityKind: activity.KindEffectful, Tenant: "acme", Key: key}
	for _, e := range []interceptor.Event{
		{Kind: interceptor.EventWaiting},
		{Kind: interceptor.EventWaited, Duration: 1500 * time.Millisecond},
		{Kind: interceptor.EventWaiting},
		{Kind: interceptor.EventWaited, Duration: 500 * time.Millisecond},
		{Kind: interceptor.EventDeduplicated, Duration: 2 * time.Second},
	} {
		e.Activity, e.ActivityKind, e.Tenant, e.Key = base.Activity, base.ActivityKind, base.Tenant, base.Key
		o.Observe(ctx, e)
	}
	span.End()

	require.Len(t, sr.Ended(), 1)
	s := sr.Ended()[0]
	a := attrs(s.Attributes())
	assert.Equal(t, key, a[oteltrace.AttrKey].AsString(), "the key's digest")
	assert.Equal(t, "deduplicated", a[oteltrace.AttrOutcome].AsString())
	assert.Equal(t, "EFFECTFUL", a[oteltrace.AttrKind].AsString())
	assert.Equal(t, int64(2000), a[oteltrace.AttrWaitedMS].AsInt64(), "the waits, summed")
	assert.Equal(t, []string{"idempotency.waiting", "idempotency.waited", "idempotency.waiting", "idempotency.waited", "idempotency.deduplicated"}, eventNames(s))
	assert.Equal(t, int64(1500), attrs(s.Events()[1].Attributes)[oteltrace.AttrDuration].AsInt64())
	assert.Equal(t, []interceptor.EventKind{interceptor.EventWaiting, interceptor.EventWaited, interceptor.EventWaiting,
		interceptor.EventWaited, interceptor.EventDeduplicated}, forwarded, "every event reaches the next observer")
}

// An indeterminate outcome names its reason; the error's message, which
// may quote a downstream's words about the arguments, is never added.
func TestIndeterminateNeverTheMessage(t *testing.T) {
	t.Parallel()
	sr, tracer := recorder(t)
	o := oteltrace.New(nil)
	ctx, span := tracer.Start(context.Background(), "RunActivity:Book")
	o.Observe(ctx, interceptor.Event{Kind: interceptor.EventClaimed, Activity: "Book", Key: key, Duration: 3 * time.Millisecond})
	o.Observe(ctx, interceptor.Event{Kind: interceptor.EventProbeUnsettled, Activity: "Book", Key: key, Reason: activity.ReasonBodyFailed})
	o.Observe(ctx, interceptor.Event{Kind: interceptor.EventIndeterminate, Activity: "Book", Key: key,
		Reason: activity.ReasonBodyFailed, Err: assert.AnError})
	span.End()
	s := sr.Ended()[0]
	a := attrs(s.Attributes())
	assert.Equal(t, "indeterminate", a[oteltrace.AttrOutcome].AsString())
	assert.Equal(t, "body_failed", a[oteltrace.AttrReason].AsString())
	assert.Equal(t, []string{"idempotency.claimed", "idempotency.probe_unsettled", "idempotency.indeterminate"}, eventNames(s))
	for _, e := range s.Events() {
		for _, kv := range e.Attributes {
			assert.NotContains(t, kv.Value.String(), assert.AnError.Error())
		}
	}
	for _, kv := range s.Attributes() {
		assert.NotContains(t, kv.Value.String(), assert.AnError.Error())
	}
}

// Without a recording span nothing is added, and the next observer still
// hears everything.
func TestNoSpan(t *testing.T) {
	t.Parallel()
	n := 0
	o := oteltrace.New(interceptor.ObserverFunc(func(context.Context, interceptor.Event) { n++ }))
	o.Observe(context.Background(), interceptor.Event{Kind: interceptor.EventClaimed, Key: key})
	assert.Equal(t, 1, n)
}
