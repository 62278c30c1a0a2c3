package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// FlightActivities are registered as methods, each with its policy.
type FlightActivities struct{}

type SeatRequest struct {
	Flight    string `json:"flight"`
	RequestID string `json:"request_id"`
}

func (*FlightActivities) Book(context.Context, SeatRequest) (string, error)       { return "", nil }
func (*FlightActivities) LookupFare(context.Context, SeatRequest) (string, error) { return "", nil }
func (*FlightActivities) Ping(context.Context) error                              { return nil }

// Wiring a worker: the idempotency interceptor is installed, and every
// method of the activities struct is registered with its policy. Ping gets
// the zero Policy: registered, but undeclared on purpose.
func ExampleWorker_RegisterActivities() {
	// In production: c, err := worker.Dial(client.Options{HostPort: addr}, logger)
	c, err := client.NewLazyClient(client.Options{
		HostPort: "127.0.0.1:7233",
		Logger:   log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	mem, _ := store.NewMemory(store.MemoryOptions{})

	w, err := worker.New(c, "bookings", worker.Options{
		Idempotency: interceptor.Options{Store: mem},
		Logger:      zap.NewNop(),
	})
	if err != nil {
		panic(err)
	}
	err = w.RegisterActivities(&FlightActivities{}, "flights.", map[string]activity.Policy{
		"Book":       {Kind: activity.KindEffectful, KeyArguments: []string{"flight"}},
		"LookupFare": {Kind: activity.KindReadOnly},
		"Ping":       {},
	})
	fmt.Println("registered:", err)
	for _, name := range []string{"flights.Book", "flights.LookupFare", "flights.Ping"} {
		if d, ok := w.Interceptor().Declaration(name); ok {
			fmt.Println(name, d.Kind())
		} else {
			fmt.Println(name, "undeclared")
		}
	}

	err = w.RegisterActivities(&FlightActivities{}, "more.", map[string]activity.Policy{
		"Book": {Kind: activity.KindEffectful, KeyArguments: []string{"fligth"}},
	})
	fmt.Println(err != nil)
	// Output:
	// registered: <nil>
	// flights.Book EFFECTFUL
	// flights.LookupFare READ_ONLY
	// flights.Ping undeclared
	// true
}

// The library as one plugin: a client built with it installs the
// dispatcher, the declarations and the Resolve activity on every worker
// built on it with the SDK's worker.New. Building a second one on that
// worker (worker.New) is refused.
func ExampleNewPlugin() {
	mem, _ := store.NewMemory(store.MemoryOptions{})
	p, err := worker.NewPlugin(worker.PluginOptions{
		Idempotency:  interceptor.Options{Store: mem},
		Declarations: []*activity.Declaration{activity.Effectful((&FlightActivities{}).Book, "flight")},
	})
	if err != nil {
		panic(err)
	}
	// In production: client.Dial(client.Options{HostPort: addr, Plugins: ...})
	c, err := client.NewLazyClient(client.Options{
		HostPort: "127.0.0.1:7233",
		Logger:   log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		Plugins:  []client.Plugin{p},
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	w := sdkworker.New(c, "bookings", sdkworker.Options{})
	_ = w // w.RegisterWorkflow(BookTrip); w.Run(sdkworker.InterruptCh())

	_, err = worker.New(c, "bookings", worker.Options{Idempotency: interceptor.Options{Store: mem}})
	fmt.Println(p.Name(), errors.Is(err, worker.ErrInstalledTwice))
	// Output:
	// tesserix.idempotency true
}

// The client options a worker's client needs: the tenant propagator, once.
func ExampleClientOptions() {
	opts := worker.ClientOptions(client.Options{HostPort: "127.0.0.1:7233"}, nil)
	opts = worker.ClientOptions(opts, nil)
	fmt.Println(len(opts.ContextPropagators))
	// Output:
	// 1
}

// The dispatcher's events, logged through zap: identifiers only, never the
// activity's arguments or its result.
func ExampleZapObserver() {
	obs := worker.ZapObserver(zap.NewExample())
	obs.Observe(context.Background(), interceptor.Event{
		Kind:         interceptor.EventDeduplicated,
		Activity:     "Book",
		ActivityKind: activity.KindEffectful,
		Tenant:       "acme",
		Key:          "v1:9f86d0",
		WorkflowID:   "trip-42",
		RunID:        "run-1",
		ActivityID:   "5",
		Attempt:      1,
	})
	// Output:
	// {"level":"info","msg":"idempotency: deduplicated","activity":"Book","idempotency_kind":"EFFECTFUL","tenant":"acme","key":"v1:9f86d0","workflow_id":"trip-42","run_id":"run-1","activity_id":"5","attempt":1}
}

// The SDK's logger bridged to zap: key-value pairs become fields.
func ExampleNewLogger() {
	l := worker.NewLogger(zap.NewExample())
	l.Info("worker started", "task_queue", "bookings", "pollers", 2)
	// Output:
	// {"level":"info","msg":"worker started","task_queue":"bookings","pollers":2}
}
