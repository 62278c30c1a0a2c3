package interceptor

import (
	"context"
	"sync/atomic"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
)

// activityOutbound makes the key of an EFFECTFUL execution travel with a
// timeout: it appends the execution's [activity.TimeoutMarker] as the last
// detail of every heartbeat — the dispatcher's own and the body's — and
// hides it from the body again (GetHeartbeatDetails, HasHeartbeatDetails),
// so the details the body records are its own, first and unchanged. A
// *temporal.TimeoutError carries the last heartbeat's details, and
// [activity.AsIndeterminate] reads the marker from it, on a workflow worker
// with or without the declarations.
type activityOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	marker atomic.Pointer[activity.TimeoutMarker] // nil: append nothing
}

var _ interceptor.ActivityOutboundInterceptor = (*activityOutbound)(nil)

// Init wraps the outbound interceptor of this execution.
func (a *activityInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	a.out = &activityOutbound{}
	a.out.Next = outbound
	return a.Next.Init(a.out)
}

// RecordHeartbeat appends the marker, if any, to details.
func (o *activityOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	if m := o.marker.Load(); m != nil {
		details = append(details[:len(details):len(details)], *m)
	}
	o.Next.RecordHeartbeat(ctx, details...)
}

// HasHeartbeatDetails answers as if no marker were there.
func (o *activityOutbound) HasHeartbeatDetails(ctx context.Context) bool {
	if !o.Next.HasHeartbeatDetails(ctx) {
		return false
	}
	_, n, ok := activity.LastDetailMarker(func(d ...any) error { return o.Next.GetHeartbeatDetails(ctx, d...) })
	return !ok || n > 1
}

// GetHeartbeatDetails decodes the details the body recorded, never the
// marker: with only the marker there, it answers as with none.
func (o *activityOutbound) GetHeartbeatDetails(ctx context.Context, d ...any) error {
	_, n, ok := activity.LastDetailMarker(func(p ...any) error { return o.Next.GetHeartbeatDetails(ctx, p...) })
	if !ok {
		return o.Next.GetHeartbeatDetails(ctx, d...)
	}
	if n == 1 {
		return temporal.ErrNoData
	}
	return o.Next.GetHeartbeatDetails(ctx, d[:min(len(d), n-1)]...)
}

// mark makes every heartbeat of the execution from now on carry the
// marker at stage and, with send, sends one, so that the marker is with
// Temporal before the attempt can time out. The SDK sends the first
// heartbeat of an attempt at once and batches the ones within its throttle
// interval after it: the one sent as the claim begins is the only call to
// the server this adds to an execution that waits for nobody. Entering the
// body sends none (a heartbeat may deliver a cancellation, and the body of
// an activity that does not heartbeat was never cancelled mid-way); the
// body's own heartbeats carry the stage. Local activities do not heartbeat.
// A transactional declaration carries no marker: its outcome is always in
// the record (its commit and its record are one), so its timeout is
// Temporal's own, never indeterminate, and a call made again answers from
// the record.
func (x *execution) mark(ctx context.Context, stage activity.Stage, send bool) {
	if x.out == nil || x.kind != activity.KindEffectful || x.decl.IsTransactional() || x.info.IsLocalActivity {
		return
	}
	x.out.marker.Store(&activity.TimeoutMarker{
		Version:  activity.TimeoutMarkerVersion,
		Activity: x.decl.Name(),
		Tenant:   x.tenant,
		Key:      x.key,
		Stage:    stage,
		Probe:    x.decl.Probe() != nil,
		// A decision on the timed-out call keeps them with the record
		// it makes on a gone key, as for any indeterminate outcome.
		Check:     string(x.check),
		Retention: x.decl.Retention(),
	})
	if send {
		sdkactivity.RecordHeartbeat(ctx)
	}
}
