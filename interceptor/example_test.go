package interceptor_test

import (
	"context"
	"fmt"
	"log/slog"

	commonpb "go.temporal.io/api/common/v1"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// SeatRequest is the argument of BookSeat. RequestID is fresh on every
// attempt, which is why it is not a key argument.
type SeatRequest struct {
	Flight    string `json:"flight"`
	RequestID string `json:"request_id"`
}

var seatsBooked int

// BookSeat takes a seat: repeating it is a second booking.
func BookSeat(ctx context.Context, req SeatRequest) (string, error) {
	seatsBooked++
	return fmt.Sprintf("booked %s (booking #%d)", req.Flight, seatsBooked), nil
}

// Installing the dispatcher and declaring an EFFECTFUL activity. The second
// call, with a new request ID, gets the first call's answer and books
// nothing. A Temporal test environment stands in for the worker here; in a
// real worker the interceptor goes into worker.Options.Interceptors (the
// worker package does this in one call).
func Example() {
	mem, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		panic(err)
	}
	ic, err := interceptor.New(interceptor.Options{
		Store: mem,
		Observer: interceptor.ObserverFunc(func(_ context.Context, e interceptor.Event) {
			fmt.Printf("event: %s %s for tenant %s\n", e.Kind, e.Activity, e.Tenant)
		}),
	})
	if err != nil {
		panic(err)
	}
	if err := ic.Declare(activity.Effectful(BookSeat, "flight")); err != nil {
		panic(err)
	}

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}})
	// The tenant travels from the workflow starter in a header.
	env.SetContextPropagators([]workflow.ContextPropagator{interceptor.TenantPropagator()})
	tenant, _ := converter.GetDefaultDataConverter().ToPayload("acme")
	env.SetHeader(&commonpb.Header{Fields: map[string]*commonpb.Payload{interceptor.TenantHeader: tenant}})
	env.RegisterActivity(BookSeat)

	for _, id := range []string{"req-1", "req-2"} {
		val, err := env.ExecuteActivity(BookSeat, SeatRequest{Flight: "BA117", RequestID: id})
		if err != nil {
			panic(err)
		}
		var answer string
		_ = val.Get(&answer)
		fmt.Println(answer)
	}
	fmt.Println("seats booked:", seatsBooked)
	// Output:
	// event: claimed BookSeat for tenant acme
	// event: completed BookSeat for tenant acme
	// booked BA117 (booking #1)
	// event: deduplicated BookSeat for tenant acme
	// booked BA117 (booking #1)
	// seats booked: 1
}

// Choosing where the tenant comes from: here each Temporal namespace is a
// tenant, and keys are scoped by workflow ID so that a reset or
// continue-as-new does not repeat an effect.
func ExampleTenantFromNamespace() {
	mem, _ := store.NewMemory(store.MemoryOptions{})
	_, err := interceptor.New(interceptor.Options{
		Store:  mem,
		Tenant: interceptor.TenantFromNamespace,
		Scope:  interceptor.ScopeWorkflow,
	})
	fmt.Println("options accepted:", err == nil)

	tenant, ok := interceptor.TenantFromNamespace(context.Background(), sdkactivity.Info{Namespace: "acme-prod"})
	fmt.Println(tenant, ok)
	// Output:
	// options accepted: true
	// acme-prod true
}

// Starting a workflow under a tenant: the context carries it, and a client
// with [interceptor.TenantPropagator] sends it in the workflow's header to
// every activity the workflow schedules.
func ExampleWithTenant() {
	ctx := interceptor.WithTenant(context.Background(), "acme")
	// c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{...}, BookTrip, trip)
	tenant, ok := interceptor.TenantFromContext(ctx)
	fmt.Println(tenant, ok)
	// Output:
	// acme true
}
