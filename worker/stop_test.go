package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkactivity "go.temporal.io/sdk/activity"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// hangingStore is the memory store whose first Complete fails as an
// unreachable store's does and whose later ones hang until their context
// ends, as a store that stopped answering does.
type hangingStore struct {
	store.Store
	calls    atomic.Int32
	inFlight atomic.Int32
	entered  chan struct{}
}

func (h *hangingStore) Complete(ctx context.Context, _ store.CompleteParams) error {
	if h.calls.Add(1) == 1 {
		return store.Unavailable("complete", errors.New("down"))
	}
	h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	select {
	case h.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// Stop ends the dispatcher's background work — here an outcome being
// recorded into a store that hangs — and waits for it, so nothing writes to
// a store the caller closes next.
func TestStopEndsBackgroundWork(t *testing.T) {
	t.Parallel()
	hs := &hangingStore{Store: memStore(t), entered: make(chan struct{}, 1)}
	w := newWorker(t, worker.Options{
		Idempotency: interceptor.Options{
			Store:          hs,
			Tenant:         func(context.Context, sdkactivity.Info) (string, bool) { return "acme", true },
			RecordAttempts: 1,
			OrphanRetry:    time.Hour,
			StoreTimeout:   time.Hour,
		},
	})
	b := &Bookings{}
	require.NoError(t, w.Register(activity.Effectful(b.Book, "flight")))

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(discard())
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{w.Interceptor()}})
	env.RegisterActivity(b.Book)
	_, err := env.ExecuteActivity(b.Book, BookRequest{Flight: "BA117"})
	require.NoError(t, err, "the result is returned although it could not be recorded")

	select {
	case <-hs.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the outcome was never retried in the background")
	}
	w.Stop()
	assert.Zero(t, hs.inFlight.Load(), "Stop returned with a background store call still running")
}
