package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// t0 is where every test's fake clock starts.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// BookRequest is the one argument of the test activities. Flight is the key
// argument; omitempty makes an empty flight a missing key argument.
type BookRequest struct {
	Flight    string `json:"flight,omitempty"`
	RequestID string `json:"request_id"`
}

// Booking is what the test activities return: Call numbers the body's
// executions, so a deduplicated answer is recognisably the first one's.
type Booking struct {
	Flight string `json:"flight"`
	Call   int    `json:"call"`
	Key    string `json:"key"`
}

// ledger counts side effects: every body execution adds one line.
type ledger struct {
	mu    sync.Mutex
	calls map[string]int
}

func (l *ledger) add(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = make(map[string]int)
	}
	l.calls[name]++
	return l.calls[name]
}

func (l *ledger) count(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[name]
}

func (l *ledger) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		n += c
	}
	return n
}

// hook decides what a body does after it has written its ledger line: nil
// returns the booking.
type hook func(ctx context.Context, call int, req BookRequest) error

// acts holds the test activities. Their type names are the method names.
type acts struct {
	ledger ledger

	mu    sync.Mutex
	hooks map[string]hook
}

func (a *acts) on(name string, h hook) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hooks == nil {
		a.hooks = make(map[string]hook)
	}
	a.hooks[name] = h
}

func (a *acts) body(ctx context.Context, name string, req BookRequest) (Booking, error) {
	call := a.ledger.add(name)
	a.mu.Lock()
	h := a.hooks[name]
	a.mu.Unlock()
	if h != nil {
		if err := h(ctx, call, req); err != nil {
			return Booking{}, err
		}
	}
	key, _ := activity.Key(ctx)
	return Booking{Flight: req.Flight, Call: call, Key: string(key)}, nil
}

// Book is declared EFFECTFUL with key argument "flight".
func (a *acts) Book(ctx context.Context, req BookRequest) (Booking, error) {
	return a.body(ctx, "Book", req)
}

// Reserve is declared IDEMPOTENT with key argument "flight".
func (a *acts) Reserve(ctx context.Context, req BookRequest) (Booking, error) {
	return a.body(ctx, "Reserve", req)
}

// Lookup is declared READ_ONLY.
func (a *acts) Lookup(ctx context.Context, req BookRequest) (Booking, error) {
	return a.body(ctx, "Lookup", req)
}

// Plain has no declaration.
func (a *acts) Plain(ctx context.Context, req BookRequest) (Booking, error) {
	return a.body(ctx, "Plain", req)
}

// Notify is declared EFFECTFUL and returns no value.
func (a *acts) Notify(ctx context.Context, req BookRequest) error {
	_, err := a.body(ctx, "Notify", req)
	return err
}

// RunID returns the run ID and workflow ID the activity sees. It has no
// declaration.
func (a *acts) RunID(ctx context.Context) ([2]string, error) {
	info := sdkactivity.GetInfo(ctx)
	return [2]string{info.WorkflowExecution.RunID, info.WorkflowExecution.ID}, nil
}

// recorder collects the dispatcher's events and lets a test wait for one.
type recorder struct {
	mu     sync.Mutex
	events []interceptor.Event
	waits  []waiter
}

type waiter struct {
	kind interceptor.EventKind
	ch   chan interceptor.Event
}

func (r *recorder) Observe(_ context.Context, e interceptor.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	kept := r.waits[:0]
	for _, w := range r.waits {
		if w.kind == e.Kind {
			w.ch <- e
			close(w.ch)
			continue
		}
		kept = append(kept, w)
	}
	r.waits = kept
}

// next returns a channel that receives the next event of kind.
func (r *recorder) next(kind interceptor.EventKind) <-chan interceptor.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan interceptor.Event, 1)
	r.waits = append(r.waits, waiter{kind: kind, ch: ch})
	return ch
}

func (r *recorder) all() []interceptor.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]interceptor.Event(nil), r.events...)
}

// checkFinal checks that every event of a kind that only reports an end
// state has Event.Final set. (Which event of an execution is its last is
// checked by TestEveryCallReportsOneFinalEvent: the test environment
// numbers every activity alike, so executions cannot be told apart here.)
func (r *recorder) checkFinal(t testing.TB) {
	t.Helper()
	for i, e := range r.all() {
		if endKinds[e.Kind] && !e.Final {
			t.Errorf("event %d (%s) reports an end state without Final: %v", i, e.Kind, r.kinds())
		}
	}
}

// endKinds are the kinds that report only an end state.
var endKinds = map[interceptor.EventKind]bool{
	interceptor.EventDeduplicated: true, interceptor.EventIndeterminate: true,
	interceptor.EventArgumentsMismatch: true, interceptor.EventMisconfigured: true, interceptor.EventNotRun: true,
}

func (r *recorder) kinds() []interceptor.EventKind {
	var ks []interceptor.EventKind
	for _, e := range r.all() {
		ks = append(ks, e.Kind)
	}
	return ks
}

func (r *recorder) count(kind interceptor.EventKind) int {
	n := 0
	for _, e := range r.all() {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func (r *recorder) first(t *testing.T, kind interceptor.EventKind) interceptor.Event {
	t.Helper()
	for _, e := range r.all() {
		if e.Kind == kind {
			return e
		}
	}
	t.Fatalf("no %s event among %v", kind, r.kinds())
	return interceptor.Event{}
}

// faultyStore is the memory store with chosen methods failing as an
// unreachable store does. It injects faults through our own store
// contract; it stands in for no server.
type faultyStore struct {
	*store.Memory

	mu sync.Mutex
	// down holds, per method name, how many of its next calls fail.
	down map[string]int
	// lost holds, per method name, how many of its next calls (after those
	// that fail) take effect and then fail as an answer lost on the way
	// back does.
	lost map[string]int
	// undoTakeovers is how many of the next takeovers (claims with
	// Supersede) take effect, lose their answer and are undone as a
	// durable store undoes them (store/doc.go, "Undoing a claim"): the
	// takeover's record stays, with its lease ended.
	undoTakeovers int
	// pass holds, per method name, how many of its next calls go through
	// before those set to fail by failAfter do.
	pass map[string]int
}

// failAfter lets the next pass calls of op through, then fails n.
func (f *faultyStore) failAfter(op string, pass, n int) {
	f.failNext(op, n)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pass == nil {
		f.pass = make(map[string]int)
	}
	f.pass[op] = pass
}

// undoNextTakeovers makes the next n takeovers land, lose their answer and
// be undone by ending their lease.
func (f *faultyStore) undoNextTakeovers(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.undoTakeovers = n
}

// loseNext makes the next n calls of op, once those set to fail have,
// take effect and then fail as unreachable: the store did the write, its
// answer never arrived.
func (f *faultyStore) loseNext(op string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lost == nil {
		f.lost = make(map[string]int)
	}
	f.lost[op] = n
}

// answer is what a call of op that took effect with err returns.
func (f *faultyStore) answer(op string, err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil && f.lost[op] > 0 {
		f.lost[op]--
		return store.Unavailable("test "+op, errors.New("answer lost"))
	}
	return err
}

// setDown makes every call of op fail (down) or none.
func (f *faultyStore) setDown(op string, down bool) {
	n := 0
	if down {
		n = 1 << 30
	}
	f.failNext(op, n)
}

// failNext makes the next n calls of op fail.
func (f *faultyStore) failNext(op string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down == nil {
		f.down = make(map[string]int)
	}
	f.down[op] = n
}

func (f *faultyStore) fault(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pass[op] > 0 {
		f.pass[op]--
		return nil
	}
	if f.down[op] > 0 {
		f.down[op]--
		return store.Unavailable("test "+op, errors.New("down"))
	}
	return nil
}

func (f *faultyStore) Claim(ctx context.Context, p store.ClaimParams) (store.Result, error) {
	if err := f.fault("Claim"); err != nil {
		return store.Result{}, err
	}
	res, err := f.Memory.Claim(ctx, p)
	f.mu.Lock()
	undo := err == nil && p.Supersede != 0 && res.Status == store.StatusAcquired && f.undoTakeovers > 0
	if undo {
		f.undoTakeovers--
	}
	f.mu.Unlock()
	if undo {
		// The store never learnt whether its answer arrived: it ends the
		// takeover's lease, under the token only it knew.
		if _, err := f.Memory.Renew(ctx, store.RenewParams{Tenant: p.Tenant, Key: p.Key, Token: res.Record.Token, Lease: time.Nanosecond}); err != nil {
			return store.Result{}, err
		}
		time.Sleep(time.Millisecond)
		return store.Result{}, store.Unavailable("test Claim", errors.New("answer lost; the takeover was undone"))
	}
	return res, err
}

func (f *faultyStore) Complete(ctx context.Context, p store.CompleteParams) error {
	if err := f.fault("Complete"); err != nil {
		return err
	}
	return f.answer("Complete", f.Memory.Complete(ctx, p))
}

func (f *faultyStore) Release(ctx context.Context, p store.ReleaseParams) error {
	if err := f.fault("Release"); err != nil {
		return err
	}
	return f.answer("Release", f.Memory.Release(ctx, p))
}

func (f *faultyStore) MarkIndeterminate(ctx context.Context, p store.MarkIndeterminateParams) error {
	if err := f.fault("MarkIndeterminate"); err != nil {
		return err
	}
	return f.answer("MarkIndeterminate", f.Memory.MarkIndeterminate(ctx, p))
}

func (f *faultyStore) Renew(ctx context.Context, p store.RenewParams) (time.Time, error) {
	if err := f.fault("Renew"); err != nil {
		return time.Time{}, err
	}
	return f.Memory.Renew(ctx, p)
}

// harness is one test's world: a fake clock, a memory store behind the
// fault injector, the interceptor, the activities and the events.
type harness struct {
	clock  *storetest.Clock
	mem    *store.Memory
	faults *faultyStore
	ic     *interceptor.Interceptor
	acts   *acts
	rec    *recorder
	decls  map[string]*activity.Declaration
	suite  testsuite.WorkflowTestSuite
}

func newHarness(t testing.TB, configure ...func(*interceptor.Options)) *harness {
	t.Helper()
	clock := storetest.NewClock(t0)
	h := newHarnessOn(t, clock, configure...)
	h.clock = clock
	return h
}

// newHarnessOn is newHarness with the memory store on clock; h.clock is
// left nil for the caller to set when clock is a *storetest.Clock.
func newHarnessOn(t testing.TB, clock store.Clock, configure ...func(*interceptor.Options)) *harness {
	t.Helper()
	mem, err := store.NewMemory(store.MemoryOptions{Clock: clock, PollInterval: time.Millisecond})
	require.NoError(t, err)
	h := &harness{
		mem:    mem,
		faults: &faultyStore{Memory: mem},
		acts:   &acts{},
		rec:    &recorder{},
	}
	opts := interceptor.Options{
		Store:          h.faults,
		Lease:          300 * time.Millisecond,
		WaitHeartbeat:  50 * time.Millisecond,
		RecordAttempts: 2,
		RecordBackoff:  time.Millisecond,
		StoreTimeout:   5 * time.Second,
		ClaimRetry:     100 * time.Millisecond,
		Observer:       h.rec,
		Identity:       "test-worker",
	}
	for _, c := range configure {
		c(&opts)
	}
	t.Cleanup(func() { h.rec.checkFinal(t) })
	// The SDK logs every failed attempt; the tests assert on events instead.
	h.suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	h.ic, err = interceptor.New(opts)
	require.NoError(t, err)
	t.Cleanup(h.ic.Stop)
	h.decls = map[string]*activity.Declaration{
		"Book":    activity.Effectful(h.acts.Book, "flight"),
		"Reserve": activity.Idempotent(h.acts.Reserve, "flight"),
		"Lookup":  activity.ReadOnly(h.acts.Lookup),
		"Notify":  activity.Effectful(h.acts.Notify, "flight"),
	}
	for _, d := range h.decls {
		require.NoError(t, h.ic.Declare(d))
	}
	return h
}

func (h *harness) register(r interface{ RegisterActivity(any) }) {
	r.RegisterActivity(h.acts.Book)
	r.RegisterActivity(h.acts.Reserve)
	r.RegisterActivity(h.acts.Lookup)
	r.RegisterActivity(h.acts.Plain)
	r.RegisterActivity(h.acts.Notify)
	r.RegisterActivity(h.acts.RunID)
}

// tenantHeader returns the header the tenant propagator reads.
func tenantHeader(t testing.TB, tenant string) *commonpb.Header {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(tenant)
	require.NoError(t, err)
	return &commonpb.Header{Fields: map[string]*commonpb.Payload{interceptor.TenantHeader: p}}
}

// activityEnv returns an activity test environment running through the
// harness's interceptor, under tenant ("" for none).
func (h *harness) activityEnv(t testing.TB, tenant string) *testsuite.TestActivityEnvironment {
	t.Helper()
	env := h.suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{h.ic}})
	env.SetContextPropagators([]workflow.ContextPropagator{interceptor.TenantPropagator()})
	if tenant != "" {
		env.SetHeader(tenantHeader(t, tenant))
	}
	h.register(env)
	return env
}

// workflowEnv returns a workflow test environment running through the
// harness's interceptor, under tenant.
func (h *harness) workflowEnv(t testing.TB, tenant string) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := h.suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{h.ic}})
	env.SetContextPropagators([]workflow.ContextPropagator{interceptor.TenantPropagator()})
	env.SetHeader(tenantHeader(t, tenant))
	h.register(env)
	return env
}

// book executes fn (one of h.acts' methods) in env with req.
func book(env *testsuite.TestActivityEnvironment, fn any, req BookRequest) (Booking, error) {
	val, err := env.ExecuteActivity(fn, req)
	if err != nil {
		return Booking{}, err
	}
	var b Booking
	if err := val.Get(&b); err != nil {
		return Booking{}, fmt.Errorf("decoding the result: %w", err)
	}
	return b, nil
}

// runIDs returns the run ID and workflow ID activities in env see.
func (h *harness) runIDs(t *testing.T, env *testsuite.TestActivityEnvironment) (runID, workflowID string) {
	t.Helper()
	val, err := env.ExecuteActivity(h.acts.RunID)
	require.NoError(t, err)
	var ids [2]string
	require.NoError(t, val.Get(&ids))
	require.NotEmpty(t, ids[0], "run ID")
	require.NotEmpty(t, ids[1], "workflow ID")
	return ids[0], ids[1]
}

// key derives the key name's declaration gives req under tenant and run.
func (h *harness) key(t *testing.T, name, tenant, run string, req BookRequest) string {
	t.Helper()
	k, err := h.decls[name].Key(tenant, run, []any{req})
	require.NoError(t, err)
	return string(k)
}

func (h *harness) lookup(t *testing.T, tenant, key string) (store.Record, error) {
	t.Helper()
	return h.mem.Lookup(context.Background(), store.LookupParams{Tenant: tenant, Key: key})
}

// requireIndeterminate asserts err is the non-retryable indeterminate error
// and returns its details.
func requireIndeterminate(t *testing.T, err error, reason activity.Reason, entered bool) activity.IndeterminateOutcome {
	t.Helper()
	require.Error(t, err)
	o, ok := activity.AsIndeterminate(err)
	require.True(t, ok, "want the indeterminate error, got %v", err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.True(t, appErr.NonRetryable(), "the indeterminate error is non-retryable")
	require.Equal(t, reason, o.Reason, "Reason")
	require.Equal(t, entered, o.BodyEntered, "BodyEntered")
	return o
}

// requireApplicationError asserts err is an application error of typ and
// returns it.
func requireApplicationError(t *testing.T, err error, typ string) *temporal.ApplicationError {
	t.Helper()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, "want an application error, got %v", err)
	require.Equal(t, typ, appErr.Type(), "error type (%v)", err)
	return appErr
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("gave up waiting for %s", what)
		var zero T
		return zero
	}
}

var _ = keyspace.Key("") // keyspace is used by the tests below

// kindCase names one of the harness's activities: the subtest name, the
// activity (and ledger) name, and how to reach the function.
type kindCase struct {
	name string
	act  string
	fn   func(h *harness) any
}

// dedupKinds are the activities the dispatcher claims keys for.
var dedupKinds = []kindCase{
	{"Effectful", "Book", func(h *harness) any { return h.acts.Book }},
	{"Idempotent", "Reserve", func(h *harness) any { return h.acts.Reserve }},
}

// passThroughKinds are the activities the dispatcher leaves alone: one with
// no policy and one READ_ONLY.
var passThroughKinds = []kindCase{
	{"NoPolicy", "Plain", func(h *harness) any { return h.acts.Plain }},
	{"ReadOnly", "Lookup", func(h *harness) any { return h.acts.Lookup }},
}

// Lookup fails as the other methods do (failNext("Lookup", n), loseNext
// does not apply: a lookup writes nothing).
func (f *faultyStore) Lookup(ctx context.Context, p store.LookupParams) (store.Record, error) {
	if err := f.fault("Lookup"); err != nil {
		return store.Record{}, err
	}
	return f.Memory.Lookup(ctx, p)
}
