package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// A recorded outcome goes through the worker's data converter, codecs
// included: what the store holds is what the codec made of the result, and
// the duplicate gets back exactly what the first caller returned.
func TestOutcomeGoesThroughTheCodec(t *testing.T) {
	t.Parallel()
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(),
		converter.NewZlibCodec(converter.ZlibCodecOptions{AlwaysEncode: true}))
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	logger := zaptest.NewLogger(t)
	c := server.NewClientWithOptions(worker.ClientOptions(client.Options{DataConverter: dc}, logger))
	queue := testenv.UniqueName("tq")
	events := &eventLog{}
	w, err := worker.New(c, queue, worker.Options{
		Worker:      workerOptions,
		Idempotency: interceptor.Options{Store: mem, DataConverter: dc, Observer: events},
		Logger:      logger,
	})
	require.NoError(t, err)
	a := &airline{ledger: newLedger(), hold: 200 * time.Millisecond}
	require.NoError(t, w.Register(activity.Effectful(a.Book, "flight")))
	w.RegisterWorkflow(TwoBookings)
	e := &env{t: t, client: c, worker: w, queue: queue, ledger: a.ledger, events: events}
	e.start()

	var results []string
	require.NoError(t, e.execute("acme", TwoBookings, &results, "BA117"))
	require.Len(t, results, 2)
	assert.Equal(t, results[0], results[1])
	assert.Equal(t, 1, a.ledger.Effects("BA117"))

	var key string
	events.mu.Lock()
	for _, ev := range events.events {
		if ev.Kind == interceptor.EventCompleted {
			key = ev.Key
		}
	}
	events.mu.Unlock()
	require.NotEmpty(t, key)
	rec, err := mem.Lookup(context.Background(), store.LookupParams{Tenant: "acme", Key: key})
	require.NoError(t, err)
	var stored commonpb.Payloads
	require.NoError(t, proto.Unmarshal(rec.Outcome, &stored))
	require.Len(t, stored.Payloads, 1)
	assert.Equal(t, "binary/zlib", string(stored.Payloads[0].Metadata[converter.MetadataEncoding]),
		"the record holds the codec's output, not the plain result")
	var decoded string
	require.NoError(t, dc.FromPayloads(&stored, &decoded))
	assert.Equal(t, results[0], decoded)
}
