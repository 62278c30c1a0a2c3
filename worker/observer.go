package worker

import (
	"context"
	"log/slog"
	"sync/atomic"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
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
//
// A store that goes away is reported once per change of state, not once per
// failed call: the first store error after the store last answered logs at
// warn, the ones after it at debug, and the first answer after them logs
// "idempotency: store answers again" at info.
func ZapObserver(z *zap.Logger) interceptor.Observer {
	var state storeState
	return interceptor.ObserverFunc(func(_ context.Context, e interceptor.Event) {
		lvl := state.level(e.Kind, eventLevel(e.Kind))
		if state.recovered(e.Kind) {
			z.Info("idempotency: store answers again", zap.String("activity", e.Activity), zap.String("tenant", e.Tenant))
		}
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
		interceptor.EventProbeLanded, interceptor.EventProbeNotLanded,
		interceptor.EventNotRun: // the store errors before it already warned

		return zapcore.InfoLevel
	case interceptor.EventTakenOver, interceptor.EventStoreError, interceptor.EventSuperseded,
		interceptor.EventProbeUnsettled, interceptor.EventProbeLate, interceptor.EventLeaseLapsed,
		interceptor.EventTenantIgnored:
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

// SDKLogObserver returns an observer that logs each dispatcher event, with
// the fields and at the levels [ZapObserver] uses, through the logger the
// worker already has: the SDK's logger of the activity the event is about
// (activity.GetLogger, which carries the activity's own fields), or
// fallback for an event reported outside an activity (a workflow's
// decision, a refused request of the library's own activities). A nil
// fallback drops those. [NewPlugin] and [New] install it when no zap
// logger is given, so events reach the client's logger
// (client.Options.Logger, or the SDK's default) instead of vanishing.
func SDKLogObserver(fallback log.Logger) interceptor.Observer {
	var state storeState
	return interceptor.ObserverFunc(func(ctx context.Context, e interceptor.Event) {
		logger := fallback
		if sdkactivity.IsActivity(ctx) {
			logger = sdkactivity.GetLogger(ctx)
		}
		if logger == nil {
			return
		}
		lvl := state.level(e.Kind, eventLevel(e.Kind))
		if state.recovered(e.Kind) {
			logger.Info("idempotency: store answers again", "activity", e.Activity, "tenant", e.Tenant)
		}
		kv := []any{"activity", e.Activity, "idempotency_kind", e.ActivityKind.String(), "tenant", e.Tenant, "key", e.Key,
			"workflow_id", e.WorkflowID, "run_id", e.RunID, "activity_id", e.ActivityID, "attempt", e.Attempt}
		if e.Reason != "" {
			kv = append(kv, "reason", string(e.Reason))
		}
		if e.Duration > 0 {
			kv = append(kv, "duration", e.Duration)
		}
		if e.Err != nil {
			kv = append(kv, "error", e.Err)
		}
		msg := "idempotency: " + e.Kind.String()
		switch lvl {
		case zapcore.ErrorLevel:
			logger.Error(msg, kv...)
		case zapcore.WarnLevel:
			logger.Warn(msg, kv...)
		case zapcore.InfoLevel:
			logger.Info(msg, kv...)
		default:
			logger.Debug(msg, kv...)
		}
	})
}

// SlogObserver returns an observer that logs each dispatcher event
// through s, with the fields and at the levels [ZapObserver] uses (zap's
// levels as slog's: debug, info, warn, error), and the store's outages once
// per change of state, as it does: for a worker that logs with log/slog
// and builds no zap logger. [NewPlugin] and [New] install it when
// PluginOptions.Slog (Options.Slog) is set. The event's context is handed
// to the handler, so a handler that reads a trace from it finds the
// activity's.
func SlogObserver(s *slog.Logger) interceptor.Observer {
	var state storeState
	return interceptor.ObserverFunc(func(ctx context.Context, e interceptor.Event) {
		if ctx == nil {
			ctx = context.Background()
		}
		lvl := slogLevel(state.level(e.Kind, eventLevel(e.Kind)))
		if state.recovered(e.Kind) {
			s.LogAttrs(ctx, slog.LevelInfo, "idempotency: store answers again", slog.String("activity", e.Activity), slog.String("tenant", e.Tenant))
		}
		if !s.Enabled(ctx, lvl) {
			return
		}
		attrs := []slog.Attr{
			slog.String("activity", e.Activity),
			slog.String("idempotency_kind", e.ActivityKind.String()),
			slog.String("tenant", e.Tenant),
			slog.String("key", e.Key),
			slog.String("workflow_id", e.WorkflowID),
			slog.String("run_id", e.RunID),
			slog.String("activity_id", e.ActivityID),
			slog.Int("attempt", int(e.Attempt)),
		}
		if e.Reason != "" {
			attrs = append(attrs, slog.String("reason", string(e.Reason)))
		}
		if e.Duration > 0 {
			attrs = append(attrs, slog.Duration("duration", e.Duration))
		}
		if e.Err != nil {
			attrs = append(attrs, slog.Any("error", e.Err))
		}
		s.LogAttrs(ctx, lvl, "idempotency: "+e.Kind.String(), attrs...)
	})
}

// slogLevel is zap's level as slog's.
func slogLevel(l zapcore.Level) slog.Level {
	switch l {
	case zapcore.ErrorLevel:
		return slog.LevelError
	case zapcore.WarnLevel:
		return slog.LevelWarn
	case zapcore.InfoLevel:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// storeState follows whether the store answers, as an observer sees it, so
// that a store that goes away is logged once per change of state.
type storeState struct{ down atomic.Bool }

// level is the level to log an event of kind at: a store error while the
// store is known down is demoted to debug.
func (s *storeState) level(kind interceptor.EventKind, lvl zapcore.Level) zapcore.Level {
	if kind == interceptor.EventStoreError && s.down.Swap(true) {
		return zapcore.DebugLevel
	}
	return lvl
}

// recovered reports whether an event of kind is the first answer of the
// store after it was down.
func (s *storeState) recovered(kind interceptor.EventKind) bool {
	switch kind {
	case interceptor.EventClaimed, interceptor.EventDeduplicated, interceptor.EventCompleted,
		interceptor.EventReleased, interceptor.EventWaited:
		return s.down.Swap(false)
	}
	return false
}
