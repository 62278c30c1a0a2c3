package integration

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
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

// encryptedEncoding marks the payloads xorCodec made.
const encryptedEncoding = "binary/test-encrypted"

// xorCodec stands for an encrypting codec, and a strict one: it refuses to
// decode a payload it did not encode, as an encryption codec whose key
// check fails would. (XOR is not encryption; the test only needs the
// plaintext to be unreadable and the codec to be strict.)
type xorCodec struct{}

func (xorCodec) Encode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		b, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(encryptedEncoding)},
			Data:     xor(b),
		}
	}
	return out, nil
}

func (xorCodec) Decode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		if string(p.Metadata[converter.MetadataEncoding]) != encryptedEncoding {
			return nil, errors.New("xorCodec: payload is not encrypted")
		}
		out[i] = &commonpb.Payload{}
		if err := proto.Unmarshal(xor(p.Data), out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func xor(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = c ^ 0x5a
	}
	return out
}

// A declared activity's result reaches the workflow's history through the
// worker's own converter and codec, with no option set on the library:
// nothing of it is in plain text there, for the first call and for the
// duplicate answered from the store. A strict codec never sees a payload
// twice. A worker made with worker.Dial uses the client's converter for the
// store too, so the record holds no plain text either.
func TestCodecCoversDeclaredResults(t *testing.T) {
	t.Parallel()
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), xorCodec{})
	for _, tt := range []struct {
		name       string
		dial       bool
		storeClear bool // whether the store may hold the plain result
	}{
		{"ClientMadeElsewhere", false, true},
		{"Dial", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mem, err := store.NewMemory(store.MemoryOptions{})
			require.NoError(t, err)
			logger := zaptest.NewLogger(t)
			opts := client.Options{DataConverter: dc, Namespace: server.GetDefaultNamespace()}
			var c client.Client
			if tt.dial {
				opts.HostPort = server.GetFrontendHostPort()
				c, err = worker.Dial(opts, logger)
				require.NoError(t, err)
				t.Cleanup(c.Close)
			} else {
				c = server.NewClientWithOptions(worker.ClientOptions(opts, logger))
			}
			queue := testenv.UniqueName("tq")
			events := &eventLog{}
			w, err := worker.New(c, queue, worker.Options{
				Worker:      workerOptions,
				Idempotency: interceptor.Options{Store: mem, Observer: events, AwaitDecision: true},
				Logger:      logger,
			})
			require.NoError(t, err)
			a := &airline{ledger: newLedger()}
			require.NoError(t, w.Register(activity.Effectful(a.Book, "flight")))
			w.RegisterWorkflow(TwoBookings)
			e := &env{t: t, client: c, worker: w, queue: queue, ledger: a.ledger, events: events}
			e.start()

			ctx := interceptor.WithTenant(context.Background(), "acme")
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: queue}, TwoBookings, "BA117")
			require.NoError(t, err)
			var results []string
			require.NoError(t, run.Get(ctx, &results), "a strict codec decodes every result once")
			require.Len(t, results, 2)
			require.True(t, strings.HasPrefix(results[0], "seat 1 on BA117"), results[0])
			assert.Equal(t, results[0], results[1], "the duplicate's answer")
			assert.Equal(t, 1, a.ledger.Effects("BA117"))
			assert.Equal(t, 1, events.count(interceptor.EventDeduplicated))

			completed := 0
			iter := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for iter.HasNext() {
				ev, err := iter.Next()
				require.NoError(t, err)
				raw, err := proto.Marshal(ev)
				require.NoError(t, err)
				assert.False(t, bytes.Contains(raw, []byte("seat 1")), "plain text in history event %d (%s)", ev.EventId, ev.EventType)
				if r := ev.GetActivityTaskCompletedEventAttributes().GetResult(); r != nil {
					completed++
					for _, p := range r.Payloads {
						assert.Equal(t, encryptedEncoding, string(p.Metadata[converter.MetadataEncoding]), "event %d", ev.EventId)
					}
				}
			}
			assert.Equal(t, 2, completed, "both calls completed")

			rec := findRecord(t, mem, events)
			assert.Equal(t, tt.storeClear, bytes.Contains(rec.Outcome, []byte("seat 1")), "plain text in the store")
		})
	}
}

// findRecord returns the record the completed event names.
func findRecord(t *testing.T, st store.Store, events *eventLog) store.Record {
	t.Helper()
	var key string
	events.mu.Lock()
	for _, ev := range events.events {
		if ev.Kind == interceptor.EventCompleted {
			key = ev.Key
		}
	}
	events.mu.Unlock()
	require.NotEmpty(t, key)
	rec, err := st.Lookup(context.Background(), store.LookupParams{Tenant: "acme", Key: key})
	require.NoError(t, err)
	return rec
}
