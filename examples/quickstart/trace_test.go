package quickstart_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/contrib/opentelemetry"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/tesserix/idempotency/contrib/oteltrace"
	"github.com/tesserix/idempotency/examples/quickstart"
	"github.com/tesserix/idempotency/idempotencytest"
	"github.com/tesserix/idempotency/interceptor"
)

// The trace of a trip: BookTrip traced with the SDK's OpenTelemetry
// interceptor, and the dispatcher's outcome on each activity's span
// (contrib/oteltrace). One of the two bookings claimed the key and
// completed; the other was answered from its record (after waiting for it,
// when they ran at once). Both spans name the key's digest, never the
// passenger; the READ_ONLY fare lookup keeps no record and gets nothing.
func TestBookTripTrace(t *testing.T) {
	t.Parallel()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracing, err := opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{Tracer: tp.Tracer("quickstart")})
	require.NoError(t, err)

	a := &quickstart.Airline{Ledger: filepath.Join(t.TempDir(), "airline.ledger")}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env, err := idempotencytest.New(&suite, idempotencytest.Options{
		Declarations: quickstart.Declarations(a),
		Interceptors: []sdkinterceptor.WorkerInterceptor{tracing}, // before the dispatcher: its span is current
		Configure:    func(o *interceptor.Options) { o.Observer = oteltrace.New(nil) },
	})
	require.NoError(t, err)
	t.Cleanup(env.Stop)
	env.ExecuteWorkflow(quickstart.BookTrip, "Ada", "BA117")
	require.NoError(t, env.GetWorkflowError())

	var outcomes, keys []string
	for _, s := range sr.Ended() {
		attrs := map[attribute.Key]string{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value.String()
		}
		var events []string
		for _, e := range s.Events() {
			events = append(events, e.Name)
		}
		t.Logf("span %s: outcome=%s key=%s waited_ms=%s events=%v", s.Name(),
			attrs[oteltrace.AttrOutcome], attrs[oteltrace.AttrKey], attrs[oteltrace.AttrWaitedMS], events)
		for _, v := range attrs {
			assert.NotContains(t, v, "Ada", "a span never holds an argument")
		}
		switch s.Name() {
		case "RunActivity:Book":
			outcomes = append(outcomes, attrs[oteltrace.AttrOutcome])
			keys = append(keys, attrs[oteltrace.AttrKey])
		case "RunActivity:LookupFare":
			assert.Empty(t, attrs[oteltrace.AttrOutcome], "a READ_ONLY call keeps no record")
		}
	}
	sort.Strings(outcomes)
	assert.Equal(t, []string{"completed", "deduplicated"}, outcomes)
	require.Len(t, keys, 2)
	assert.Equal(t, keys[0], keys[1], "the two bookings share one key")
	assert.True(t, strings.HasPrefix(keys[0], "v1:"), keys[0])
}
