package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// A running worker reclaims the records whose retention window has passed.
func TestWorkerSweepsExpiredRecords(t *testing.T) {
	t.Parallel()
	mem, err := store.NewMemory(store.MemoryOptions{TTL: 300 * time.Millisecond})
	require.NoError(t, err)
	logger := zaptest.NewLogger(t)
	c := newClient(server, worker.ClientOptions(client.Options{}, logger))
	queue := testenv.UniqueName("tq")
	w, err := worker.New(c, queue, worker.Options{
		Worker:        workerOptions,
		Idempotency:   interceptor.Options{Store: mem},
		Logger:        logger,
		SweepInterval: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	a := &airline{ledger: newLedger()}
	require.NoError(t, w.Register(activity.Effectful(a.Book, "flight")))
	w.RegisterWorkflow(OneBooking)
	e := &env{t: t, client: c, worker: w, queue: queue, ledger: a.ledger, events: &eventLog{}}
	e.start()

	var result string
	require.NoError(t, e.execute("acme", OneBooking, &result, "BA117", 10*time.Second, time.Second))
	require.Equal(t, 1, a.ledger.Effects("BA117"))
	require.Eventually(t, func() bool { return mem.Len() == 0 }, 10*time.Second, 20*time.Millisecond,
		"the expired record is swept")
}
