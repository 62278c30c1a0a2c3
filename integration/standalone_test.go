package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/wire"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// standaloneOptions start a standalone activity on queue under id: a retry
// policy generous enough that only the library can explain a single
// attempt.
func standaloneOptions(id, queue string, startToClose time.Duration) client.StartActivityOptions {
	return client.StartActivityOptions{
		ID:                  id,
		TaskQueue:           queue,
		StartToCloseTimeout: startToClose,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    100 * time.Millisecond,
			BackoffCoefficient: 1,
			MaximumAttempts:    5,
		},
	}
}

// startBooking starts the Book activity on its own, with no workflow, under
// tenant ("" for none).
func (e *env) startBooking(ctx context.Context, tenant string, opts client.StartActivityOptions, req BookRequest) (client.ActivityHandle, error) {
	if tenant != "" {
		ctx = interceptor.WithTenant(ctx, tenant)
	}
	return e.client.ExecuteActivity(ctx, opts, "Book", req)
}

// bookStandalone runs the Book activity on its own to its end and returns
// its result.
func (e *env) bookStandalone(tenant, id string, req BookRequest) (string, error) {
	e.t.Helper()
	seat, _, err := e.bookStandaloneRun(tenant, id, req)
	return seat, err
}

// bookStandaloneRun is bookStandalone, also returning the activity run ID
// the server gave the execution.
func (e *env) bookStandaloneRun(tenant, id string, req BookRequest) (string, string, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := e.startBooking(ctx, tenant, standaloneOptions(id, e.queue, 30*time.Second), req)
	require.NoError(e.t, err)
	require.NotEmpty(e.t, h.GetRunID())
	var seat string
	err = h.Get(ctx, &seat)
	return seat, h.GetRunID(), err
}

// A standalone EFFECTFUL booking (client.ExecuteActivity, no workflow) is
// deduplicated by its activity ID: started again under the same ID after
// the first run completed — which the server allows, and runs — it books
// nothing more and answers with the first run's seat. Started twice at
// once, the server admits one. Another activity ID is another booking.
func TestStandaloneEffectfulBooksOnce(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newAirlineEnv(t, st, activity.KindEffectful, &airline{hold: 300 * time.Millisecond})

		t.Run("again after it completed", func(t *testing.T) {
			id := testenv.UniqueName("book")
			first, run1, err := e.bookStandaloneRun("acme", id, BookRequest{Flight: "BA117", RequestID: "click-1"})
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(first, "seat 1 on BA117"), first)

			second, run2, err := e.bookStandaloneRun("acme", id, BookRequest{Flight: "BA117", RequestID: "click-2"})
			require.NoError(t, err)
			require.NotEqual(t, run1, run2, "the server runs the same activity ID again once the first run closed")
			assert.Equal(t, first, second, "the second run gets the first one's seat")
			assert.Equal(t, 1, e.ledger.Effects("BA117"), "one seat")
			assert.Equal(t, 1, e.ledger.Calls("BA117"), "the second run never entered the body")
		})

		t.Run("twice at once", func(t *testing.T) {
			id := testenv.UniqueName("book")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var (
				wg      sync.WaitGroup
				handles [2]client.ActivityHandle
				errs    [2]error
			)
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					handles[i], errs[i] = e.startBooking(ctx, "acme", standaloneOptions(id, e.queue, 30*time.Second),
						BookRequest{Flight: "LH400", RequestID: "click"})
				}()
			}
			wg.Wait()
			started := 0
			for i := range 2 {
				if errs[i] == nil {
					started++
					var seat string
					require.NoError(t, handles[i].Get(ctx, &seat))
					assert.True(t, strings.HasPrefix(seat, "seat 1 on LH400"), seat)
					continue
				}
				var already *serviceerror.ActivityExecutionAlreadyStarted
				require.ErrorAs(t, errs[i], &already, "the server refuses a second start while the first runs")
			}
			assert.Equal(t, 1, started)
			assert.Equal(t, 1, e.ledger.Effects("LH400"))

			// Once it has closed, the same ID runs again, and finds the record.
			again, err := e.bookStandalone("acme", id, BookRequest{Flight: "LH400", RequestID: "click-3"})
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(again, "seat 1 on LH400"), again)
			assert.Equal(t, 1, e.ledger.Effects("LH400"))
		})

		t.Run("another activity ID", func(t *testing.T) {
			_, err := e.bookStandalone("acme", testenv.UniqueName("book"), BookRequest{Flight: "AF11"})
			require.NoError(t, err)
			_, err = e.bookStandalone("acme", testenv.UniqueName("book"), BookRequest{Flight: "AF11"})
			require.NoError(t, err)
			assert.Equal(t, 2, e.ledger.Effects("AF11"), "the activity ID scopes a standalone key, as the run scopes a workflow's")
		})
	})
}

// A standalone activity's tenant travels from interceptor.WithTenant on the
// starting client through the tenant propagator; without one it is
// Options.DefaultTenant; with neither, nothing runs and the caller gets the
// typed error saying no effect was applied.
func TestStandaloneTenant(t *testing.T) {
	t.Parallel()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)

	t.Run("header", func(t *testing.T) {
		t.Parallel()
		e := newAirlineEnv(t, mem, activity.KindEffectful, &airline{})
		id := testenv.UniqueName("book")
		req := BookRequest{Flight: "BA117"}
		_, err := e.bookStandalone("tenant-from-header", id, req)
		require.NoError(t, err)
		rec := requireStandaloneRecord(t, mem, e.events, "tenant-from-header", id, store.StateCompleted)
		// The server hands the worker the activity's namespace and ID: the
		// key is scoped by them.
		want, err := activity.Effectful((&airline{}).Book, "flight").Key("tenant-from-header",
			wire.StandaloneRun(server.GetDefaultNamespace(), id), []any{req})
		require.NoError(t, err)
		assert.Equal(t, string(want), rec.Key)
	})
	t.Run("default", func(t *testing.T) {
		t.Parallel()
		e := newAirlineEnvWith(t, mem, activity.KindEffectful, &airline{},
			interceptor.Options{Lease: 2 * time.Second, DefaultTenant: "tenant-by-default"})
		id := testenv.UniqueName("book")
		_, err := e.bookStandalone("", id, BookRequest{Flight: "BA117"})
		require.NoError(t, err)
		requireStandaloneRecord(t, mem, e.events, "tenant-by-default", id, store.StateCompleted)
	})
	t.Run("none", func(t *testing.T) {
		t.Parallel()
		e := newAirlineEnv(t, mem, activity.KindEffectful, &airline{})
		_, err := e.bookStandalone("", testenv.UniqueName("book"), BookRequest{Flight: "BA117"})
		requireNoTenant(t, err)
		assert.Contains(t, err.Error(), "the standalone activity carries no tenant")
		assert.Zero(t, e.ledger.Calls("BA117"))
	})
}

// requireStandaloneRecord finds the record the standalone activity id made
// and checks it names the activity and no workflow.
func requireStandaloneRecord(t *testing.T, st store.Store, events *eventLog, tenant, id string, state store.State) store.Record {
	t.Helper()
	var key string
	events.mu.Lock()
	for _, ev := range events.events {
		if ev.ActivityID == id && ev.Key != "" {
			key = ev.Key
			assert.Equal(t, tenant, ev.Tenant)
			assert.Empty(t, ev.WorkflowID)
		}
	}
	events.mu.Unlock()
	require.NotEmpty(t, key, "no event of activity %s carries a key", id)
	rec, err := st.Lookup(context.Background(), store.LookupParams{Tenant: tenant, Key: key})
	require.NoError(t, err)
	assert.Equal(t, state, rec.State)
	assert.Equal(t, id, rec.Origin.ActivityID)
	assert.Empty(t, rec.Origin.WorkflowID, "a standalone activity belongs to no workflow")
	assert.Empty(t, rec.Origin.RunID)
	assert.Equal(t, "Book", rec.Origin.ActivityType)
	return rec
}

// killableStore is a real store seen through one worker process: once
// killed, every call fails at once, as the calls of a process that died
// never arrive. It stands for the process, not for the store, which the
// other workers keep reaching.
type killableStore struct {
	store.Store
	dead atomic.Bool
}

var errProcessDead = errors.New("the worker process is dead")

func (k *killableStore) fault(op string) error {
	if k.dead.Load() {
		return store.Unavailable(op, errProcessDead)
	}
	return nil
}

func (k *killableStore) Claim(ctx context.Context, p store.ClaimParams) (store.Result, error) {
	if err := k.fault("claim"); err != nil {
		return store.Result{}, err
	}
	return k.Store.Claim(ctx, p)
}

func (k *killableStore) Wait(ctx context.Context, p store.WaitParams) (store.Result, error) {
	if err := k.fault("wait"); err != nil {
		return store.Result{}, err
	}
	return k.Store.Wait(ctx, p)
}

func (k *killableStore) Renew(ctx context.Context, p store.RenewParams) (time.Time, error) {
	if err := k.fault("renew"); err != nil {
		return time.Time{}, err
	}
	return k.Store.Renew(ctx, p)
}

func (k *killableStore) Complete(ctx context.Context, p store.CompleteParams) error {
	if err := k.fault("complete"); err != nil {
		return err
	}
	return k.Store.Complete(ctx, p)
}

func (k *killableStore) Release(ctx context.Context, p store.ReleaseParams) error {
	if err := k.fault("release"); err != nil {
		return err
	}
	return k.Store.Release(ctx, p)
}

func (k *killableStore) MarkIndeterminate(ctx context.Context, p store.MarkIndeterminateParams) error {
	if err := k.fault("mark"); err != nil {
		return err
	}
	return k.Store.MarkIndeterminate(ctx, p)
}

func (k *killableStore) Sweep(ctx context.Context, p store.SweepParams) (int, error) {
	if err := k.fault("sweep"); err != nil {
		return 0, err
	}
	return k.Store.Sweep(ctx, p)
}

// stuckAirline books, then hangs without answering until released, as a
// worker killed between the airline's booking and its answer would.
type stuckAirline struct {
	ledger   *Ledger
	entered  chan struct{}
	release  chan struct{}
	returned chan struct{}
	once     sync.Once
}

func (a *stuckAirline) Book(ctx context.Context, req BookRequest) (string, error) {
	defer close(a.returned)
	a.ledger.call(req.Flight)
	n := a.ledger.effect(req.Flight)
	a.once.Do(func() { close(a.entered) })
	<-a.release
	return fmt.Sprintf("seat %d on %s", n, req.Flight), nil
}

// A standalone EFFECTFUL booking whose worker dies in the body (after the
// airline booked) ends indeterminate: the retry Temporal makes on another
// worker finds the dead worker's lease run out and fails with the typed
// error, which reaches the caller of ActivityHandle.Get. No workflow can
// wait for a person, so the operator's command finds the record, says no
// workflow waits, and resolves it; the same activity ID started again then
// answers from the resolution without booking again.
func TestStandaloneKilledMidBodyEndsIndeterminate(t *testing.T) {
	t.Parallel()
	st, global := ctlStore(t)
	logger := zaptest.NewLogger(t)
	queue := testenv.UniqueName("tq")
	ledger := newLedger()
	events := &eventLog{}
	opts := interceptor.Options{Lease: 2 * time.Second, Observer: events}

	// The worker that dies: its calls to the store stop once it is killed.
	// It logs nowhere: its stuck body returns when the test is over.
	dying := &killableStore{Store: st}
	stuck := &stuckAirline{ledger: ledger, entered: make(chan struct{}), release: make(chan struct{}), returned: make(chan struct{})}
	c1 := newClient(server, worker.ClientOptions(client.Options{}, zap.NewNop()))
	o1 := opts
	o1.Store, o1.Observer = dying, nil
	w1, err := worker.New(c1, queue, worker.Options{Worker: workerOptions, Idempotency: o1, SweepInterval: -1})
	require.NoError(t, err)
	require.NoError(t, w1.Register(activity.Effectful(stuck.Book, "flight")))
	require.NoError(t, w1.Start())
	var stopped sync.WaitGroup
	t.Cleanup(func() {
		close(stuck.release)
		receive(t, stuck.returned, "the dead worker's body to return")
		stopped.Wait()
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := testenv.UniqueName("book")
	e := &env{t: t, client: c1, queue: queue, ledger: ledger, events: events}
	h, err := e.startBooking(ctx, "acme", standaloneOptions(id, queue, 3*time.Second), BookRequest{Flight: "BA117", RequestID: "click-1"})
	require.NoError(t, err)
	receive(t, stuck.entered, "the body")

	// Kill it: no more store calls, no more polling. Its body stays stuck.
	dying.dead.Store(true)
	stopped.Add(1)
	go func() { defer stopped.Done(); w1.Stop() }()

	// Another worker takes the retry.
	healthy := &airline{ledger: ledger}
	c2 := newClient(server, worker.ClientOptions(client.Options{}, logger))
	o2 := opts
	o2.Store = st
	w2, err := worker.New(c2, queue, worker.Options{Worker: workerOptions, Idempotency: o2, Logger: logger})
	require.NoError(t, err)
	require.NoError(t, w2.Register(activity.Effectful(healthy.Book, "flight")))
	require.NoError(t, w2.Start())
	t.Cleanup(w2.Stop)

	err = h.Get(ctx, nil)
	o := requireIndeterminate(t, err, activity.ReasonHolderLost)
	assert.Equal(t, id, o.ActivityID)
	assert.Empty(t, o.WorkflowID, "no workflow")
	assert.True(t, o.EffectMayHaveLanded)
	assert.Equal(t, 1, ledger.Effects("BA117"), "the dead worker's booking, and no other")
	assert.Equal(t, 1, ledger.Calls("BA117"), "the retry never entered the body")

	rec := requireStandaloneRecord(t, st, events, "acme", id, store.StateIndeterminate)
	assert.Equal(t, o.Key, rec.Key)

	// The operator's command finds it and says what to do.
	r := ctl(t, nil, append(global, "list", "-tenant", "acme")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, o.Key)
	r = ctl(t, nil, append(global, "show", "-tenant", "acme", "-key", o.Key)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "activity_id  "+id+"\n")
	assert.Contains(t, r.stdout, "workflow_id  - (no workflow: a standalone activity or a Nexus operation)\n")
	r = ctl(t, temporalEnv(), append(global, "decide", "-tenant", "acme", "-key", o.Key, "-free", "-by", "ops@acme")...)
	assert.Equal(t, 1, r.code, "stdout: %s", r.stdout)
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	assert.Contains(t, r.stderr, "outside any workflow, by Book "+id+" (a standalone activity's ID")
	assert.Contains(t, r.stderr, "no workflow waits on the key; settle the record in the store with 'idempotencyctl resolve'")

	r = ctl(t, nil, append(global, "resolve", "-tenant", "acme", "-key", o.Key, "-outcome", `"seat 1 on BA117"`, "-by", "ops@acme")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)

	// The server lets a failed activity ID run again: it finds the decision.
	again, err := e.startBooking(ctx, "acme", client.StartActivityOptions{
		ID: id, TaskQueue: queue, StartToCloseTimeout: 30 * time.Second,
		ActivityIDReusePolicy: enumspb.ACTIVITY_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
	}, BookRequest{Flight: "BA117", RequestID: "click-2"})
	require.NoError(t, err)
	var seat string
	require.NoError(t, again.Get(ctx, &seat))
	assert.Equal(t, "seat 1 on BA117", seat)
	assert.Equal(t, 1, ledger.Effects("BA117"), "resolved: nothing booked again")
}

// receive waits for ch to be closed or to deliver, failing the test after
// a minute.
func receive(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("gave up waiting for %s", what)
	}
}
