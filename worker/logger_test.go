package worker_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tesserix/idempotency/worker"
)

func TestNewLogger(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		log    func(l log.Logger)
		level  zapcore.Level
		msg    string
		fields map[string]any
	}{
		{"Debug", func(l log.Logger) { l.Debug("polling", "task_queue", "bookings") }, zapcore.DebugLevel, "polling", map[string]any{"task_queue": "bookings"}},
		{"Info", func(l log.Logger) { l.Info("started", "workers", 2, "ok", true) }, zapcore.InfoLevel, "started", map[string]any{"workers": int64(2), "ok": true}},
		{"Warn", func(l log.Logger) { l.Warn("slow") }, zapcore.WarnLevel, "slow", map[string]any{}},
		{"Error", func(l log.Logger) { l.Error("failed", "Error", "boom") }, zapcore.ErrorLevel, "failed", map[string]any{"Error": "boom"}},
		{"OddKeyvals", func(l log.Logger) { l.Info("odd", "a", 1, "dangling") }, zapcore.InfoLevel, "odd", map[string]any{"a": int64(1), "dangling": "(missing value)"}},
		{"NonStringKey", func(l log.Logger) { l.Info("key", 42, "v") }, zapcore.InfoLevel, "key", map[string]any{"42": "v"}},
		{"With", func(l log.Logger) { l.(log.WithLogger).With("namespace", "default").Info("hello", "x", "y") }, zapcore.InfoLevel, "hello", map[string]any{"namespace": "default", "x": "y"}},
		{"WithCallerSkip", func(l log.Logger) { l.(log.WithSkipCallers).WithCallerSkip(1).Warn("skipped", "k", "v") }, zapcore.WarnLevel, "skipped", map[string]any{"k": "v"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zapcore.DebugLevel)
			tt.log(worker.NewLogger(zap.New(core)))
			entries := logs.All()
			require.Len(t, entries, 1)
			e := entries[0]
			assert.Equal(t, tt.level, e.Level)
			assert.Equal(t, tt.msg, e.Message)
			assert.Equal(t, tt.fields, e.ContextMap())
		})
	}
}

func TestNewLoggerRespectsLevel(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.WarnLevel)
	l := worker.NewLogger(zap.New(core))
	l.Debug("no")
	l.Info("no")
	l.Warn("yes")
	assert.Equal(t, 1, logs.Len())
}

func TestNewLoggerCaller(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	worker.NewLogger(zap.New(core, zap.AddCaller())).Info("here")
	require.Equal(t, 1, logs.Len())
	caller := logs.All()[0].Caller
	require.True(t, caller.Defined)
	assert.Contains(t, caller.File, "logger_test.go", "the caller is the code that logged, not the bridge")
}
