package idempotencytest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// DefaultTenant is the tenant executions run under when Options.Tenant is
// empty.
const DefaultTenant = "test"

// DeadlockTimeout is how long the environment's worker lets a workflow task
// run before it reports a potential deadlock (the SDK's default is a
// second, which a loaded test machine can exceed).
const DeadlockTimeout = 10 * time.Second

// Options configure [New].
type Options struct {
	// Declarations are the activities under test. Each is registered with
	// the environment under its name and declared to the interceptor.
	// Activities without a declaration may be registered on the
	// environment directly, as usual.
	Declarations []*activity.Declaration
	// Tenant is the tenant every execution runs under (the interceptor's
	// DefaultTenant). Defaults to DefaultTenant.
	Tenant string
	// AwaitDecision makes an indeterminate outcome wait for a person's
	// decision (interceptor.Options.AwaitDecision), which [Env.DecideAfter]
	// sends. Off: the workflow receives the indeterminate error.
	AwaitDecision bool
	// DecisionTimeout bounds the wait (interceptor.Options.DecisionTimeout).
	// Defaults to none.
	DecisionTimeout time.Duration
	// Configure, if set, changes the interceptor's other options before
	// it is made. The store and the default tenant are the kit's; an
	// Observer set here receives every event after the kit has noted it.
	Configure func(*interceptor.Options)
	// Interceptors run on the environment's worker before the
	// idempotency interceptor (a tracing interceptor, say, whose span the
	// observer then finds in the activity's context).
	Interceptors []sdkinterceptor.WorkerInterceptor
}

// Env is a workflow test environment whose worker runs the idempotency
// interceptor on a memory store. Use the embedded environment as usual
// (ExecuteWorkflow, GetWorkflowResult, OnActivity …); the methods here
// script outcomes, send decisions and report effects.
type Env struct {
	*testsuite.TestWorkflowEnvironment

	tenant string
	scope  interceptor.Scope
	mem    *store.Memory
	st     *faultStore
	ic     *interceptor.Interceptor
	decls  map[string]*activity.Declaration

	forward interceptor.Observer // Options.Configure's observer, if any

	mu        sync.Mutex
	scripts   map[string][]Outcome
	effects   []Effect
	events    []interceptor.Event
	decisions []SentDecision
	sentN     int // the decisions DecideAfter has sent: each its own Update ID
}

// Effect is one body that ran: an effect applied.
type Effect struct {
	// Activity is the activity type.
	Activity string
	// Key is the idempotency key it ran under.
	Key string
	// Attempt is the activity's attempt.
	Attempt int32
	// Err is what the body returned, or the lost answer of
	// Indeterminate(ReasonBodyFailed); nil when it succeeded.
	Err error
}

// SentDecision is a decision [Env.DecideAfter] sent and what came of it.
type SentDecision struct {
	Decision decision.Decision
	// Result is the update's result when the workflow accepted and applied
	// the decision.
	Result decision.Result
	// Err is why it was rejected or could not be applied, or why it could
	// not be sent (nothing waited on the activity type).
	Err error
}

// New returns an environment of suite running the declarations through
// the interceptor. It returns the interceptor's and the declarations'
// errors as they are.
func New(suite *testsuite.WorkflowTestSuite, opts Options) (*Env, error) {
	mem, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		return nil, err
	}
	e := &Env{
		tenant:  opts.Tenant,
		mem:     mem,
		st:      &faultStore{Memory: mem, fail: map[string]error{}},
		decls:   map[string]*activity.Declaration{},
		scripts: map[string][]Outcome{},
	}
	if e.tenant == "" {
		e.tenant = DefaultTenant
	}
	io := interceptor.Options{
		// A store the kit makes fail is not retried before the body: the
		// outcome is the one scripted.
		ClaimRetry:      -1,
		AwaitDecision:   opts.AwaitDecision,
		DecisionTimeout: opts.DecisionTimeout,
	}
	if opts.Configure != nil {
		opts.Configure(&io)
	}
	io.Store, io.DefaultTenant = e.st, e.tenant
	e.scope = io.Scope
	e.forward = io.Observer
	io.Observer = interceptor.ObserverFunc(e.observe)
	if e.ic, err = interceptor.New(io); err != nil {
		return nil, err
	}
	for _, d := range opts.Declarations {
		if d == nil {
			return nil, errors.New("idempotencytest: a nil declaration")
		}
		if d.Probe() != nil {
			// The kit's probe answers what a test scripted, and asks the
			// declaration's own otherwise.
			if d, err = d.WithProbe(e.probe(d.Probe())); err != nil {
				return nil, err
			}
		}
		e.decls[d.Name()] = d
	}
	if err := e.ic.Declare(slices.Collect(mapValues(e.decls))...); err != nil {
		return nil, err
	}
	env := suite.NewTestWorkflowEnvironment()
	// The tenant travels from the workflow to its activities in a header,
	// as on a worker.
	env.SetContextPropagators([]workflow.ContextPropagator{interceptor.TenantPropagator()})
	env.SetWorkerOptions(worker.Options{
		Interceptors: slices.Concat(opts.Interceptors,
			[]sdkinterceptor.WorkerInterceptor{&outer{e: e}, e.ic, &inner{e: e}}),
		// A test machine under load is not a deadlock: a workflow task
		// gets DeadlockTimeout, not the SDK's second.
		DeadlockDetectionTimeout: DeadlockTimeout,
	})
	for _, d := range e.decls {
		env.RegisterActivityWithOptions(d.Func(), sdkactivity.RegisterOptions{Name: d.Name()})
	}
	env.RegisterActivityWithOptions(e.ic.ResolveActivity(),
		sdkactivity.RegisterOptions{Name: decision.ResolveActivityName})
	e.TestWorkflowEnvironment = env
	return e, nil
}

func mapValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// Tenant returns the tenant executions run under.
func (e *Env) Tenant() string { return e.tenant }

// Store returns the memory store the interceptor keeps its records in.
func (e *Env) Store() *store.Memory { return e.mem }

// Interceptor returns the interceptor the environment's worker runs.
func (e *Env) Interceptor() *interceptor.Interceptor { return e.ic }

// Stop stops the interceptor's background work; call it when the test
// ends (t.Cleanup(env.Stop)).
func (e *Env) Stop() { e.ic.Stop() }

// OnNext makes the next execution of activityType that has nothing else
// scripted end with o; executions after it run as usual. A lost answer
// (Indeterminate(activity.ReasonBodyFailed)) goes to the next execution
// that runs the body: one answered from a record or waiting for another
// holder leaves it (and the scripts after it) to the next. Scripts of one
// type are used in the order given. It panics on an activity type that
// was not declared, and on a probe answer for a declaration without a
// probe: a script that could never apply.
func (e *Env) OnNext(activityType string, o Outcome) {
	d, ok := e.decls[activityType]
	if !ok {
		panic(fmt.Sprintf("idempotencytest: activity %q is not among Options.Declarations", activityType))
	}
	if o.probe != nil && d.Probe() == nil {
		panic(fmt.Sprintf("idempotencytest: activity %q declares no probe to answer", activityType))
	}
	if o.kind == kindMismatch && len(d.CheckArguments()) == 0 {
		panic(fmt.Sprintf("idempotencytest: activity %q checks no arguments (Policy.CheckArguments)", activityType))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.scripts[activityType] = append(e.scripts[activityType], o)
}

// next takes the next outcome scripted for activityType: before the claim
// (body false) any but a lost answer, as the body starts (body true) only a
// lost answer. A lost answer is the next body's: an execution answered
// from a record, or waiting for another holder, runs none and leaves it
// for the one that does — when two run at once, either may claim the key.
func (e *Env) next(activityType string, body bool) (Outcome, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.scripts[activityType]
	if len(q) == 0 || q[0].losesAnswer() != body {
		return Outcome{}, false
	}
	e.scripts[activityType] = q[1:]
	return q[0], true
}

// Effects returns the bodies that ran, in the order they returned.
func (e *Env) Effects() []Effect {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.effects)
}

// EffectsOf returns how many bodies of activityType ran.
func (e *Env) EffectsOf(activityType string) int {
	n := 0
	for _, f := range e.Effects() {
		if f.Activity == activityType {
			n++
		}
	}
	return n
}

// Events returns the dispatcher's events so far, in order.
func (e *Env) Events() []interceptor.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.events)
}

// EventKinds returns the kinds of the events of activityType, in order.
func (e *Env) EventKinds(activityType string) []interceptor.EventKind {
	var out []interceptor.EventKind
	for _, ev := range e.Events() {
		if ev.Activity == activityType {
			out = append(out, ev.Kind)
		}
	}
	return out
}

func (e *Env) observe(ctx context.Context, ev interceptor.Event) {
	e.mu.Lock()
	e.events = append(e.events, ev)
	e.mu.Unlock()
	if e.forward != nil {
		e.forward.Observe(ctx, ev)
	}
}

// Pending returns what the workflow waits on a person for (the
// decision.QueryName answer).
func (e *Env) Pending() ([]decision.PendingDecision, error) {
	v, err := e.QueryWorkflow(decision.QueryName)
	if err != nil {
		return nil, err
	}
	var p []decision.PendingDecision
	return p, v.Get(&p)
}

// DecideAfter sends d through the decision update once after of workflow
// time has passed (from when it is called, usually before
// ExecuteWorkflow). An empty d.Key is the key a call of activityType waits
// on; an empty d.By is "idempotencytest". What came of it is in
// [Env.Decisions]. Each decision is its own update: one the workflow
// rejects leaves the call waiting, and a decision sent later is applied
// on its own. after must be positive (it panics otherwise): the
// decision is sent while the workflow runs.
func (e *Env) DecideAfter(after time.Duration, activityType string, d decision.Decision) {
	if after <= 0 {
		panic("idempotencytest: DecideAfter needs a positive delay")
	}
	e.RegisterDelayedCallback(func() {
		if d.By == "" {
			d.By = "idempotencytest"
		}
		if d.Key == "" {
			pending, err := e.Pending()
			if err != nil {
				e.sent(SentDecision{Decision: d, Err: err})
				return
			}
			for _, p := range pending {
				if p.Rejected == nil && p.Outcome.Activity == activityType {
					d.Key = p.Outcome.Key
					break
				}
			}
			if d.Key == "" {
				e.sent(SentDecision{Decision: d, Err: fmt.Errorf("idempotencytest: no call of %s waits for a decision after %v", activityType, after)})
				return
			}
		}
		cb := &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { e.sent(SentDecision{Decision: d, Err: err}) },
			OnComplete: func(v any, err error) {
				s := SentDecision{Decision: d, Err: err}
				if r, ok := v.(decision.Result); ok {
					s.Result = r
				}
				e.sent(s)
			},
		}
		// Each decision goes with its own Update ID: one the workflow
		// rejected (a result of the wrong shape, say) is not the same
		// update as the corrected one sent after it, which the
		// environment would otherwise answer with the first's rejection.
		e.mu.Lock()
		e.sentN++
		id := fmt.Sprintf("idempotencytest-%s-%d", d.Key, e.sentN)
		e.mu.Unlock()
		e.UpdateWorkflow(decision.UpdateName, id, cb, d)
	}, after)
}

func (e *Env) sent(s SentDecision) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.decisions = append(e.decisions, s)
}

// Decisions returns the decisions sent so far and what came of them.
func (e *Env) Decisions() []SentDecision {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.decisions)
}
