package oteltrace

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tesserix/idempotency/interceptor"
)

// The attribute keys the observer sets.
const (
	AttrActivity = attribute.Key("idempotency.activity")
	AttrKind     = attribute.Key("idempotency.kind")
	AttrKey      = attribute.Key("idempotency.key")
	AttrOutcome  = attribute.Key("idempotency.outcome")
	AttrReason   = attribute.Key("idempotency.reason")
	AttrWaitedMS = attribute.Key("idempotency.waited_ms")
	AttrDuration = attribute.Key("idempotency.duration_ms")
)

// maxTracked bounds the executions whose waits are being summed at once.
const maxTracked = 100000

// EventPrefix opens the name of every span event the observer adds.
const EventPrefix = "idempotency."

// Observer is an [interceptor.Observer] that adds the dispatcher's reports
// to the span current in each report's context; see the package
// documentation. It is safe for concurrent use.
type Observer struct {
	next interceptor.Observer
	// waited sums the waits of one span's execution, by span.
	mu     sync.Mutex
	waited map[trace.SpanID]time.Duration
}

var _ interceptor.Observer = (*Observer)(nil)

// New returns an Observer that calls next (if not nil) after it has
// annotated the span.
func New(next interceptor.Observer) *Observer {
	return &Observer{next: next, waited: map[trace.SpanID]time.Duration{}}
}

// Observe implements [interceptor.Observer].
func (o *Observer) Observe(ctx context.Context, e interceptor.Event) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		o.annotate(span, e)
	}
	if o.next != nil {
		o.next.Observe(ctx, e)
	}
}

// outcomes are the event kinds that say how the call went (the others —
// waiting, store errors — say what happened on the way).
var outcomes = map[interceptor.EventKind]bool{
	interceptor.EventClaimed: true, interceptor.EventDeduplicated: true, interceptor.EventWaited: true,
	interceptor.EventTakenOver: true, interceptor.EventCompleted: true, interceptor.EventReleased: true,
	interceptor.EventIndeterminate: true, interceptor.EventArgumentsMismatch: true,
	interceptor.EventProbeLanded: true, interceptor.EventProbeNotLanded: true,
	interceptor.EventProbeUnsettled: true, interceptor.EventProbeLate: true,
	interceptor.EventSuperseded: true, interceptor.EventOrphaned: true, interceptor.EventMisconfigured: true,
	interceptor.EventNotRun: true,
}

func (o *Observer) annotate(span trace.Span, e interceptor.Event) {
	attrs := []attribute.KeyValue{AttrActivity.String(e.Activity)}
	if e.ActivityKind != 0 {
		attrs = append(attrs, AttrKind.String(e.ActivityKind.String()))
	}
	if e.Key != "" {
		attrs = append(attrs, AttrKey.String(e.Key))
	}
	if e.Reason != "" {
		attrs = append(attrs, AttrReason.String(string(e.Reason)))
	}
	if outcomes[e.Kind] {
		attrs = append(attrs, AttrOutcome.String(e.Kind.String()))
	}
	span.SetAttributes(attrs...)

	event := attrs
	switch e.Kind {
	case interceptor.EventClaimed, interceptor.EventWaited:
		event = append(event, AttrDuration.Int64(e.Duration.Milliseconds()))
	case interceptor.EventDeduplicated:
		if e.Duration > 0 {
			event = append(event, AttrWaitedMS.Int64(e.Duration.Milliseconds()))
		}
	}
	if e.Kind == interceptor.EventWaited {
		id := span.SpanContext().SpanID()
		o.mu.Lock()
		if _, ok := o.waited[id]; !ok && len(o.waited) >= maxTracked {
			// Executions that ended without a last report (a worker
			// stopped mid-call) are forgotten rather than kept forever.
			clear(o.waited)
		}
		o.waited[id] += e.Duration
		total := o.waited[id]
		o.mu.Unlock()
		span.SetAttributes(AttrWaitedMS.Int64(total.Milliseconds()))
	}
	if e.Final {
		// The execution's last report: its waits are summed on the span.
		o.mu.Lock()
		delete(o.waited, span.SpanContext().SpanID())
		o.mu.Unlock()
	}
	span.AddEvent(EventPrefix+e.Kind.String(), trace.WithAttributes(event...))
}
