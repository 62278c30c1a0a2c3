package integration

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
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
	c := newClient(server, worker.ClientOptions(client.Options{DataConverter: dc}, logger))
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

// encryptedEncoding marks the payloads the encrypting codec made.
const encryptedEncoding = "binary/encrypted"

// encryptingCodec encrypts every payload with AES-GCM, as a team that keeps
// payloads confidential would. It is strict: it refuses to decode a payload
// it did not encrypt, so a payload that skipped it on the way out, or one
// decoded twice on the way in, fails loudly.
type encryptingCodec struct{ aead cipher.AEAD }

func newEncryptingCodec(t *testing.T) *encryptingCodec {
	t.Helper()
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	block, err := aes.NewCipher(key)
	require.NoError(t, err)
	aead, err := cipher.NewGCM(block)
	require.NoError(t, err)
	return &encryptingCodec{aead: aead}
}

func (c *encryptingCodec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		nonce := make([]byte, c.aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, err
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(encryptedEncoding)},
			Data:     c.aead.Seal(nonce, nonce, plain, nil),
		}
	}
	return out, nil
}

func (c *encryptingCodec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if enc := string(p.Metadata[converter.MetadataEncoding]); enc != encryptedEncoding {
			return nil, fmt.Errorf("strict codec: a payload with encoding %q was not encrypted by this codec", enc)
		}
		n := c.aead.NonceSize()
		if len(p.Data) < n {
			return nil, errors.New("strict codec: payload too short")
		}
		plain, err := c.aead.Open(nil, p.Data[:n], p.Data[n:], nil)
		if err != nil {
			return nil, fmt.Errorf("strict codec: %w", err)
		}
		out[i] = &commonpb.Payload{}
		if err := proto.Unmarshal(plain, out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// codecEnv is an airline env whose client encrypts payloads. withLibrary
// builds the client through worker.ClientOptions, which hands the client's
// converter to the library; without it the client is configured by hand
// (the propagator only), and the library is told nothing about the codec.
func codecEnv(t *testing.T, st store.Store, withLibrary bool, a *airline, opts interceptor.Options) *env {
	t.Helper()
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), newEncryptingCodec(t))
	logger := zaptest.NewLogger(t)
	copts := client.Options{DataConverter: dc}
	if withLibrary {
		copts = worker.ClientOptions(copts, logger)
	} else {
		copts.ContextPropagators = []workflow.ContextPropagator{interceptor.TenantPropagator()}
	}
	c := newClient(server, copts)
	queue := testenv.UniqueName("tq")
	events := &eventLog{}
	opts.Store, opts.Observer = st, events
	w, err := worker.New(c, queue, worker.Options{Worker: workerOptions, Idempotency: opts, Logger: logger})
	require.NoError(t, err)
	e := &env{t: t, client: c, worker: w, queue: queue, ledger: newLedger(), events: events}
	a.ledger = e.ledger
	require.NoError(t, w.Register(activity.Effectful(a.Book, "flight")))
	w.RegisterWorkflow(TwoBookings)
	w.RegisterWorkflow(OneBooking)
	e.start()
	return e
}

// startWorkflow starts wf under tenant "acme" and returns its run.
func (e *env) startWorkflow(ctx context.Context, wf any, args ...any) client.WorkflowRun {
	e.t.Helper()
	run, err := e.client.ExecuteWorkflow(interceptor.WithTenant(ctx, "acme"), client.StartWorkflowOptions{
		ID: testenv.UniqueName("wf"), TaskQueue: e.queue,
	}, wf, args...)
	require.NoError(e.t, err)
	return run
}

// requireNoPlaintextInHistory reads the run's history back from the server
// and fails if any event holds one of secrets in the clear, or if a
// completed activity's result did not go through the encrypting codec.
func requireNoPlaintextInHistory(t *testing.T, c client.Client, run client.WorkflowRun, secrets ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	completed := 0
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		raw, err := proto.Marshal(ev)
		require.NoError(t, err)
		for _, s := range secrets {
			assert.NotContainsf(t, string(raw), s, "event %d (%s) holds %q in the clear", ev.EventId, ev.EventType, s)
		}
		if attrs := ev.GetActivityTaskCompletedEventAttributes(); attrs != nil {
			completed++
			for _, p := range attrs.GetResult().GetPayloads() {
				assert.Equal(t, encryptedEncoding, string(p.Metadata[converter.MetadataEncoding]),
					"event %d: the activity's result went to history without the worker's codec", ev.EventId)
			}
		}
		if attrs := ev.GetMarkerRecordedEventAttributes(); attrs != nil && attrs.GetMarkerName() == "LocalActivity" {
			completed++
			result, ok := attrs.GetDetails()["result"]
			require.True(t, ok, "event %d: a local activity marker without a result", ev.EventId)
			for _, p := range result.GetPayloads() {
				assert.Equal(t, encryptedEncoding, string(p.Metadata[converter.MetadataEncoding]),
					"event %d: the local activity's result went to history without the worker's codec", ev.EventId)
			}
		}
	}
	assert.Positive(t, completed, "the history holds completed activities")
}

// completedKey returns the key of the outcome the dispatcher recorded.
func completedKey(t *testing.T, events *eventLog) string {
	t.Helper()
	events.mu.Lock()
	defer events.mu.Unlock()
	for _, ev := range events.events {
		if ev.Kind == interceptor.EventCompleted {
			return ev.Key
		}
	}
	t.Fatal("no outcome was recorded")
	return ""
}

// With an encrypting codec on the client and Options.DataConverter unset, a
// declared activity's result reaches the workflow's history encrypted, for
// the call that ran the body and for the duplicate answered from the store;
// and since the client was built through worker.ClientOptions, the library
// records it with the client's converter, so the store holds no plaintext
// either.
func TestDeclaredResultGoesThroughTheClientsCodec(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := codecEnv(t, st, true, &airline{hold: 200 * time.Millisecond}, interceptor.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		run := e.startWorkflow(ctx, TwoBookings, "BA117")
		var results []string
		require.NoError(t, run.Get(ctx, &results))
		require.Len(t, results, 2)
		assert.Equal(t, results[0], results[1], "the duplicate gets the first caller's answer")
		assert.True(t, strings.HasPrefix(results[0], "seat 1 on BA117"), results[0])
		assert.Equal(t, 1, e.ledger.Effects("BA117"))
		assert.Equal(t, 1, e.events.count(interceptor.EventDeduplicated), "one answer came from the store")

		requireNoPlaintextInHistory(t, e.client, run, "seat", "BA117")

		rec, err := st.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: completedKey(t, e.events)})
		require.NoError(t, err)
		require.NotEmpty(t, rec.Outcome)
		raw := fmt.Sprintf("%+v %s", rec, rec.Outcome)
		assert.NotContains(t, raw, "seat", "the store holds the result in the clear")
		assert.NotContains(t, raw, "BA117", "the store holds the result in the clear")
		var stored commonpb.Payloads
		require.NoError(t, proto.Unmarshal(rec.Outcome, &stored))
		require.Len(t, stored.Payloads, 1)
		assert.Equal(t, encryptedEncoding, string(stored.Payloads[0].Metadata[converter.MetadataEncoding]))
	})
}

// A client configured by hand, without worker.ClientOptions: the library is
// told nothing about the codec, yet the history still holds only what the
// worker's codec made of the results, and the duplicate decodes correctly.
func TestDeclaredResultGoesThroughTheWorkersCodecUnconfigured(t *testing.T) {
	t.Parallel()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	e := codecEnv(t, mem, false, &airline{hold: 200 * time.Millisecond}, interceptor.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := e.startWorkflow(ctx, TwoBookings, "BA117")
	var results []string
	require.NoError(t, run.Get(ctx, &results))
	require.Len(t, results, 2)
	assert.Equal(t, results[0], results[1])
	assert.True(t, strings.HasPrefix(results[0], "seat 1 on BA117"), results[0])
	assert.Equal(t, 1, e.ledger.Effects("BA117"))
	assert.Equal(t, 1, e.events.count(interceptor.EventDeduplicated))
	requireNoPlaintextInHistory(t, e.client, run, "seat", "BA117")
}

// TwoLocalBookings books one flight twice, one local activity after the
// other: the second is answered from the store.
func TwoLocalBookings(ctx workflow.Context, flight string) ([]string, error) {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second})
	out := make([]string, 2)
	for i := range out {
		req := BookRequest{Flight: flight, RequestID: fmt.Sprintf("req-%d", i+1)}
		if err := workflow.ExecuteLocalActivity(ctx, "Book", req).Get(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// A local activity's result is recorded in a marker of the history: it too
// goes through the client's codec, for the call that ran the body and for
// the duplicate answered from the store.
func TestDeclaredLocalActivityResultGoesThroughTheClientsCodec(t *testing.T) {
	t.Parallel()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	e := codecEnv(t, mem, true, &airline{}, interceptor.Options{})
	e.worker.RegisterWorkflow(TwoLocalBookings)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := e.startWorkflow(ctx, TwoLocalBookings, "BA117")
	var results []string
	require.NoError(t, run.Get(ctx, &results))
	require.Len(t, results, 2)
	assert.Equal(t, results[0], results[1])
	assert.Equal(t, "seat 1 on BA117 for req-1", results[0])
	assert.Equal(t, 1, e.ledger.Effects("BA117"))
	assert.Equal(t, 1, e.events.count(interceptor.EventDeduplicated))
	requireNoPlaintextInHistory(t, e.client, run, "seat", "BA117")

	rec, err := mem.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: completedKey(t, e.events)})
	require.NoError(t, err)
	assert.NotContains(t, string(rec.Outcome), "seat")
}

// With AwaitDecision, an EFFECTFUL call's result passes through the
// workflow-side router: a strict codec sees every payload decoded exactly
// once, on the call that succeeds and on the one a person completed.
func TestAwaitDecisionWithAStrictCodec(t *testing.T) {
	t.Parallel()
	t.Run("success", func(t *testing.T) {
		t.Parallel()
		mem, err := store.NewMemory(store.MemoryOptions{})
		require.NoError(t, err)
		e := codecEnv(t, mem, true, &airline{hold: 200 * time.Millisecond}, interceptor.Options{AwaitDecision: true})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		run := e.startWorkflow(ctx, TwoBookings, "BA117")
		var results []string
		require.NoError(t, run.Get(ctx, &results))
		require.Len(t, results, 2)
		assert.Equal(t, results[0], results[1])
		assert.True(t, strings.HasPrefix(results[0], "seat 1 on BA117"), results[0])
		assert.Equal(t, 1, e.ledger.Effects("BA117"))
		requireNoPlaintextInHistory(t, e.client, run, "seat", "BA117")
	})
	t.Run("complete", func(t *testing.T) {
		t.Parallel()
		mem, err := store.NewMemory(store.MemoryOptions{})
		require.NoError(t, err)
		e := codecEnv(t, mem, true, &airline{failures: 1}, interceptor.Options{AwaitDecision: true})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		run := e.startWorkflow(ctx, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
		var pending []decision.PendingDecision
		require.Eventually(t, func() bool {
			v, err := e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), decision.QueryName)
			return err == nil && v.Get(&pending) == nil && len(pending) == 1
		}, 30*time.Second, 50*time.Millisecond, "the workflow publishes what it waits for")
		result, err := json.Marshal("seat 7 on BA117, confirmed by phone")
		require.NoError(t, err)
		require.NoError(t, e.client.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), decision.SignalName,
			decision.Decision{Key: pending[0].Outcome.Key, Action: decision.ActionComplete, Result: result, By: "ops@acme"}))
		var got string
		require.NoError(t, run.Get(ctx, &got))
		assert.Equal(t, "seat 7 on BA117, confirmed by phone", got)
		assert.Zero(t, e.ledger.Effects("BA117"))
		requireNoPlaintextInHistory(t, e.client, run, "seat", "BA117")

		rec, err := mem.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: pending[0].Outcome.Key})
		require.NoError(t, err)
		assert.NotContains(t, string(rec.Outcome), "seat", "the person's answer is recorded with the client's codec")
	})
}
