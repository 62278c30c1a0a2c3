// Command booking is the main job (make run): a trip booked through Temporal
// against an airline that loses an answer, with the idempotency library in
// between. By default it starts a Temporal server in-process, so it needs
// nothing but the chosen store; -address uses an existing frontend instead,
// and the worker and starter modes split it into two processes, in the shape
// of Temporal's samples.
//
//	make run                                  # memory store, embedded server
//	go run . -store postgres                  # IDEMPOTENCY_POSTGRES_URL or the -postgres-url flag
//	go run . -store redis                     # IDEMPOTENCY_REDIS_ADDR or the -redis-addr flag
//	go run . -address 127.0.0.1:7233          # all of it against temporal server start-dev
//	go run . worker -address 127.0.0.1:7233 -json   # the worker alone; events as JSON lines
//	go run . starter -address 127.0.0.1:7233        # the trip, and the person who decides
//
// What it shows: two identical bookings in one workflow turn become one
// seat; a booking whose answer was lost stops the run with the typed
// indeterminate error instead of booking twice; a person (played here by
// the program) looks at the airline, records the outcome and sends it to the
// workflow, which carries on. With -store postgres it also assigns a seat
// whose row lives in the store's own database, through an activity declared
// Transactional: asked twice at once and failing once after writing, it
// leaves exactly one row, and nobody is asked.
package main

import (
	"cmp"
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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
	"go.uber.org/zap"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// Config chooses the store and the Temporal frontend.
type Config struct {
	Store       string // memory, postgres or redis
	PostgresURL string
	RedisAddr   string
	Schema      string // pgstore's schema; empty: pgstore's default
	Table       string // pgstore's table; empty: pgstore's default
	Prefix      string // the Redis store's key prefix; empty: redisstore's default
	// Address is an existing Temporal frontend (host:port); empty starts
	// one in-process. Namespace is used with it.
	Address   string
	Namespace string
	// Events, when set, receives every dispatcher event as one JSON object
	// per line.
	Events io.Writer
	// Lookup brings the airline's booking lookup up, so the probe answers
	// what happened to the lost booking and nobody is asked.
	Lookup bool
	// NoAwaitDecision turns Options.AwaitDecision off: an indeterminate
	// booking fails the workflow instead of waiting for a person.
	NoAwaitDecision bool
	// Person, for the starter, leaves the decision to a real person (who
	// runs idempotencyctl decide, or the temporal CLI, or the Web UI)
	// instead of playing the person; the starter then waits for the trip.
	Person bool
	// SearchAttribute, when set, names the KeywordList search attribute
	// that lists the keys a workflow waits on (Options.PendingSearchAttribute),
	// so "temporal workflow list --query 'NAME IS NOT NULL'" finds it.
	SearchAttribute string
	// ProbeOnSchedule asks the probe again on its whole schedule in one
	// activity (Options.ProbeOnSchedule): a handful of history events per
	// wait instead of a timer and an activity per ask.
	ProbeOnSchedule bool
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
	// With the PostgreSQL store: the two answers to the seat asked for
	// twice (AssignSeat, transactional), and the seat map's rows for it.
	SeatAnswers [2]string
	Seats       []string
}

// TaskQueue is the task queue the booking worker polls.
const TaskQueue = "bookings"

var usage = map[string]string{
	"": `usage: booking [flags]            the whole story in one process
       booking worker [flags]     the worker alone, until interrupted
       booking starter [flags]    the trip, and the person who decides

Books a trip through Temporal against an airline that loses an answer. With
no -address a Temporal server runs in-process; with -address (for example
127.0.0.1:7233 from "temporal server start-dev") the given frontend is used.
Run "booking worker -h" and "booking starter -h" for the two-process mode.

`,
	"worker": `usage: booking worker [flags]

Runs the booking worker (task queue "bookings") on an existing Temporal
frontend until interrupted. Its airline writes every seat it sells to the
-ledger file and loses the answer to the first BA118 booking. With -json the
dispatcher's events go to standard output, one JSON object per line; an
indeterminate outcome is told on one line either way. -search-attribute
lists waiting workflows for "temporal workflow list --query".

`,
	"starter": `usage: booking starter [flags]

Starts one trip on an existing Temporal frontend, where "booking worker" is
running, and plays the person: when the BA118 booking's outcome is unknown it
reads the worker's -ledger file and sends the decision (a Workflow Update).
With -person it leaves the decision to you: it prints the key and how to
decide it (docs/DECIDING.md walks it) and waits. Prints the itinerary and
the airline's ledger.

`,
}

func main() {
	mode, args := "", os.Args[1:]
	if len(args) > 0 && (args[0] == "worker" || args[0] == "starter") {
		mode, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet(strings.TrimSpace("booking "+mode), flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage[mode])
		fs.PrintDefaults()
	}
	cfg := Config{}
	fs.StringVar(&cfg.Address, "address", "", "an existing Temporal frontend, host:port (empty: start one in-process)")
	fs.StringVar(&cfg.Namespace, "namespace", client.DefaultNamespace, "the Temporal namespace, with -address")
	ledger := "airline.ledger"
	if mode != "" {
		fs.StringVar(&ledger, "ledger", ledger, "the airline's ledger file, shared by the worker and the starter")
	}
	jsonEvents, awaitDecision := false, true
	wait := 2 * time.Minute
	if mode == "starter" {
		fs.BoolVar(&cfg.Person, "person", false, "leave the decision to a person: print the key and how to decide it, then wait for the trip (see -wait)")
		fs.DurationVar(&wait, "wait", 30*time.Minute, "with -person, how long to wait for the decision")
	}
	if mode != "starter" {
		// The store settings idempotencyctl takes: the same flags, the same
		// variables, the same defaults.
		fs.StringVar(&cfg.Store, "store", envOr("IDEMPOTENCY_STORE", "memory"), "the store: memory, postgres or redis (or $IDEMPOTENCY_STORE)")
		fs.StringVar(&cfg.PostgresURL, "postgres-url", envOr("IDEMPOTENCY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL URL for -store postgres (or $IDEMPOTENCY_POSTGRES_URL)")
		fs.StringVar(&cfg.Schema, "schema", envOr("IDEMPOTENCY_SCHEMA", pgstore.DefaultSchema), "PostgreSQL schema holding the table (or $IDEMPOTENCY_SCHEMA)")
		fs.StringVar(&cfg.Table, "table", envOr("IDEMPOTENCY_TABLE", pgstore.DefaultTable), "PostgreSQL table holding the records (or $IDEMPOTENCY_TABLE)")
		fs.StringVar(&cfg.RedisAddr, "redis-addr", envOr("IDEMPOTENCY_REDIS_ADDR", "127.0.0.1:6379"), "Redis address host:port for -store redis (or $IDEMPOTENCY_REDIS_ADDR)")
		fs.StringVar(&cfg.Prefix, "prefix", envOr("IDEMPOTENCY_PREFIX", redisstore.DefaultPrefix), "Redis key prefix for -store redis (or $IDEMPOTENCY_PREFIX)")
		fs.BoolVar(&cfg.Lookup, "lookup", false, "bring the airline's booking lookup up: the probe settles the lost answer and nobody is asked")
		fs.BoolVar(&awaitDecision, "await-decision", true, "an indeterminate booking waits for a person's decision (false: it fails the workflow)")
		fs.StringVar(&cfg.SearchAttribute, "search-attribute", "", `list waiting workflows under this KeywordList search attribute, e.g. `+interceptor.DefaultPendingSearchAttribute+` (created in-process; on another frontend: "temporal operator search-attribute create --name NAME --type KeywordList")`)
		fs.BoolVar(&cfg.ProbeOnSchedule, "probe-on-schedule", false, "ask the probe again on its whole schedule in one activity (a handful of history events per wait; every worker must run a release that has it)")
		fs.BoolVar(&jsonEvents, "json", false, "print the dispatcher's events to standard output, one JSON object per line (the story goes to standard error)")
	}
	_ = fs.Parse(args)
	cfg.NoAwaitDecision = !awaitDecision
	if fs.NArg() > 0 {
		fs.Usage()
		os.Exit(2)
	}
	if mode != "" && cfg.Address == "" {
		fmt.Fprintf(os.Stderr, "booking %s: -address is required (the worker and the starter share a frontend)\n", mode)
		os.Exit(2)
	}
	var narration io.Writer = os.Stdout
	if jsonEvents {
		cfg.Events, narration = os.Stdout, os.Stderr
	}

	var err error
	switch mode {
	case "worker":
		err = RunWorker(narration, cfg, OpenAirline(ledger, "BA118"))
	case "starter":
		if !cfg.Person {
			wait = 2 * time.Minute
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_, err = RunStarter(ctx, narration, cfg, OpenAirline(ledger))
	default:
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err = Run(ctx, narration, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "booking:", err)
		os.Exit(1)
	}
}

// connect returns a client for cfg's frontend, starting one in-process when
// cfg.Address is empty.
func connect(cfg Config) (client.Client, func(), error) {
	opts := client.Options{Logger: quietLogger{}}
	if cfg.Address == "" {
		ts := temporaltest.NewServer(temporaltest.WithBaseServerOptions(temporal.WithLogger(serverlog.NewNoopLogger())))
		return ts.NewClientWithOptions(worker.ClientOptions(opts, nil)), ts.Stop, nil
	}
	opts.HostPort, opts.Namespace = cfg.Address, cfg.Namespace
	c, err := worker.Dial(opts, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("temporal at %s: %w", cfg.Address, err)
	}
	return c, c.Close, nil
}

// startWorker starts the booking worker on c; with seats (the PostgreSQL
// store only) it also runs the seat map's transactional activity.
func startWorker(c client.Client, cfg Config, st store.Store, airline *Airline, seats *SeatMap, obs interceptor.Observer) (*worker.Worker, error) {
	w, err := worker.New(c, TaskQueue, worker.Options{
		Idempotency: interceptor.Options{
			Store: st, Observer: obs,
			AwaitDecision:          !cfg.NoAwaitDecision,
			PendingSearchAttribute: cfg.SearchAttribute,
			ProbeOnSchedule:        cfg.ProbeOnSchedule,
		},
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	if cfg.SearchAttribute != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if cfg.Address == "" {
			// The in-process server is ours: create the attribute, as an
			// operator does once per namespace with the temporal CLI.
			_, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
				Namespace:        cfg.namespace(),
				SearchAttributes: map[string]enums.IndexedValueType{cfg.SearchAttribute: enums.INDEXED_VALUE_TYPE_KEYWORD_LIST},
			})
			if err != nil && !isAlreadyExists(err) {
				return nil, fmt.Errorf("creating search attribute %s: %w", cfg.SearchAttribute, err)
			}
		}
		// w.Start checks the attribute too, and refuses to start without
		// it: the check here names the namespace and the type.
		if err := w.Interceptor().CheckSearchAttribute(ctx, c, cfg.namespace()); err != nil {
			return nil, err
		}
	}
	if err := w.RegisterActivities(&Activities{Airline: airline, slow: 200 * time.Millisecond}, "", PoliciesWithProbe(airline)); err != nil {
		return nil, err
	}
	w.RegisterWorkflow(BookTrip)
	if seats != nil {
		// The seat map lives in the store's database: transactional.
		if err := w.Register(seats.SeatDeclaration()); err != nil {
			return nil, err
		}
		w.RegisterWorkflow(AssignSeats)
	}
	return w, w.Start()
}

// observer counts the events, tells out of each indeterminate outcome, and
// writes every event to cfg.Events if set.
func observer(cfg Config, out io.Writer, events *counter) interceptor.Observer {
	obs := []interceptor.Observer{events, &indeterminateLines{w: out, cfg: cfg}}
	if cfg.Events != nil {
		obs = append(obs, &jsonLines{w: cfg.Events})
	}
	return worker.Observers(obs...)
}

// indeterminateLines writes one line for each outcome that became
// indeterminate: the activity, the key, why, and what to run next. The
// worker says it without -json: an operator must not have to ask.
type indeterminateLines struct {
	mu  sync.Mutex
	w   io.Writer
	cfg Config
}

func (l *indeterminateLines) Observe(_ context.Context, e interceptor.Event) {
	if e.Kind != interceptor.EventIndeterminate || l.w == nil {
		return
	}
	next := "idempotencyctl " + l.cfg.ctlStoreFlags() + " show -tenant " + e.Tenant + " -key " + e.Key
	if !l.cfg.NoAwaitDecision {
		next += "; workflow " + e.WorkflowID + " waits for 'idempotencyctl decide'"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "indeterminate: %s key %s (%s); next: %s\n", e.Activity, e.Key, e.Reason, next)
}

// ctlStoreFlags are the idempotencyctl store flags that read this worker's
// store.
func (cfg Config) ctlStoreFlags() string {
	switch cfg.Store {
	case "postgres":
		return "-store postgres -schema " + cmp.Or(cfg.Schema, pgstore.DefaultSchema) + " -table " + cmp.Or(cfg.Table, pgstore.DefaultTable)
	case "redis":
		return "-store redis -redis-addr " + cfg.RedisAddr + " -prefix " + cmp.Or(cfg.Prefix, redisstore.DefaultPrefix)
	default:
		return "-store " + cfg.Store + " (the memory store lives in this process only)"
	}
}

func (cfg Config) namespace() string { return cmp.Or(cfg.Namespace, client.DefaultNamespace) }

// isAlreadyExists reports whether err says the search attribute exists.
func isAlreadyExists(err error) bool {
	var exists *serviceerror.AlreadyExists
	return errors.As(err, &exists) || strings.Contains(err.Error(), "already exists")
}

// RunWorker runs the booking worker on cfg's frontend until interrupted.
func RunWorker(out io.Writer, cfg Config, airline *Airline) error {
	st, closeStore, err := openStore(context.Background(), cfg)
	if err != nil {
		return err
	}
	defer closeStore()
	c, disconnect, err := connect(cfg)
	if err != nil {
		return err
	}
	defer disconnect()
	w, err := startWorker(c, cfg, st, airline, seatMap(cfg), observer(cfg, out, &counter{}))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Worker polling task queue %q on %s (namespace %s); store: %s; ledger: %s. Interrupt to stop.\n",
		TaskQueue, cfg.Address, cfg.Namespace, cfg.Store, airline.ledger)
	<-sdkworker.InterruptCh()
	w.Stop()
	return nil
}

// RunStarter books the trip on cfg's frontend, where a booking worker runs,
// and plays the person who decides, looking at airline.
func RunStarter(ctx context.Context, out io.Writer, cfg Config, airline *Airline) (*Report, error) {
	c, disconnect, err := connect(cfg)
	if err != nil {
		return nil, err
	}
	defer disconnect()
	return bookTrip(ctx, out, c, airline, cfg.Person)
}

var theTrip = Trip{Passenger: "Ada", Repeated: "BA117", Connection: "BA118"}

// bookTrip starts the trip, decides its pending booking as the person
// would (or, with person, leaves it to a real one and says how), and reports
// the itinerary and the airline's ledger.
func bookTrip(ctx context.Context, out io.Writer, c client.Client, airline *Airline, person bool) (*Report, error) {
	say := func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) }
	trip := theTrip
	say("\nBooking a trip for %s: %s (requested twice at once, a fresh request id each), then %s.",
		trip.Passenger, trip.Repeated, trip.Connection)
	say("The airline will take %s's seat and then lose its answer (a gateway timeout).", trip.Connection)
	run, err := c.ExecuteWorkflow(interceptor.WithTenant(ctx, "acme"), client.StartWorkflowOptions{
		ID:        fmt.Sprintf("trip-%s-%d", strings.ToLower(trip.Passenger), time.Now().UnixNano()),
		TaskQueue: TaskQueue,
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
		say("\nThe booking of %s ended with %s: %s", trip.Connection, activity.ErrorTypeIndeterminateOutcome, pending.Outcome.Message())
		say("The run did not retry and did not fail: it waits for a person (query %q, update %q).",
			decision.QueryName, decision.UpdateName)
		if person {
			say("\nWorkflow %s waits for you. Key %s, tenant %s.", run.GetID(), pending.Outcome.Key, pending.Outcome.Tenant)
			say("Look at the airline's ledger (%s), then decide, for example:", airline.ledger)
			say("  idempotencyctl [store flags] decide -tenant %s -key %s -outcome '\"<confirmation>\"' -by you@example.com", pending.Outcome.Tenant, pending.Outcome.Key)
			say("(docs/DECIDING.md walks it, with the temporal CLI and the Web UI too.) Waiting for the trip to end...")
			if err := run.Get(ctx, &report.Itinerary); err != nil {
				return nil, fmt.Errorf("the trip workflow failed: %w", err)
			}
			return finishReport(out, report, airline, trip), nil
		}
		d, err := decide(airline, trip, pending.Outcome)
		if err != nil {
			return nil, err
		}
		say("The person checked the airline: %s holds %v.", trip.Connection, airline.Bookings(trip.Connection))
		say("They sent their decision: %s %s", d.Action, d.Result)
		res, err := decision.Send(ctx, c, run.GetID(), run.GetRunID(), d)
		if err != nil {
			return nil, err
		}
		say("The workflow answered: %s.", res.Applied)
	}
	if err := run.Get(ctx, &report.Itinerary); err != nil {
		return nil, fmt.Errorf("the trip workflow failed: %w", err)
	}
	return finishReport(out, report, airline, trip), nil
}

// finishReport reads the airline's ledger into report and prints the
// itinerary and the ledger.
func finishReport(out io.Writer, report *Report, airline *Airline, trip Trip) *Report {
	say := func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) }
	report.Airline = map[string][]string{}
	for _, f := range []string{trip.Repeated, trip.Connection} {
		report.Airline[f] = airline.Bookings(f)
	}
	it := report.Itinerary
	say("\nItinerary for %s:", trip.Passenger)
	say("  %s: %q and %q — the second call got the first call's answer", trip.Repeated, it.Repeated[0], it.Repeated[1])
	say("  %s: %q (decided by a person: %v)", trip.Connection, it.Connection, report.PersonDecided)
	say("\nThe airline's own ledger:")
	for _, f := range []string{trip.Repeated, trip.Connection} {
		say("  %s: %d seat(s) %v", f, len(report.Airline[f]), report.Airline[f])
	}
	return report
}

// Run books the trip in one process and narrates it to out.
func Run(ctx context.Context, out io.Writer, cfg Config) (*Report, error) {
	say := func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) }

	st, closeStore, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer closeStore()

	c, disconnect, err := connect(cfg)
	if err != nil {
		return nil, err
	}
	defer disconnect()
	if cfg.Address == "" {
		say("Temporal server started in-process; store: %s", cfg.Store)
	} else {
		say("Temporal frontend %s, namespace %s; store: %s", cfg.Address, cfg.Namespace, cfg.Store)
	}

	events := &counter{}
	airline := NewAirline(theTrip.Connection)
	airline.LookupAvailable = cfg.Lookup
	if cfg.Lookup {
		say("The airline's booking lookup is up: a lost answer is asked of it before a person.")
	}
	seats := seatMap(cfg)
	w, err := startWorker(c, cfg, st, airline, seats, observer(cfg, nil, events))
	if err != nil {
		return nil, err
	}
	defer w.Stop()

	report, err := bookTrip(ctx, out, c, airline, false)
	if err != nil {
		return nil, err
	}
	report.Deduplicated, report.Indeterminate = events.get(interceptor.EventDeduplicated), events.get(interceptor.EventIndeterminate)
	say("\nDispatcher events: %d deduplicated, %d indeterminate.", report.Deduplicated, report.Indeterminate)
	say("At most one side effect per key: nothing was booked twice.")
	if seats != nil {
		if err := assignSeats(ctx, out, c, cfg, seats, report); err != nil {
			return nil, err
		}
	}

	// The same trip on a plain worker, for contrast.
	trip := theTrip
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
func waitForPendingDecision(ctx context.Context, c client.Client, run client.WorkflowRun) (*decision.PendingDecision, error) {
	for {
		pending, err := decision.Pending(ctx, c, run.GetID(), run.GetRunID())
		if err == nil && len(pending) > 0 {
			return &pending[0], nil
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
func decide(airline *Airline, trip Trip, o activity.IndeterminateOutcome) (decision.Decision, error) {
	seats := airline.Bookings(trip.Connection)
	if len(seats) == 0 {
		return decision.Decision{Key: o.Key, Action: decision.ActionFree, By: "ops@acme"}, nil
	}
	result, err := json.Marshal(seats[0])
	return decision.Decision{Key: o.Key, Action: decision.ActionComplete, Result: result, By: "ops@acme"}, err
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
		st, err := pgstore.New(pool, pgstore.Options{Schema: cfg.Schema, Table: cfg.Table})
		if err == nil {
			err = st.EnsureSchema(ctx)
		}
		if err == nil {
			// The seat map's table, in the store's database.
			_, err = pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+seatsTable(cfg)+createSeats)
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
		st, err := redisstore.New(rdb, redisstore.Options{Prefix: cfg.Prefix})
		if err != nil {
			_ = rdb.Close()
			return nil, nil, err
		}
		return st, func() { _ = st.Close(); _ = rdb.Close() }, nil
	default:
		return nil, nil, errors.New(`-store must be memory, postgres or redis, not "` + cfg.Store + `"`)
	}
}

// seatMap is the seat map of cfg's store: nil but for PostgreSQL, where its
// table lives beside the records.
func seatMap(cfg Config) *SeatMap {
	if cfg.Store != "postgres" {
		return nil
	}
	m := &SeatMap{table: seatsTable(cfg)}
	m.hiccup.Store(true)
	return m
}

// assignSeats asks for Ada's seat on the repeated flight twice at once and
// reports what the seat map holds.
func assignSeats(ctx context.Context, out io.Writer, c client.Client, cfg Config, seats *SeatMap, report *Report) error {
	say := func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) }
	req := SeatRequest{Flight: theTrip.Repeated, Passenger: theTrip.Passenger, Seat: "12A"}
	say("\nThe seat map lives in the store's PostgreSQL database: AssignSeat is declared Transactional.")
	say("Seat %s on %s is asked for twice at once; the first assignment fails after writing its row.", req.Seat, req.Flight)
	run, err := c.ExecuteWorkflow(interceptor.WithTenant(ctx, "acme"), client.StartWorkflowOptions{
		ID:        fmt.Sprintf("seats-%d", time.Now().UnixNano()),
		TaskQueue: TaskQueue,
	}, AssignSeats, req)
	if err != nil {
		return err
	}
	if err := run.Get(ctx, &report.SeatAnswers); err != nil {
		return fmt.Errorf("the seat workflow failed: %w", err)
	}
	pool, err := pgxpool.New(ctx, cfg.PostgresURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, "SELECT seat || ' (attempt ' || attempt || ')' FROM "+seats.table+" WHERE flight = $1 AND passenger = $2", req.Flight, req.Passenger)
	if err != nil {
		return err
	}
	if report.Seats, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return err
	}
	say("  answers: %q and %q", report.SeatAnswers[0], report.SeatAnswers[1])
	say("  the seat map holds %d row(s) %v: the failed assignment's row rolled back with its transaction,", len(report.Seats), report.Seats)
	say("  and the one that landed committed together with its record — exactly once, and nobody was asked.")
	return nil
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

// jsonLines writes each event as one JSON object per line.
type jsonLines struct {
	mu sync.Mutex
	w  io.Writer
}

// eventJSON is an event as -json prints it.
type eventJSON struct {
	Event        string  `json:"event"`
	Activity     string  `json:"activity"`
	ActivityKind string  `json:"activity_kind"`
	Tenant       string  `json:"tenant,omitempty"`
	Key          string  `json:"key,omitempty"`
	WorkflowID   string  `json:"workflow_id"`
	RunID        string  `json:"run_id"`
	ActivityID   string  `json:"activity_id"`
	Attempt      int32   `json:"attempt"`
	Reason       string  `json:"reason,omitempty"`
	Error        string  `json:"error,omitempty"`
	DurationMS   float64 `json:"duration_ms,omitempty"`
}

func (j *jsonLines) Observe(_ context.Context, e interceptor.Event) {
	rec := eventJSON{
		Event: e.Kind.String(), Activity: e.Activity, ActivityKind: e.ActivityKind.String(),
		Tenant: e.Tenant, Key: e.Key, WorkflowID: e.WorkflowID, RunID: e.RunID,
		ActivityID: e.ActivityID, Attempt: e.Attempt, Reason: string(e.Reason),
		DurationMS: float64(e.Duration) / float64(time.Millisecond),
	}
	if e.Err != nil {
		rec.Error = e.Err.Error()
	}
	b, _ := json.Marshal(rec)
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = j.w.Write(append(b, '\n'))
}

// quietLogger drops the SDK's logs: the example narrates for itself.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}

var _ sdklog.Logger = quietLogger{}
