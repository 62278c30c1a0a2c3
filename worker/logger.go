package worker

import (
	"fmt"

	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
)

// NewLogger bridges z to the SDK's log.Logger, so the Temporal worker and
// this library log through the same sink. Key-value pairs become zap fields.
func NewLogger(z *zap.Logger) log.Logger {
	return &zapLogger{z: z.WithOptions(zap.AddCallerSkip(1))}
}

type zapLogger struct{ z *zap.Logger }

var (
	_ log.Logger          = (*zapLogger)(nil)
	_ log.WithLogger      = (*zapLogger)(nil)
	_ log.WithSkipCallers = (*zapLogger)(nil)
)

func (l *zapLogger) Debug(msg string, keyvals ...any) { l.z.Debug(msg, fields(keyvals)...) }
func (l *zapLogger) Info(msg string, keyvals ...any)  { l.z.Info(msg, fields(keyvals)...) }
func (l *zapLogger) Warn(msg string, keyvals ...any)  { l.z.Warn(msg, fields(keyvals)...) }
func (l *zapLogger) Error(msg string, keyvals ...any) { l.z.Error(msg, fields(keyvals)...) }

func (l *zapLogger) With(keyvals ...any) log.Logger {
	return &zapLogger{z: l.z.With(fields(keyvals)...)}
}

func (l *zapLogger) WithCallerSkip(depth int) log.Logger {
	return &zapLogger{z: l.z.WithOptions(zap.AddCallerSkip(depth))}
}

func fields(keyvals []any) []zap.Field {
	fs := make([]zap.Field, 0, (len(keyvals)+1)/2)
	for i := 0; i < len(keyvals); i += 2 {
		key, ok := keyvals[i].(string)
		if !ok {
			key = fmt.Sprint(keyvals[i])
		}
		if i+1 == len(keyvals) {
			fs = append(fs, zap.Any(key, "(missing value)"))
			break
		}
		fs = append(fs, zap.Any(key, keyvals[i+1]))
	}
	return fs
}
