package worker

import (
	"context"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tesserix/idempotency/interceptor"
)

// ZapObserver returns an observer that logs each dispatcher event through z
// with the tenant, key, activity, workflow and run IDs — never the
// arguments or the result. Deduplications, waits and outcomes a probe
// settled log at info; take-overs, store errors, superseded bodies and
// probes that settled nothing at warn; indeterminate and orphaned outcomes
// at error; the rest at debug.
func ZapObserver(z *zap.Logger) interceptor.Observer {
	return interceptor.ObserverFunc(func(_ context.Context, e interceptor.Event) {
		lvl := eventLevel(e.Kind)
		ce := z.Check(lvl, "idempotency: "+e.Kind.String())
		if ce == nil {
			return
		}
		fs := []zap.Field{
			zap.String("activity", e.Activity),
			zap.Stringer("idempotency_kind", e.ActivityKind),
			zap.String("tenant", e.Tenant),
			zap.String("key", e.Key),
			zap.String("workflow_id", e.WorkflowID),
			zap.String("run_id", e.RunID),
			zap.String("activity_id", e.ActivityID),
			zap.Int32("attempt", e.Attempt),
		}
		if e.Reason != "" {
			fs = append(fs, zap.String("reason", string(e.Reason)))
		}
		if e.Duration > 0 {
			fs = append(fs, zap.Duration("duration", e.Duration))
		}
		if e.Err != nil {
			fs = append(fs, zap.Error(e.Err))
		}
		ce.Write(fs...)
	})
}

func eventLevel(k interceptor.EventKind) zapcore.Level {
	switch k {
	case interceptor.EventDeduplicated, interceptor.EventWaiting,
		interceptor.EventProbeLanded, interceptor.EventProbeNotLanded:
		return zapcore.InfoLevel
	case interceptor.EventTakenOver, interceptor.EventStoreError, interceptor.EventSuperseded,
		interceptor.EventProbeUnsettled, interceptor.EventProbeLate, interceptor.EventLeaseLapsed:
		return zapcore.WarnLevel
	case interceptor.EventIndeterminate, interceptor.EventOrphaned, interceptor.EventMisconfigured,
		interceptor.EventArgumentsMismatch:
		return zapcore.ErrorLevel
	default:
		return zapcore.DebugLevel
	}
}

// Observers returns an observer that hands each event to every one of obs
// in order, skipping nil ones.
func Observers(obs ...interceptor.Observer) interceptor.Observer {
	return interceptor.ObserverFunc(func(ctx context.Context, e interceptor.Event) {
		for _, o := range obs {
			if o != nil {
				o.Observe(ctx, e)
			}
		}
	})
}
