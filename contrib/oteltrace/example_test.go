package oteltrace_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/contrib/opentelemetry"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/contrib/oteltrace"
	"github.com/tesserix/idempotency/idempotencytest"
	"github.com/tesserix/idempotency/interceptor"
)

// Book sells a seat.
func Book(_ context.Context, flight string) (string, error) { return "CONF-" + flight, nil }

// BookTwice books the same flight twice, as a retried request would.
func BookTwice(ctx workflow.Context, flight string) ([]string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var out []string
	for range 2 {
		var conf string
		if err := workflow.ExecuteActivity(ctx, "Book", flight).Get(ctx, &conf); err != nil {
			return nil, err
		}
		out = append(out, conf)
	}
	return out, nil
}

// A workflow traced with the SDK's OpenTelemetry interceptor: the first
// booking's span says it claimed the key, the second's that it was
// answered from the record, each with the key's digest.
func Example() {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tracing, err := opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{Tracer: tp.Tracer("example")})
	if err != nil {
		panic(err)
	}

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	book := activity.MustDeclare(Book, activity.Policy{Kind: activity.KindEffectful,
		Params: []string{"flight"}, KeyArguments: []string{"flight"}})
	env, err := idempotencytest.New(&suite, idempotencytest.Options{
		Declarations: []*activity.Declaration{book},
		Interceptors: []sdkinterceptor.WorkerInterceptor{tracing},
		Configure:    func(o *interceptor.Options) { o.Observer = oteltrace.New(nil) },
	})
	if err != nil {
		panic(err)
	}
	defer env.Stop()
	env.ExecuteWorkflow(BookTwice, "BA117")
	if err := env.GetWorkflowError(); err != nil {
		panic(err)
	}

	for _, s := range sr.Ended() {
		if s.Name() != "RunActivity:Book" {
			continue
		}
		a := map[attribute.Key]string{}
		for _, kv := range s.Attributes() {
			a[kv.Key] = kv.Value.String()
		}
		var events []string
		for _, e := range s.Events() {
			events = append(events, e.Name)
		}
		sort.Strings(events)
		fmt.Printf("%s outcome=%s key=%.7s… events=%v\n", s.Name(), a[oteltrace.AttrOutcome], a[oteltrace.AttrKey], events)
	}
	// Output:
	// RunActivity:Book outcome=completed key=v1:7ee5… events=[idempotency.claimed idempotency.completed]
	// RunActivity:Book outcome=deduplicated key=v1:7ee5… events=[idempotency.deduplicated]
}
