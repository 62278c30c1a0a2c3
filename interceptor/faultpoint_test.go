package interceptor_test

// A fault at every store call (issue 43). Each feature is tested on its
// own, and each adds a store call or a path the others' tests never fail.
// These tests run a scenario once to count the store calls it makes, then
// again for each of those calls failed in each way (faultMode), for each
// declaration kind under each option that changes a path, and assert that
// the promise held:
//
//   - at most one effect per key (the ledger counts the body's executions
//     per logical call; a transactional body's effect is its committed
//     row);
//   - no answer the ledger did not give (every result a call returned is
//     one a body execution produced, and whose effect stands);
//   - no call left without an end (every attempt returns; every call ends
//     with a result or a non-retryable error within a few attempts; no
//     store call hangs without a deadline; no claim is left pending once
//     every call and the background settling have ended).
//
// Each test prints "fault points: N, second effects: M" per store (and
// appends it to the file IDEMPOTENCY_FAULT_POINTS_REPORT names, which make
// test prints).
//
// Each scenario runs as Temporal would run it: attempt 1, 2, … of each
// call until it ends with a result or a non-retryable error (a store error
// is retryable), one execution at a time. Nothing decides an outcome by
// sleeping: the store's clock is a fake one, moved only when a wait meets
// a claim whose execution has ended (numberedStore.Wait), and the
// interceptor's background settling is waited for between attempts.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
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
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/wire"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// fpMaxAttempts bounds the attempts of one call: a call that has not ended
// by then is left without an end.
const fpMaxAttempts = 6

// fpTarget is a store the scenarios run on.
type fpTarget struct {
	name string
	// open returns a store, on clock, for one scenario run, and what
	// closes it; tenants keep runs apart, so it may share a table or
	// prefix with the other runs. It is called from many goroutines.
	open func(clock *storetest.Clock) (store.Store, func(), error)
	// tx, when set, runs the transactional kind: write writes the body's
	// effect in the transaction ctx carries, committed reads which calls'
	// effects committed.
	tx *fpTx
	// modes are the ways its calls fail; nil: every faultMode.
	modes []faultMode
}

type fpTx struct {
	write     func(ctx context.Context, tenant, flight string, call int) error
	committed func(ctx context.Context, tenant, flight string) ([]int, error)
}

// fpKind is a declaration kind.
type fpKind struct {
	name          string
	kind          activity.Kind
	probe         bool
	standalone    bool
	transactional bool
	nexus         bool // a Nexus operation (interceptor.NexusOperation) keyed by its input's flight
}

var fpKinds = []fpKind{
	{name: "Idempotent", kind: activity.KindIdempotent},
	{name: "Effectful", kind: activity.KindEffectful},
	{name: "EffectfulProbe", kind: activity.KindEffectful, probe: true},
	{name: "Standalone", kind: activity.KindEffectful, standalone: true},
	{name: "Transactional", kind: activity.KindEffectful, transactional: true},
	{name: "NexusEffectful", kind: activity.KindEffectful, nexus: true},
	{name: "NexusIdempotent", kind: activity.KindIdempotent, nexus: true},
}

// fpCall is one logical call of a scenario: the generation of the secret
// its workflow is keyed under (0: none) and the run a reset kept ("": the
// call's own).
type fpCall struct {
	gen      int
	runScope string
}

// fpOption is an option that changes a path, and the calls of the
// scenario under it. Every call of a scenario is the same call (one
// flight): the first one's effect is the only one allowed.
type fpOption struct {
	name         string
	secrets      bool
	scope        interceptor.Scope
	calls        []fpCall
	workflowOnly bool // run only for a call of a workflow (a standalone activity's or a Nexus operation's key ignores the option)
	// failFirst makes the body's first execution fail before its effect
	// (the downstream refused it), so the claim is freed, marked
	// indeterminate or probed, and the call runs again.
	failFirst bool
	// onSchedule is Options.ProbeOnSchedule's path, for a kind with a
	// probe: the body's first execution has its effect and then fails (the
	// downstream's answer was lost), the probe cannot tell at first, and
	// the call ends indeterminate; then, as the waiting workflow does, the
	// ProbeOnSchedule activity asks the probe on its schedule and the
	// Resolve activity records its answer, which the call returns.
	onSchedule bool
	onlyProbe  bool // run only for a kind with a probe
}

var fpOptions = []fpOption{
	{name: "Plain", calls: []fpCall{{}, {}}},
	{name: "BodyFailsOnce", calls: []fpCall{{}, {}}, failFirst: true},
	{name: "ProbeOnSchedule", calls: []fpCall{{}, {}}, onSchedule: true, onlyProbe: true, workflowOnly: true},
	// Without a secret, a later run of the workflow ID, and a run made by
	// a reset, call again.
	{name: "ScopeWorkflow", scope: interceptor.ScopeWorkflow, calls: []fpCall{{}, {}}, workflowOnly: true},
	{name: "ResetRun", calls: []fpCall{{runScope: "run-before-reset"}, {runScope: "run-before-reset"}}, workflowOnly: true},
	// Two generations: the worker derives under generation 2 and still
	// holds generation 1.
	{name: "KeySecret", secrets: true, calls: []fpCall{{gen: 2}}, workflowOnly: true},
	// A run keyed under generation 1 made the effect; a later run of the
	// workflow ID, keyed under generation 2, calls again.
	{name: "KeySecretScopeWorkflow", secrets: true, scope: interceptor.ScopeWorkflow,
		calls: []fpCall{{gen: 1}, {gen: 2}}, workflowOnly: true},
	// The same across a reset: both runs are scoped by the run the reset
	// kept.
	{name: "KeySecretResetRun", secrets: true,
		calls: []fpCall{{gen: 1, runScope: "run-before-reset"}, {gen: 2, runScope: "run-before-reset"}}, workflowOnly: true},
}

// runFaultPoints runs every kind under every option on each target and
// prints a tally per target. The points run side by side, up to
// fpParallel of the whole package at once: each is a world of its own
// (store, clock, tenant, interceptor), and most of their time is spent
// waiting for a renewal or a deadline. Each scenario then reports as a
// subtest.
func runFaultPoints(t *testing.T, targets []fpTarget, kinds []fpKind, options []fpOption) {
	type point struct {
		at   int
		mode faultMode
		r    fpResult
	}
	type scenario struct {
		target fpTarget
		k      fpKind
		o      fpOption
		clean  fpResult
		points []*point
	}
	var scenarios []*scenario
	for _, target := range targets {
		for _, k := range kinds {
			if k.transactional && target.tx == nil {
				continue
			}
			for _, o := range options {
				if ((k.standalone || k.nexus) && o.workflowOnly) || (o.onlyProbe && !k.probe) {
					continue
				}
				scenarios = append(scenarios, &scenario{target: target, k: k, o: o})
			}
		}
	}
	var wg sync.WaitGroup
	for _, sc := range scenarios {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fpSlots <- struct{}{}
			sc.clean = runScenario(sc.target, sc.k, sc.o, 0, 0)
			<-fpSlots
			if len(sc.clean.problems) > 0 {
				return
			}
			modes := sc.target.modes
			if modes == nil {
				modes = faultModes
			}
			for at := 1; at <= sc.clean.calls; at++ {
				for _, mode := range modes {
					p := &point{at: at, mode: mode}
					sc.points = append(sc.points, p)
					wg.Add(1)
					go func() {
						defer wg.Done()
						fpSlots <- struct{}{}
						defer func() { <-fpSlots }()
						p.r = runScenario(sc.target, sc.k, sc.o, p.at, p.mode)
					}()
				}
			}
		}()
	}
	wg.Wait()

	type tally struct {
		points, second, vacuous int
		ends                    map[string]int
	}
	tallies := make(map[string]*tally)
	for _, sc := range scenarios {
		tl := tallies[sc.target.name]
		if tl == nil {
			tl = &tally{ends: make(map[string]int)}
			tallies[sc.target.name] = tl
		}
		name := sc.k.name + "/" + sc.o.name
		if len(targets) > 1 {
			name = sc.target.name + "/" + name
		}
		t.Run(name, func(t *testing.T) {
			require.Empty(t, sc.clean.problems, "the scenario without a fault")
			require.NotZero(t, sc.clean.calls)
			t.Logf("%d store calls: %s", sc.clean.calls, strings.Join(sc.clean.ops, " "))
			own := make(map[string]int)
			defer func() { t.Logf("calls ended: %v", own) }()
			for _, p := range sc.points {
				r := p.r
				failed := r.failedOp
				if failed == "" {
					// Timing changed the calls the scenario made: this
					// run failed none.
					tl.vacuous++
					failed = "none made"
					t.Logf("fault at call %d by %s: the run made %d calls [%s]", p.at, p.mode, r.calls, strings.Join(r.ops, " "))
				} else {
					tl.points++
				}
				tl.second += r.second
				for _, e := range r.ends {
					tl.ends[e]++
					own[e]++
				}
				for _, problem := range r.problems {
					t.Errorf("fault at call %d (%s) by %s: %s [calls: %s]", p.at, failed, p.mode, problem, strings.Join(r.ops, " "))
				}
			}
		})
	}
	for _, target := range targets {
		tl := tallies[target.name]
		if tl == nil {
			continue
		}
		summary := fmt.Sprintf("%s on %s: fault points: %d, second effects: %d", t.Name(), target.name, tl.points, tl.second)
		t.Logf("%s (calls ended: %v; points whose call the faulted run never made: %d)", summary, tl.ends, tl.vacuous)
		fmt.Println(summary)
		// go test shows a passing package's output only with -v: make
		// test names a file to gather the summaries in, and prints it.
		if name := os.Getenv(fpReportEnv); name != "" {
			f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			require.NoError(t, err)
			_, err = fmt.Fprintln(f, summary)
			require.NoError(t, errors.Join(err, f.Close()))
		}
	}
}

// fpSlots bounds the worlds the fault-point tests of the package run at
// once.
var fpSlots = make(chan struct{}, fpParallel)

// fpReportEnv names the variable holding the file the summaries are
// appended to, one line each.
const fpReportEnv = "IDEMPOTENCY_FAULT_POINTS_REPORT"

// fpResult is what one run of a scenario found.
type fpResult struct {
	calls    int
	ops      []string
	failedOp string
	second   int
	ends     []string
	problems []string
}

// fpWorld is one run of a scenario.
type fpWorld struct {
	kind   fpKind
	target fpTarget
	tenant string
	clock  *storetest.Clock
	ns     *numberedStore
	ic     *interceptor.Interceptor
	suite  testsuite.WorkflowTestSuite

	failFirst  bool
	onSchedule bool
	op         nexus.Operation[BookRequest, Booking] // the Nexus kind's operation

	mu    sync.Mutex
	execs int       // the body's executions, failed ones included
	asked int       // the probe's asks
	given []Booking // what each body execution that had its effect returned
	byKey map[string]Booking
}

var fpTenants atomic.Int64

var fpSecrets = func() map[int]*keyspace.Secret {
	m := make(map[int]*keyspace.Secret)
	for gen := 1; gen <= 2; gen++ {
		s, err := keyspace.NewSecret(gen, []byte(strings.Repeat(string(rune('a'+gen)), keyspace.MinSecretLength)))
		if err != nil {
			panic(err)
		}
		m[gen] = s
	}
	return m
}()

// Book is the body of every scenario's call: it waits for the renewal of
// its claim (so the scenario has a Renew to fail), then has its effect.
func (w *fpWorld) Book(ctx context.Context, req BookRequest) (Booking, error) {
	select {
	case <-w.ns.renewal():
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
	}
	key, _ := activity.Key(ctx)
	w.mu.Lock()
	w.execs++
	if w.failFirst && w.execs == 1 {
		w.mu.Unlock()
		return Booking{}, errors.New("fault point: the downstream refused the booking")
	}
	b := Booking{Flight: req.Flight, Call: len(w.given) + 1, Key: string(key)}
	w.given = append(w.given, b)
	if w.byKey == nil {
		w.byKey = make(map[string]Booking)
	}
	w.byKey[string(key)] = b
	w.mu.Unlock()
	if w.kind.transactional {
		if err := w.target.tx.write(ctx, w.tenant, req.Flight, b.Call); err != nil {
			return Booking{}, err
		}
	}
	if w.onSchedule && b.Call == 1 {
		return Booking{}, errors.New("fault point: the downstream's answer was lost")
	}
	return b, nil
}

// probe is the downstream's answer: the booking made under the key, if
// one was.
func (w *fpWorld) probe(_ context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked++
	if w.onSchedule && w.asked == 1 {
		return activity.AnswerCannotTell(), nil
	}
	if b, ok := w.byKey[string(req.Key)]; ok {
		return activity.AnswerLanded(b), nil
	}
	return activity.AnswerNotLanded(), nil
}

// effects returns the bookings whose effect stands.
func (w *fpWorld) effects(ctx context.Context, flight string) ([]Booking, error) {
	w.mu.Lock()
	given := append([]Booking(nil), w.given...)
	w.mu.Unlock()
	if !w.kind.transactional {
		return given, nil
	}
	calls, err := w.target.tx.committed(ctx, w.tenant, flight)
	if err != nil {
		return nil, err
	}
	var out []Booking
	for _, c := range calls {
		if c < 1 || c > len(given) {
			return nil, fmt.Errorf("a committed effect of call %d, which no body execution made", c)
		}
		out = append(out, given[c-1])
	}
	return out, nil
}

func runScenario(target fpTarget, k fpKind, o fpOption, failAt int, mode faultMode) (r fpResult) {
	setup := func(err error) fpResult {
		r.problems = append(r.problems, "setting up: "+err.Error())
		return r
	}
	clock := storetest.NewClock(t0)
	w := &fpWorld{kind: k, target: target, clock: clock, failFirst: o.failFirst, onSchedule: o.onSchedule,
		tenant: fmt.Sprintf("fp-%d", fpTenants.Add(1))}
	inner, closeStore, err := target.open(clock)
	if err != nil {
		return setup(err)
	}
	defer closeStore()
	st := newNumberedStore(inner, clock, failAt, mode)
	w.ns = numberedOf(st)
	opts := interceptor.Options{
		Store: st,
		// Long enough that, on a loaded machine, the first renewal is sent
		// (a third of a lease in) well before the fence (four fifths), and
		// a store call ends within StoreTimeout: timing must not change
		// which calls a scenario makes.
		Lease:          600 * time.Millisecond,
		WaitHeartbeat:  50 * time.Millisecond,
		RecordAttempts: 2,
		RecordBackoff:  time.Millisecond,
		StoreTimeout:   time.Second,
		ClaimRetry:     time.Second,
		OrphanRetry:    2 * time.Second,
		Identity:       "fault-point-worker",
		Scope:          o.scope,
	}
	if o.secrets {
		opts.KeySecret = fpSecrets[2]
		opts.KeySecrets = []*keyspace.Secret{fpSecrets[1]}
	}
	if k.nexus {
		// Its tenant is the worker's default: the calling workflow here
		// carries no interceptor to send one.
		opts.DefaultTenant = w.tenant
	}
	if w.ic, err = interceptor.New(opts); err != nil {
		return setup(err)
	}
	defer w.ic.Stop()
	var decl *activity.Declaration
	switch {
	case k.nexus:
		w.op, err = interceptor.NexusOperation(w.ic, "book", activity.Policy{Kind: k.kind, KeyArguments: []string{"flight"}},
			func(ctx context.Context, req BookRequest, _ nexus.StartOperationOptions) (Booking, error) {
				return w.Book(ctx, req)
			})
		if err != nil {
			return setup(err)
		}
	case k.transactional:
		decl = activity.Transactional(w.Book, "flight")
	case k.kind == activity.KindIdempotent:
		decl = activity.Idempotent(w.Book, "flight")
	default:
		decl = activity.Effectful(w.Book, "flight")
	}
	if k.probe {
		if decl, err = decl.WithProbe(w.probe); err != nil {
			return setup(err)
		}
	}
	if decl != nil {
		if err := w.ic.Declare(decl); err != nil {
			return setup(err)
		}
	}
	w.suite.SetLogger(discardLogger())

	req := BookRequest{Flight: "BA117"}
	var answers []Booking
	for i, c := range o.calls {
		got, end, problem := w.call(c, req)
		r.ends = append(r.ends, end)
		if problem != "" {
			r.problems = append(r.problems, fmt.Sprintf("call %d: %s", i+1, problem))
		}
		if got != nil {
			answers = append(answers, *got)
		}
	}
	interceptor.WaitBackground(w.ic)

	effects, err := w.effects(context.Background(), req.Flight)
	if err != nil {
		r.problems = append(r.problems, "reading the effects: "+err.Error())
	}
	if len(effects) > 1 {
		r.second = len(effects) - 1
		r.problems = append(r.problems, fmt.Sprintf("%d effects for one key: %+v", len(effects), effects))
	}
	for _, a := range answers {
		if !containsBooking(effects, a) {
			r.problems = append(r.problems, fmt.Sprintf("answered %+v, which no standing effect gave (effects: %+v)", a, effects))
		}
	}
	for _, k := range w.ns.leftPending(context.Background()) {
		r.problems = append(r.problems, "a claim left pending after every call ended: "+k)
	}
	for _, op := range w.ns.hungWithoutEnd() {
		r.problems = append(r.problems, "a "+op+" hung with no deadline to end it")
	}
	r.calls, r.ops = w.ns.calls()
	w.ns.mu.Lock()
	r.failedOp = w.ns.failedOp
	w.ns.mu.Unlock()
	return r
}

func containsBooking(bs []Booking, b Booking) bool {
	for _, x := range bs {
		if x == b {
			return true
		}
	}
	return false
}

// call drives one logical call through its attempts: it returns the
// result it ended with (nil when it ended with an error), how it ended,
// and what went wrong ("" when nothing did).
func (w *fpWorld) call(c fpCall, req BookRequest) (*Booking, string, string) {
	for range 2 {
		val, problem, err := w.attempts(c, w.Book, req)
		if problem != "" {
			return nil, "no end", problem
		}
		if err == nil {
			var b Booking
			if err := val.Get(&b); err != nil {
				return nil, "undecodable", "decoding the result: " + err.Error()
			}
			return &b, "result", ""
		}
		out, indeterminate := activity.AsIndeterminate(err)
		if !w.onSchedule || !indeterminate || !out.Probe {
			return nil, errorType(err), ""
		}
		// The waiting workflow asks the probe on its schedule, in one
		// activity, and records a definite answer through the Resolve
		// activity.
		val, problem, err = w.attempts(c, decision.ProbeOnScheduleActivityName, decision.ProbeOnScheduleRequest{
			Probe: decision.ProbeRequest{Activity: out.Activity, Tenant: out.Tenant, Key: out.Key, Token: out.Token, Reason: out.Reason},
			First: time.Millisecond, Cap: 2 * time.Millisecond, Max: 3, Now: true,
		})
		if problem != "" || err != nil {
			return nil, "probe " + errorType(err), problem
		}
		var reply decision.ProbeReply
		if err := val.Get(&reply); err != nil {
			return nil, "undecodable", "decoding the probe's reply: " + err.Error()
		}
		d := decision.ResolveRequest{Tenant: out.Tenant, Key: out.Key, Token: reply.Token, By: decision.ProbeDecider,
			Check: out.Check, Retention: out.Retention}
		switch {
		case reply.Settled:
			// The record is no longer the indeterminate one: the call
			// runs again.
			continue
		case reply.Landing == activity.Landed.String():
			d.Action, d.Result, d.Outcome = decision.ActionComplete, reply.Result, reply.Outcome
		case reply.Landing == activity.NotLanded.String():
			d.Action = decision.ActionFree
		default:
			return nil, "probe cannot tell", ""
		}
		if _, problem, err := w.attempts(c, decision.ResolveActivityName, d); problem != "" || err != nil {
			return nil, "resolve " + errorType(err), problem
		}
		if d.Action == decision.ActionFree {
			continue
		}
		var b Booking
		if err := json.Unmarshal(reply.Result, &b); err != nil {
			return nil, "undecodable", "decoding the probe's result: " + err.Error()
		}
		return &b, "result by the probe", ""
	}
	return nil, "no end", "the call ran again twice after the probe"
}

func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	if err == nil {
		return ""
	}
	return "error"
}

// attempts runs fn (an activity) through its attempts until one returns a
// result or a non-retryable error, which it returns; problem says why
// none did.
func (w *fpWorld) attempts(c fpCall, fn any, args ...any) (val converter.EncodedValue, problem string, err error) {
	for attempt := 1; attempt <= fpMaxAttempts; attempt++ {
		// One execution at a time: what the last attempt left to settle
		// in the background is settled (or given up) first.
		interceptor.WaitBackground(w.ic)
		dl := &fpDeadline{d: fpAttemptTimeout}
		type answer struct {
			val converter.EncodedValue
			err error
		}
		done := make(chan answer, 1)
		if name, _ := fn.(string); w.kind.nexus && name == "" {
			go func() {
				v, err := w.nexusAttempt(dl, args[0].(BookRequest))
				done <- answer{v, err}
			}()
		} else {
			env := w.env(c, dl)
			go func() {
				v, err := env.ExecuteActivity(fn, args...)
				done <- answer{v, err}
			}()
		}
		var a answer
		select {
		case a = <-done:
		case <-time.After(time.Minute):
			return nil, fmt.Sprintf("attempt %d never returned", attempt), nil
		}
		if dl.expired.Load() {
			// Temporal timed the attempt out, whatever it returned.
			continue
		}
		var appErr *temporal.ApplicationError
		if a.err == nil || (errors.As(a.err, &appErr) && appErr.NonRetryable()) {
			return a.val, "", a.err
		}
	}
	return nil, fmt.Sprintf("no end after %d attempts", fpMaxAttempts), nil
}

// nexusAttempt is one start request of the Nexus operation: a workflow
// that calls it once. (The test environment does not retry a start
// request; attempts does, as the server does.)
func (w *fpWorld) nexusAttempt(dl *fpDeadline, req BookRequest) (converter.EncodedValue, error) {
	env := w.suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	svc := nexus.NewService(fpNexusService)
	if err := svc.Register(&fpDeadlineOp{Operation: w.op, root: dl}); err != nil {
		return nil, err
	}
	env.RegisterNexusService(svc)
	env.RegisterWorkflowWithOptions(fpNexusCaller, workflow.RegisterOptions{Name: "fpNexusCaller"})
	env.ExecuteWorkflow("fpNexusCaller", req)
	if err := env.GetWorkflowError(); err != nil {
		return nil, err
	}
	var b Booking
	if err := env.GetWorkflowResult(&b); err != nil {
		return nil, err
	}
	p, err := converter.GetDefaultDataConverter().ToPayloads(b)
	if err != nil {
		return nil, err
	}
	return fpValue{p}, nil
}

const fpNexusService = "fault-points"

// fpNexusCaller is the workflow that starts the Nexus operation.
func fpNexusCaller(ctx workflow.Context, req BookRequest) (Booking, error) {
	var b Booking
	err := workflow.NewNexusClient("fault-points-endpoint", fpNexusService).
		ExecuteOperation(ctx, "book", req, workflow.NexusOperationOptions{}).Get(ctx, &b)
	return b, err
}

// fpValue is a result decoded as ExecuteActivity's would be.
type fpValue struct{ p *commonpb.Payloads }

func (v fpValue) HasValue() bool { return v.p != nil }
func (v fpValue) Get(valuePtr any) error {
	return converter.GetDefaultDataConverter().FromPayloads(v.p, valuePtr)
}

// fpDeadlineOp gives the Nexus operation's start request the attempt's
// deadline, as fpDeadline gives an activity's.
type fpDeadlineOp struct {
	nexus.Operation[BookRequest, Booking]
	root *fpDeadline
}

func (o *fpDeadlineOp) Start(ctx context.Context, req BookRequest, opts nexus.StartOperationOptions) (nexus.HandlerStartOperationResult[Booking], error) {
	ctx, cancel := context.WithTimeout(ctx, o.root.d)
	defer cancel()
	r, err := o.Operation.Start(ctx, req, opts)
	if ctx.Err() != nil {
		o.root.expired.Store(true)
	}
	return r, err
}

// env returns the environment of one attempt of c. Each environment
// numbers its activity IDs from the same start, so every attempt is one
// activity execution (and, standalone, one activity ID) run again.
func (w *fpWorld) env(c fpCall, dl *fpDeadline) *testsuite.TestActivityEnvironment {
	env := w.suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{dl, w.ic}})
	env.SetContextPropagators([]workflow.ContextPropagator{interceptor.TenantPropagator()})
	dc := converter.GetDefaultDataConverter()
	h := &commonpb.Header{Fields: map[string]*commonpb.Payload{}}
	put := func(name string, v any) {
		if p, err := dc.ToPayload(v); err == nil {
			h.Fields[name] = p
		}
	}
	put(interceptor.TenantHeader, w.tenant)
	if c.gen > 0 {
		put(wire.KeySecretHeader, c.gen)
	}
	if c.runScope != "" {
		put(wire.RunScopeHeader, c.runScope)
	}
	env.SetHeader(h)
	if w.kind.standalone {
		env.SetExecuteActivitiesInWorkflow(false)
	}
	env.RegisterActivity(w.Book)
	env.RegisterActivityWithOptions(w.ic.ProbeOnScheduleActivity(), sdkactivity.RegisterOptions{Name: decision.ProbeOnScheduleActivityName})
	env.RegisterActivityWithOptions(w.ic.ResolveActivity(), sdkactivity.RegisterOptions{Name: decision.ResolveActivityName})
	return env
}

// fpDeadline is the start-to-close timeout of an attempt, as the worker
// of a real server gives the activity's context: the test environment's
// is ten minutes.
type fpDeadline struct {
	sdkinterceptor.WorkerInterceptorBase
	d       time.Duration
	expired atomic.Bool
}

func (d *fpDeadline) InterceptActivity(_ context.Context, next sdkinterceptor.ActivityInboundInterceptor) sdkinterceptor.ActivityInboundInterceptor {
	i := &fpDeadlineInbound{root: d}
	i.Next = next
	return i
}

type fpDeadlineInbound struct {
	sdkinterceptor.ActivityInboundInterceptorBase
	root *fpDeadline
}

func (i *fpDeadlineInbound) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, i.root.d)
	defer cancel()
	v, err := i.Next.ExecuteActivity(ctx, in)
	if ctx.Err() != nil {
		i.root.expired.Store(true)
	}
	return v, err
}

// memoryTarget is the memory store.
func memoryTarget() fpTarget {
	return fpTarget{name: "memory", open: func(clock *storetest.Clock) (store.Store, func(), error) {
		mem, err := store.NewMemory(store.MemoryOptions{Clock: clock, PollInterval: time.Millisecond})
		return mem, func() {}, err
	}}
}

// TestFaultAtEveryStoreCall fails each store call of each scenario in each
// way on the memory store.
func TestFaultAtEveryStoreCall(t *testing.T) {
	t.Parallel()
	runFaultPoints(t, []fpTarget{memoryTarget()}, fpKinds, fpOptions)
}

func discardLogger() log.Logger { return log.NewStructuredLogger(slog.New(slog.DiscardHandler)) }
