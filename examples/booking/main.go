// Command booking is the main job (make run): a trip booked through Temporal
// against an airline that loses an answer, with the idempotency library in
// between. It starts a Temporal server in-process, so it needs nothing but
// the chosen store.
//
//	make run                                  # memory store
//	go run . -store postgres                  # IDEMPOTENCY_POSTGRES_URL or the -postgres-url flag
//	go run . -store redis                     # IDEMPOTENCY_REDIS_ADDR or the -redis-addr flag
//
// What it shows: two identical bookings in one workflow turn become one
// seat; a booking whose answer was lost stops the run with the typed
// indeterminate error instead of booking twice; a person (played here by
// the program) looks at the airline, records the outcome and signals the
// workflow, which carries on.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
	"go.uber.org/zap"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// Config chooses the store.
type Config struct {
	Store       string // memory, postgres or redis
	PostgresURL string
	RedisAddr   string
}

// Report is what a run observed, for the reader and for the test.
type Report struct {
	Itinerary     Itinerary
	Airline       map[string][]string // flight → confirmations the airline issued
	Deduplicated  int
	Indeterminate int
	Pending       activity.IndeterminateOutcome // what the person was asked
	PersonDecided bool
	// WithoutLibrary is the airline's ledger for the same trip booked on a
	// plain worker.
	WithoutLibrary map[string][]string
}

func main() {
	cfg := Config{}
	flag.StringVar(&cfg.Store, "store", "memory", "the store: memory, postgres or redis")
	flag.StringVar(&cfg.PostgresURL, "postgres-url", envOr("IDEMPOTENCY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL URL for -store postgres")
	flag.StringVar(&cfg.RedisAddr, "redis-addr", envOr("IDEMPOTENCY_REDIS_ADDR", "127.0.0.1:6379"), "Redis address for -store redis")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := Run(ctx, os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "booking:", err)
		os.Exit(1)
	}
}

// Run books the trip and narrates it to out.
func Run(ctx context.Context, out io.Writer, cfg Config) (*Report, error) {
	say := func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) }

	st, closeStore, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer closeStore()

	ts := temporaltest.NewServer(temporaltest.WithBaseServerOptions(temporal.WithLogger(serverlog.NewNoopLogger())))
	defer ts.Stop()
	c := ts.NewClientWithOptions(worker.ClientOptions(client.Options{Logger: quietLogger{}}, nil))
	say("Temporal server started in-process; store: %s", cfg.Store)

	events := &counter{}
	w, err := worker.New(c, "bookings", worker.Options{
		Idempotency: interceptor.Options{Store: st, Observer: events, AwaitDecision: true},
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	airline := NewAirline("BA118")
	if err := w.RegisterActivities(&Activities{Airline: airline, slow: 200 * time.Millisecond}, "", Policies()); err != nil {
		return nil, err
	}
	w.RegisterWorkflow(BookTrip)
	if err := w.Start(); err != nil {
		return nil, err
	}
	defer w.Stop()

	trip := Trip{Passenger: "Ada", Repeated: "BA117", Connection: "BA118"}
	say("\nBooking a trip for %s: %s (requested twice at once, a fresh request id each), then %s.",
		trip.Passenger, trip.Repeated, trip.Connection)
	say("The airline will take %s's seat and then lose its answer (a gateway timeout).", trip.Connection)
	run, err := c.ExecuteWorkflow(interceptor.WithTenant(ctx, "acme"), client.StartWorkflowOptions{
		ID:        fmt.Sprintf("trip-%s-%d", strings.ToLower(trip.Passenger), time.Now().UnixNano()),
		TaskQueue: "bookings",
	}, BookTrip, trip)
	if err != nil {
		return nil, err
	}

	report := &Report{}
	pending, err := waitForPendingDecision(ctx, c, run)
	if err != nil {
		return nil, err
	}
	if pending != nil {
		report.Pending, report.PersonDecided = pending.Outcome, true
		say("\nThe booking of %s ended with %s: %s", trip.Connection, activity.IndeterminateOutcomeErrorType, pending.Outcome.Message())
		say("The run did not retry and did not fail: it waits for a person (query %q, signal %q).",
			interceptor.PendingQuery, interceptor.DecisionSignal)
		decision, err := decide(airline, trip, pending.Outcome)
		if err != nil {
			return nil, err
		}
		say("The person checked the airline: %s holds %v.", trip.Connection, airline.Bookings(trip.Connection))
		say("They signalled their decision: %s %s", decision.Action, decision.Result)
		if err := c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), interceptor.DecisionSignal, decision); err != nil {
			return nil, err
		}
	}
	if err := run.Get(ctx, &report.Itinerary); err != nil {
		return nil, fmt.Errorf("the trip workflow failed: %w", err)
	}

	report.Airline = map[string][]string{}
	for _, f := range []string{trip.Repeated, trip.Connection} {
		report.Airline[f] = airline.Bookings(f)
	}
	report.Deduplicated, report.Indeterminate = events.get(interceptor.EventDeduplicated), events.get(interceptor.EventIndeterminate)

	it := report.Itinerary
	say("\nItinerary for %s:", trip.Passenger)
	say("  %s: %q and %q — the second call got the first call's answer", trip.Repeated, it.Repeated[0], it.Repeated[1])
	say("  %s: %q (decided by a person: %v)", trip.Connection, it.Connection, report.PersonDecided)
	say("\nThe airline's own ledger:")
	for _, f := range []string{trip.Repeated, trip.Connection} {
		say("  %s: %d seat(s) %v", f, len(report.Airline[f]), report.Airline[f])
	}
	say("\nDispatcher events: %d deduplicated, %d indeterminate.", report.Deduplicated, report.Indeterminate)
	say("At most one side effect per key: nothing was booked twice.")

	// The same trip on a plain worker, for contrast.
	plain := NewAirline(trip.Connection)
	pw := sdkworker.New(c, "bookings-plain", sdkworker.Options{})
	acts := &Activities{Airline: plain, slow: 200 * time.Millisecond}
	pw.RegisterActivity(acts)
	pw.RegisterWorkflow(BookTrip)
	if err := pw.Start(); err != nil {
		return nil, err
	}
	defer pw.Stop()
	prun, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        fmt.Sprintf("trip-%s-plain-%d", strings.ToLower(trip.Passenger), time.Now().UnixNano()),
		TaskQueue: "bookings-plain",
	}, BookTrip, trip)
	if err != nil {
		return nil, err
	}
	var plainIt Itinerary
	if err := prun.Get(ctx, &plainIt); err != nil {
		return nil, fmt.Errorf("the plain trip workflow failed: %w", err)
	}
	report.WithoutLibrary = map[string][]string{}
	say("\nThe same trip on a worker without the library (the lost answer is simply retried):")
	for _, f := range []string{trip.Repeated, trip.Connection} {
		report.WithoutLibrary[f] = plain.Bookings(f)
		say("  %s: %d seat(s) %v", f, len(report.WithoutLibrary[f]), report.WithoutLibrary[f])
	}
	return report, nil
}

// waitForPendingDecision polls the workflow's pending-decision query until
// it lists one, or the workflow ends without needing one.
func waitForPendingDecision(ctx context.Context, c client.Client, run client.WorkflowRun) (*interceptor.PendingDecision, error) {
	for {
		v, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), interceptor.PendingQuery)
		if err == nil {
			var pending []interceptor.PendingDecision
			if err := v.Get(&pending); err != nil {
				return nil, err
			}
			if len(pending) > 0 {
				return &pending[0], nil
			}
		}
		// The query exists only once a decision has been pending; until
		// then it fails. A finished workflow needs no decision.
		if d, derr := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID()); derr == nil &&
			d.WorkflowExecutionInfo.GetCloseTime() != nil {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// decide plays the person: look at the airline and say what happened. The
// worker records the decision against the key before the call carries on.
func decide(airline *Airline, trip Trip, o activity.IndeterminateOutcome) (interceptor.Decision, error) {
	seats := airline.Bookings(trip.Connection)
	if len(seats) == 0 {
		return interceptor.Decision{Key: o.Key, Action: interceptor.ActionFree}, nil
	}
	result, err := json.Marshal(seats[0])
	return interceptor.Decision{Key: o.Key, Action: interceptor.ActionComplete, Result: result}, err
}

func openStore(ctx context.Context, cfg Config) (store.Store, func(), error) {
	switch cfg.Store {
	case "memory":
		st, err := store.NewMemory(store.MemoryOptions{})
		return st, func() {}, err
	case "postgres":
		pool, err := pgxpool.New(ctx, cfg.PostgresURL)
		if err != nil {
			return nil, nil, err
		}
		st, err := pgstore.New(pool, pgstore.Options{})
		if err == nil {
			err = st.EnsureSchema(ctx)
		}
		if err != nil {
			pool.Close()
			return nil, nil, fmt.Errorf("postgres at %s: %w", cfg.PostgresURL, err)
		}
		return st, func() { st.Close(); pool.Close() }, nil
	case "redis":
		rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{cfg.RedisAddr}})
		if err := rdb.Ping(ctx).Err(); err != nil {
			_ = rdb.Close()
			return nil, nil, fmt.Errorf("redis at %s: %w", cfg.RedisAddr, err)
		}
		st, err := redisstore.New(rdb, redisstore.Options{Prefix: "booking-example"})
		if err != nil {
			_ = rdb.Close()
			return nil, nil, err
		}
		return st, func() { _ = st.Close(); _ = rdb.Close() }, nil
	default:
		return nil, nil, errors.New(`-store must be memory, postgres or redis, not "` + cfg.Store + `"`)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// counter counts the dispatcher's events by kind.
type counter struct {
	mu sync.Mutex
	n  map[interceptor.EventKind]int
}

func (c *counter) Observe(_ context.Context, e interceptor.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[interceptor.EventKind]int{}
	}
	c.n[e.Kind]++
}

func (c *counter) get(k interceptor.EventKind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

// quietLogger drops the SDK's logs: the example narrates for itself.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}

var _ sdklog.Logger = quietLogger{}
