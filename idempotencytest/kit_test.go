package idempotencytest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/goleak"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/idempotencytest"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Hotel holds an IDEMPOTENT activity: repeating a hold lands the same
// state, so the interceptor runs it again where an EFFECTFUL one stops.
type Hotel struct {
	mu    sync.Mutex
	Holds int
}

func (h *Hotel) Hold(_ context.Context, req BookRequest) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Holds++
	return fmt.Sprintf("HOLD-%s-%d", req.Flight, h.Holds), nil
}

func HoldRoom(ctx workflow.Context, flight string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3, InitialInterval: time.Second}})
	var conf string
	err := workflow.ExecuteActivity(ctx, "Hold", BookRequest{Flight: flight}).Get(ctx, &conf)
	return conf, err
}

type kit struct {
	env     *idempotencytest.Env
	airline *Airline
	hotel   *Hotel
	probed  int
}

func newKit(t *testing.T, opts idempotencytest.Options) *kit {
	t.Helper()
	k := &kit{airline: &Airline{}, hotel: &Hotel{}}
	book, err := activity.Effectful(k.airline.Book, "flight").WithProbe(
		func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
			k.probed++
			return activity.AnswerCannotTell(), nil
		})
	require.NoError(t, err)
	opts.Declarations = []*activity.Declaration{book, activity.Idempotent(k.hotel.Hold, "flight")}
	k.env, err = idempotencytest.New(quietSuite(), opts)
	require.NoError(t, err)
	t.Cleanup(k.env.Stop)
	return k
}

// A store that does not answer the claim is not an indeterminate outcome:
// the attempt ran nothing, says so with the retryable NotRun error, and the
// retry policy runs the call again, which books once.
func TestStoreUnavailableRunsNothingThenRetries(t *testing.T) {
	t.Parallel()
	k := newKit(t, idempotencytest.Options{})
	k.env.OnNext("Book", idempotencytest.Indeterminate(activity.ReasonStoreUnavailable))
	k.env.ExecuteWorkflow(BookTrip, "BA117")
	require.NoError(t, k.env.GetWorkflowError())
	assert.Equal(t, 1, k.airline.Sold, "seats sold")
	assert.Equal(t, 1, k.env.EffectsOf("Book"))
	assert.Zero(t, k.probed, "nothing to probe: nothing ran")
	assert.NotContains(t, k.env.EventKinds("Book"), interceptor.EventIndeterminate)
}

// Every other indeterminate reason ends an EFFECTFUL call with the indeterminate
// error of that reason; only a body that failed applied an effect.
func TestIndeterminateEffectful(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		reason  activity.Reason
		effects int
		probed  int
	}{
		{activity.ReasonRecorded, 0, 0},
		{activity.ReasonHolderLost, 0, 1},
		{activity.ReasonBodyFailed, 1, 1},
		{activity.ReasonKeyNotDerivable, 0, 0},
	} {
		t.Run(string(tt.reason), func(t *testing.T) {
			t.Parallel()
			k := newKit(t, idempotencytest.Options{})
			k.env.OnNext("Book", idempotencytest.Indeterminate(tt.reason))
			k.env.ExecuteWorkflow(BookTrip, "BA117")
			o, ok := activity.AsIndeterminate(k.env.GetWorkflowError())
			require.True(t, ok, "%v", k.env.GetWorkflowError())
			assert.Equal(t, tt.reason, o.Reason)
			assert.Equal(t, tt.effects, k.airline.Sold, "seats sold")
			assert.Equal(t, tt.effects, k.env.EffectsOf("Book"))
			assert.Equal(t, tt.probed, k.probed, "the declaration's probe was asked")
			assert.Contains(t, k.env.EventKinds("Book"), interceptor.EventIndeterminate)
		})
	}
}

// An IDEMPOTENT activity is run again where an EFFECTFUL one stops.
func TestIndeterminateIdempotent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		reason  activity.Reason
		effects int
	}{
		{activity.ReasonHolderLost, 1},       // taken over, run
		{activity.ReasonBodyFailed, 2},       // released, retried
		{activity.ReasonStoreUnavailable, 1}, // retryable, run on the retry
	} {
		t.Run(string(tt.reason), func(t *testing.T) {
			t.Parallel()
			k := newKit(t, idempotencytest.Options{})
			k.env.OnNext("Hold", idempotencytest.Indeterminate(tt.reason))
			k.env.ExecuteWorkflow(HoldRoom, "BA117")
			require.NoError(t, k.env.GetWorkflowError())
			var conf string
			require.NoError(t, k.env.GetWorkflowResult(&conf))
			assert.Equal(t, fmt.Sprintf("HOLD-BA117-%d", tt.effects), conf)
			assert.Equal(t, tt.effects, k.hotel.Holds)
			assert.Equal(t, tt.effects, k.env.EffectsOf("Hold"))
		})
	}
}

func TestDeduplicated(t *testing.T) {
	t.Parallel()
	k := newKit(t, idempotencytest.Options{})
	k.env.OnNext("Hold", idempotencytest.Deduplicated("HOLD-earlier"))
	k.env.ExecuteWorkflow(HoldRoom, "BA117")
	var conf string
	require.NoError(t, k.env.GetWorkflowResult(&conf))
	assert.Equal(t, "HOLD-earlier", conf)
	assert.Zero(t, k.hotel.Holds)
	assert.Empty(t, k.env.Effects())
	page, err := k.env.Store().List(context.Background(), store.ListParams{Tenant: idempotencytest.DefaultTenant})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	assert.Equal(t, idempotencytest.Holder, page.Records[0].Holder, "the record another call made")
}

// A probe that says the effect did not land frees the key: the retry runs
// the body again.
func TestProbeNotLanded(t *testing.T) {
	t.Parallel()
	k := newKit(t, idempotencytest.Options{})
	k.env.OnNext("Book", idempotencytest.Indeterminate(activity.ReasonBodyFailed).ProbeAnswers(activity.AnswerNotLanded()))
	k.env.ExecuteWorkflow(BookTrip, "BA117")
	var conf string
	require.NoError(t, k.env.GetWorkflowResult(&conf))
	assert.Equal(t, "CONF-BA117-2", conf, "the retry's booking")
	assert.Equal(t, 2, k.env.EffectsOf("Book"))
	assert.Zero(t, k.probed, "the scripted answer, not the declaration's probe")
	assert.Equal(t, []interceptor.EventKind{interceptor.EventClaimed, interceptor.EventProbeNotLanded, interceptor.EventReleased,
		interceptor.EventClaimed, interceptor.EventCompleted}, k.env.EventKinds("Book"))
}

// A person's free decision runs the activity again; later executions with
// nothing scripted run as usual.
func TestDecideFree(t *testing.T) {
	t.Parallel()
	k := newKit(t, idempotencytest.Options{AwaitDecision: true})
	k.env.OnNext("Book", idempotencytest.Indeterminate(activity.ReasonHolderLost))
	k.env.DecideAfter(time.Minute, "Book", decision.Decision{Action: decision.ActionFree})
	k.env.ExecuteWorkflow(BookTrip, "BA117")
	var conf string
	require.NoError(t, k.env.GetWorkflowResult(&conf))
	assert.Equal(t, "CONF-BA117-1", conf)
	require.Len(t, k.env.Decisions(), 1)
	d := k.env.Decisions()[0]
	require.NoError(t, d.Err)
	assert.Equal(t, decision.AppliedFreed, d.Result.Applied)
	assert.Equal(t, "idempotencytest", d.Decision.By)
	assert.Equal(t, 1, k.env.EffectsOf("Book"))
}

// A decision sent when nothing waits says so.
func TestDecideNothingWaits(t *testing.T) {
	t.Parallel()
	k := newKit(t, idempotencytest.Options{AwaitDecision: true})
	k.env.DecideAfter(time.Minute, "Book", decision.Decision{Action: decision.ActionFree})
	k.env.ExecuteWorkflow(func(ctx workflow.Context) (string, error) {
		if err := workflow.Sleep(ctx, time.Hour); err != nil {
			return "", err
		}
		return BookTrip(ctx, "BA117")
	})
	require.NoError(t, k.env.GetWorkflowError())
	require.Len(t, k.env.Decisions(), 1)
	assert.ErrorContains(t, k.env.Decisions()[0].Err, "no call of Book waits")
}

func TestOnNextRefusesWhatCannotApply(t *testing.T) {
	t.Parallel()
	k := newKit(t, idempotencytest.Options{})
	assert.Panics(t, func() { k.env.OnNext("Unknown", idempotencytest.Deduplicated(nil)) })
	assert.Panics(t, func() {
		k.env.OnNext("Hold", idempotencytest.Indeterminate(activity.ReasonBodyFailed).ProbeAnswers(activity.AnswerNotLanded()))
	}, "Hold declares no probe")
	assert.Panics(t, func() { idempotencytest.Indeterminate("made_up") })
}

// FareRequest is a booking whose fare must match the call that made the
// record (a checked argument).
type FareRequest struct {
	Flight string `json:"flight"`
	Fare   int    `json:"fare"`
}

func (a *Airline) BookFare(_ context.Context, req FareRequest) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Sold++
	return fmt.Sprintf("CONF-%s-%d", req.Flight, req.Fare), nil
}

// The router's path: a person completes a booking whose record is gone
// (swept while they looked); the record the decision makes keeps the
// decided call's digest, so the workflow's next call with another fare is
// refused instead of answered with the decided booking.
func TestDecisionOnGoneKeyKeepsTheCheck(t *testing.T) {
	t.Parallel()
	a := &Airline{}
	book := activity.MustDeclare(a.BookFare, activity.Policy{Kind: activity.KindEffectful,
		KeyArguments: []string{"flight"}, CheckArguments: []string{"fare"}})
	env, err := idempotencytest.New(quietSuite(), idempotencytest.Options{Declarations: []*activity.Declaration{book}, AwaitDecision: true})
	require.NoError(t, err)
	t.Cleanup(env.Stop)
	env.OnNext("BookFare", idempotencytest.Indeterminate(activity.ReasonBodyFailed))
	env.RegisterDelayedCallback(func() {
		// The record goes while the person looks (an operator freed it).
		p, err := env.Pending()
		require.NoError(t, err)
		require.Len(t, p, 1)
		require.NotEmpty(t, p[0].Outcome.Check, "the outcome carries the digest to the decision")
		require.NoError(t, env.Store().Resolve(context.Background(), store.ResolveParams{Tenant: env.Tenant(),
			Key: p[0].Outcome.Key, Decision: store.ActionFree}))
	}, 30*time.Second)
	env.DecideAfter(time.Minute, "BookFare", decision.Decision{Action: decision.ActionComplete, Result: []byte(`"CONF-BA117-120"`)})

	type answers struct{ First, Second string }
	env.ExecuteWorkflow(func(ctx workflow.Context) (answers, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		var out answers
		if err := workflow.ExecuteActivity(ctx, "BookFare", FareRequest{Flight: "BA117", Fare: 120}).Get(ctx, &out.First); err != nil {
			return out, err
		}
		err := workflow.ExecuteActivity(ctx, "BookFare", FareRequest{Flight: "BA117", Fare: 95}).Get(ctx, &out.Second)
		if m, ok := activity.AsArgumentsMismatch(err); ok {
			out.Second = "mismatch: " + m.Found
			return out, nil
		}
		return out, err
	})
	require.NoError(t, env.GetWorkflowError())
	var got answers
	require.NoError(t, env.GetWorkflowResult(&got))
	assert.Equal(t, answers{First: "CONF-BA117-120", Second: "mismatch: completed"}, got)
	assert.Equal(t, 1, a.Sold, "one seat: the lost answer's")
	require.Len(t, env.Decisions(), 1)
	assert.Equal(t, decision.AppliedRecorded, env.Decisions()[0].Result.Applied)
}

// A scripted mismatch fails the call with the typed error; the body does
// not run. A declaration that checks nothing cannot be scripted so.
func TestScriptedArgumentsMismatch(t *testing.T) {
	t.Parallel()
	a := &Airline{}
	book := activity.MustDeclare(a.BookFare, activity.Policy{Kind: activity.KindEffectful,
		KeyArguments: []string{"flight"}, CheckArguments: []string{"fare"}})
	env, err := idempotencytest.New(quietSuite(), idempotencytest.Options{Declarations: []*activity.Declaration{book}})
	require.NoError(t, err)
	t.Cleanup(env.Stop)
	env.OnNext("BookFare", idempotencytest.ArgumentsMismatch())
	env.ExecuteWorkflow(func(ctx workflow.Context) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		var conf string
		err := workflow.ExecuteActivity(ctx, "BookFare", FareRequest{Flight: "BA117", Fare: 120}).Get(ctx, &conf)
		return conf, err
	})
	m, ok := activity.AsArgumentsMismatch(env.GetWorkflowError())
	require.True(t, ok, "%v", env.GetWorkflowError())
	assert.Equal(t, []string{"fare"}, m.Arguments)
	assert.Equal(t, "idempotencytest-other-call", m.RecordWorkflowID)
	assert.Zero(t, a.Sold)
	assert.Equal(t, []interceptor.EventKind{interceptor.EventArgumentsMismatch}, env.EventKinds("BookFare"))

	k := newKit(t, idempotencytest.Options{})
	assert.Panics(t, func() { k.env.OnNext("Book", idempotencytest.ArgumentsMismatch()) })
}

// BookAgainLater books flight, books it again an hour later (answered from
// the record: no body runs), then books other.
func BookAgainLater(ctx workflow.Context, flight, other string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var conf string
	for i, f := range []string{flight, flight, other} {
		if i == 1 {
			if err := workflow.Sleep(ctx, time.Hour); err != nil {
				return "", err
			}
		}
		if err := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: f}).Get(ctx, &conf); err != nil {
			return "", err
		}
	}
	return conf, nil
}

// A lost answer goes to the next execution that runs the body, not to one
// answered from a record, which cannot lose a body's answer. Before, the
// script went to the next execution whatever it did: a duplicate answered
// from the record used it up and no call ended indeterminate — which made
// the quick start's kit tests flaky, where two bookings run at once and
// either may be the one that claims the key.
func TestBodyFailedGoesToTheBodyThatRuns(t *testing.T) {
	t.Parallel()
	k := newKit(t, idempotencytest.Options{})
	k.env.RegisterDelayedCallback(func() {
		k.env.OnNext("Book", idempotencytest.Indeterminate(activity.ReasonBodyFailed))
	}, 30*time.Minute)
	k.env.ExecuteWorkflow(BookAgainLater, "BA117", "BA118")
	o, ok := activity.AsIndeterminate(k.env.GetWorkflowError())
	require.True(t, ok, "the third call, the next body to run, lost its answer: %v", k.env.GetWorkflowError())
	assert.Equal(t, activity.ReasonBodyFailed, o.Reason)
	kinds := k.env.EventKinds("Book")
	require.GreaterOrEqual(t, len(kinds), 5)
	assert.Equal(t, []interceptor.EventKind{interceptor.EventClaimed, interceptor.EventCompleted,
		interceptor.EventDeduplicated, interceptor.EventClaimed}, kinds[:4], "the duplicate used nothing up")
	assert.Equal(t, interceptor.EventIndeterminate, kinds[len(kinds)-1])
	assert.Equal(t, 2, k.env.EffectsOf("Book"), "both bodies ran")
}

// A malformed decision is rejected, and the corrected one sent after it is
// applied. Before, every decision on a key went with one Update ID, so the
// server took the second for the first's retry: it answered the rejection
// again, nothing was applied, and the workflow waited until the test
// environment gave up.
func TestRejectedDecisionThenCorrected(t *testing.T) {
	t.Parallel()
	k := newKit(t, idempotencytest.Options{AwaitDecision: true})
	k.env.OnNext("Book", idempotencytest.Indeterminate(activity.ReasonBodyFailed))
	// Book returns a string: a number is not its result.
	k.env.DecideAfter(time.Minute, "Book", decision.Decision{Action: decision.ActionComplete, Result: []byte(`42`)})
	k.env.DecideAfter(2*time.Minute, "Book", decision.Decision{Action: decision.ActionComplete, Result: []byte(`"CONF-BA117-by-phone"`)})
	k.env.ExecuteWorkflow(BookTrip, "BA117")
	require.NoError(t, k.env.GetWorkflowError())
	var conf string
	require.NoError(t, k.env.GetWorkflowResult(&conf))
	assert.Equal(t, "CONF-BA117-by-phone", conf)
	got := k.env.Decisions()
	require.Len(t, got, 2)
	assert.Error(t, got[0].Err, "the malformed decision")
	require.NoError(t, got[1].Err, "the corrected decision")
	assert.Equal(t, decision.AppliedRecorded, got[1].Result.Applied)
	assert.Equal(t, 1, k.airline.Sold, "one seat: the lost answer's")
}

// Seat is a booking's answer: a struct, whose shape a person must type.
type Seat struct {
	Flight string `json:"flight"`
	Row    int    `json:"row"`
}

func (a *Airline) BookSeat(_ context.Context, req BookRequest) (Seat, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Sold++
	return Seat{Flight: req.Flight, Row: a.Sold}, nil
}

// The person is told what to type: the pending query gives an example of
// the activity's result type, and the current details (the Web UI's)
// give a decision, straight-quoted in a code span, that pastes as JSON
// and is accepted once filled in. Before, neither gave the shape, and the
// details' template rendered with curly quotes.
func TestPendingShowsTheResultShape(t *testing.T) {
	t.Parallel()
	a := &Airline{}
	env, err := idempotencytest.New(quietSuite(), idempotencytest.Options{
		Declarations: []*activity.Declaration{activity.Effectful(a.BookSeat, "flight")}, AwaitDecision: true})
	require.NoError(t, err)
	t.Cleanup(env.Stop)
	env.OnNext("BookSeat", idempotencytest.Indeterminate(activity.ReasonBodyFailed))
	var template string
	env.RegisterDelayedCallback(func() {
		p, err := env.Pending()
		require.NoError(t, err)
		require.Len(t, p, 1)
		assert.JSONEq(t, `{"flight":"","row":0}`, string(p[0].ResultExample))

		v, err := env.QueryWorkflow("__temporal_workflow_metadata")
		require.NoError(t, err)
		var md sdkpb.WorkflowMetadata
		require.NoError(t, v.Get(&md))
		details := md.GetCurrentDetails()
		assert.NotContains(t, details, "“", "no curly quotes")
		i := strings.Index(details, "Update input: `")
		require.GreaterOrEqual(t, i, 0, "a template: %s", details)
		template = details[i+len("Update input: `"):]
		template = template[:strings.Index(template, "`")]
		require.True(t, json.Valid([]byte(template)), "the template is JSON: %s", template)
		assert.Contains(t, template, `"key":"`+p[0].Outcome.Key+`"`)
		assert.Contains(t, template, `"result":{"flight":"","row":0}`)
	}, 30*time.Second)
	env.RegisterDelayedCallback(func() {
		// The template, filled in, is the decision.
		var d decision.Decision
		require.NoError(t, json.Unmarshal([]byte(strings.Replace(template, `{"flight":"","row":0}`, `{"flight":"BA117","row":12}`, 1)), &d))
		env.UpdateWorkflow(decision.UpdateName, "filled-in", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("rejected: %v", err) }, OnComplete: func(any, error) {}}, d)
	}, time.Minute)
	env.ExecuteWorkflow(func(ctx workflow.Context) (Seat, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		var s Seat
		err := workflow.ExecuteActivity(ctx, "BookSeat", BookRequest{Flight: "BA117"}).Get(ctx, &s)
		return s, err
	})
	var got Seat
	require.NoError(t, env.GetWorkflowResult(&got))
	assert.Equal(t, Seat{Flight: "BA117", Row: 12}, got)
	assert.Equal(t, 1, a.Sold)
}
