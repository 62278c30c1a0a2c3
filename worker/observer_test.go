package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/worker"
)

func sampleEvent(kind interceptor.EventKind) interceptor.Event {
	return interceptor.Event{
		Kind:         kind,
		Activity:     "Book",
		ActivityKind: activity.KindEffectful,
		Tenant:       "acme",
		Key:          "v1:abc",
		WorkflowID:   "wf",
		RunID:        "run",
		ActivityID:   "7",
		Attempt:      2,
	}
}

func TestZapObserverLevels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind  interceptor.EventKind
		level zapcore.Level
	}{
		{interceptor.EventClaimed, zapcore.DebugLevel},
		{interceptor.EventCompleted, zapcore.DebugLevel},
		{interceptor.EventReleased, zapcore.DebugLevel},
		{interceptor.EventDeduplicated, zapcore.InfoLevel},
		{interceptor.EventWaiting, zapcore.InfoLevel},
		{interceptor.EventTakenOver, zapcore.WarnLevel},
		{interceptor.EventStoreError, zapcore.WarnLevel},
		{interceptor.EventSuperseded, zapcore.WarnLevel},
		{interceptor.EventIndeterminate, zapcore.ErrorLevel},
		{interceptor.EventOrphaned, zapcore.ErrorLevel},
		{interceptor.EventProbeLanded, zapcore.InfoLevel},
		{interceptor.EventProbeNotLanded, zapcore.InfoLevel},
		{interceptor.EventProbeUnsettled, zapcore.WarnLevel},
		{interceptor.EventProbeLate, zapcore.WarnLevel},
		{interceptor.EventMisconfigured, zapcore.ErrorLevel},
		{interceptor.EventArgumentsMismatch, zapcore.ErrorLevel},
		{interceptor.EventWaited, zapcore.DebugLevel},
		{interceptor.EventLeaseLapsed, zapcore.WarnLevel},
		{interceptor.EventNotRun, zapcore.InfoLevel},
		{interceptor.EventTenantIgnored, zapcore.WarnLevel},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String(), func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zapcore.DebugLevel)
			worker.ZapObserver(zap.New(core)).Observe(context.Background(), sampleEvent(tt.kind))
			require.Equal(t, 1, logs.Len())
			e := logs.All()[0]
			assert.Equal(t, tt.level, e.Level)
			assert.Equal(t, "idempotency: "+tt.kind.String(), e.Message)
		})
	}
}

func TestZapObserverFields(t *testing.T) {
	t.Parallel()
	base := map[string]any{
		"activity":         "Book",
		"idempotency_kind": "EFFECTFUL",
		"tenant":           "acme",
		"key":              "v1:abc",
		"workflow_id":      "wf",
		"run_id":           "run",
		"activity_id":      "7",
		"attempt":          int32(2),
	}
	with := func(extra map[string]any) map[string]any {
		m := make(map[string]any, len(base)+len(extra))
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name  string
		edit  func(e *interceptor.Event)
		wants map[string]any
	}{
		{"Plain", func(*interceptor.Event) {}, base},
		{"Reason", func(e *interceptor.Event) { e.Reason = activity.ReasonHolderLost }, with(map[string]any{"reason": "holder_lost"})},
		{"Duration", func(e *interceptor.Event) { e.Duration = 1500 * time.Millisecond }, with(map[string]any{"duration": 1500 * time.Millisecond})},
		{"Error", func(e *interceptor.Event) { e.Err = errors.New("store down") }, with(map[string]any{"error": "store down"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zapcore.DebugLevel)
			e := sampleEvent(interceptor.EventIndeterminate)
			tt.edit(&e)
			worker.ZapObserver(zap.New(core)).Observe(context.Background(), e)
			require.Equal(t, 1, logs.Len())
			// Exactly these fields: the event's identifiers, never the
			// activity's arguments or its result.
			assert.Equal(t, tt.wants, logs.All()[0].ContextMap())
		})
	}
}

func TestZapObserverBelowLevel(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	obs := worker.ZapObserver(zap.New(core))
	obs.Observe(context.Background(), sampleEvent(interceptor.EventClaimed))
	assert.Zero(t, logs.Len(), "debug events are dropped at info")
	obs.Observe(context.Background(), sampleEvent(interceptor.EventDeduplicated))
	assert.Equal(t, 1, logs.Len())
}

func TestObservers(t *testing.T) {
	t.Parallel()
	var got []string
	rec := func(name string) interceptor.Observer {
		return interceptor.ObserverFunc(func(_ context.Context, e interceptor.Event) {
			got = append(got, name+":"+e.Kind.String())
		})
	}
	obs := worker.Observers(rec("a"), nil, rec("b"))
	obs.Observe(context.Background(), sampleEvent(interceptor.EventClaimed))
	obs.Observe(context.Background(), sampleEvent(interceptor.EventCompleted))
	assert.Equal(t, []string{"a:claimed", "b:claimed", "a:completed", "b:completed"}, got)

	assert.NotPanics(t, func() {
		worker.Observers().Observe(context.Background(), sampleEvent(interceptor.EventClaimed))
	})
}
