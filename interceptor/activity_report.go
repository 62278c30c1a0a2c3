package interceptor

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor/metricname"
)

// reporter reports what happens to one call: its events, to
// Options.Observer, and its metrics. Every event of the call starts from
// event, which holds the fields they share.
type reporter struct {
	opts    *Options
	metrics client.MetricsHandler
	event   Event
}

// endEvent reports the call's end state: an event of kind with Final set,
// and the metric, if any, counted with it.
func (r *reporter) endEvent(ctx context.Context, kind EventKind, metric string, err error) {
	e := r.event
	e.Kind, e.Err = kind, err
	r.end(ctx, e, metric)
}

// end reports e as the call's end state, with metric counted with it.
func (r *reporter) end(ctx context.Context, e Event, metric string) {
	if metric != "" {
		r.count(metric)
	}
	e.Final = true
	r.emit(ctx, e)
}

// superseded reports that the claim was taken over while the body, its
// commit or its probe ran (err is the store's answer that said so); final
// says whether it is the call's end state — an EFFECTFUL body stopped
// half-way ends indeterminate instead.
func (r *reporter) superseded(ctx context.Context, err error, final bool) {
	if final {
		r.endEvent(ctx, EventSuperseded, metricname.Superseded, err)
		return
	}
	r.count(metricname.Superseded)
	r.observe(ctx, EventSuperseded, err)
}

// orphaned reports a claim the store could not settle when the call ended;
// final says whether it is the call's end state.
func (r *reporter) orphaned(ctx context.Context, err error, final bool) {
	e := r.event
	e.Kind, e.Err, e.Final = EventOrphaned, err, final
	r.count(metricname.Orphaned)
	r.emit(ctx, e)
}

// waited reports the end of a wait for another holder, with how long it
// took.
func (r *reporter) waited(ctx context.Context, d time.Duration) {
	e := r.event
	e.Kind, e.Duration = EventWaited, d
	r.emit(ctx, e)
}

// probed reports what a probe settled.
func (r *reporter) probed(ctx context.Context, kind EventKind, metric string, reason activity.Reason, err error) {
	r.count(metric)
	e := r.event
	e.Kind, e.Reason, e.Err = kind, reason, err
	r.emit(ctx, e)
}

func (r *reporter) storeError(ctx context.Context, err error) {
	r.count(metricname.StoreErrors)
	r.observe(ctx, EventStoreError, err)
}

func (r *reporter) count(name string) { r.metrics.Counter(name).Inc(1) }

func (r *reporter) observe(ctx context.Context, kind EventKind, err error) {
	e := r.event
	e.Kind, e.Err = kind, err
	r.emit(ctx, e)
}

func (r *reporter) emit(ctx context.Context, e Event) {
	if r.opts.Observer != nil {
		r.opts.Observer.Observe(ctx, e)
	}
}
