package worker_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// A worker whose Redis does not answer refuses to start, with one error
// naming the address, instead of starting and failing every declared call
// (a dial line per attempt) while Redis stays away.
func TestWorkerRefusesToStartWithoutItsStore(t *testing.T) {
	t.Parallel()
	addr := closedAddr(t)
	rc := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	st, err := redisstore.New(rc, redisstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	w := newWorker(t, worker.Options{Idempotency: interceptor.Options{Store: st}})
	err = w.Start()
	require.Error(t, err)
	assert.ErrorIs(t, err, store.ErrUnavailable)
	assert.Contains(t, err.Error(), "Redis at "+addr+" does not answer")
	w.Stop()

	// Its Ping answers once Redis is there.
	var p store.Pinger = st
	assert.Error(t, p.Ping(context.Background()))
}

// A store that goes away is logged once per change of state: the first
// store error at warn, the rest at debug, the first answer after them at
// info — not a warning per failed call.
func TestStoreOutageLoggedOncePerState(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	o := worker.ZapObserver(zap.New(core))
	emit := func(kinds ...interceptor.EventKind) {
		for _, k := range kinds {
			o.Observe(context.Background(), sampleEvent(k))
		}
	}
	emit(interceptor.EventStoreError, interceptor.EventStoreError, interceptor.EventStoreError,
		interceptor.EventClaimed, interceptor.EventCompleted,
		interceptor.EventStoreError, interceptor.EventStoreError)
	count := func(msg string, lvl zapcore.Level) int {
		return logs.Filter(func(e observer.LoggedEntry) bool { return e.Message == msg && e.Level == lvl }).Len()
	}
	assert.Equal(t, 2, count("idempotency: store_error", zapcore.WarnLevel), "once per outage")
	assert.Equal(t, 3, count("idempotency: store_error", zapcore.DebugLevel))
	assert.Equal(t, 1, count("idempotency: store answers again", zapcore.InfoLevel))
}
