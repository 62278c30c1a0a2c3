package interceptor_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// decisionEnv is a workflow environment whose interceptor waits for a
// person, with the resolve activity registered on the harness's store.
func decisionEnv(t *testing.T, timeout time.Duration) (*harness, *testsuite.TestWorkflowEnvironment) {
	t.Helper()
	h := newHarness(t, func(o *interceptor.Options) {
		o.AwaitDecision = true
		o.DecisionTimeout = timeout
	})
	env := h.workflowEnv(t, "acme")
	env.RegisterActivityWithOptions(interceptor.ResolveActivityIn(h.mem, nil),
		sdkactivity.RegisterOptions{Name: decision.ResolveActivityName})
	// The first call's answer is lost after the effect; later calls succeed.
	h.acts.on("Book", func(_ context.Context, call int, _ BookRequest) error {
		if call == 1 {
			return errors.New("gateway timeout")
		}
		return nil
	})
	return h, env
}

// pendingThen queries the pending decisions once the workflow waits, hands
// them to check, and signals the decision it returns.
func pendingThen(t *testing.T, env *testsuite.TestWorkflowEnvironment, decide func([]decision.PendingDecision) decision.Decision) {
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(decision.QueryName)
		require.NoError(t, err)
		var pending []decision.PendingDecision
		require.NoError(t, v.Get(&pending))
		env.SignalWorkflow(decision.SignalName, decide(pending))
	}, time.Minute)
}

func TestAwaitDecisionComplete(t *testing.T) {
	t.Parallel()
	h, env := decisionEnv(t, 0)
	want := Booking{Flight: "BA117", Call: 42, Key: "decided by a person"}
	pendingThen(t, env, func(p []decision.PendingDecision) decision.Decision {
		require.Len(t, p, 1)
		assert.Equal(t, "Book", p[0].Outcome.Activity)
		assert.Equal(t, activity.ReasonBodyFailed, p[0].Outcome.Reason)
		result, err := json.Marshal(want)
		require.NoError(t, err)
		return decision.Decision{Key: p[0].Outcome.Key, Action: decision.ActionComplete, Result: result, By: "ops@acme"}
	})
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var got Booking
	require.NoError(t, env.GetWorkflowResult(&got))
	assert.Equal(t, want, got, "the call returns the person's answer")
	assert.Equal(t, 1, h.acts.ledger.count("Book"), "the answer came from the record; the body did not run again")
	assert.Equal(t, 1, h.rec.count(interceptor.EventDeduplicated))
}

func TestAwaitDecisionFree(t *testing.T) {
	t.Parallel()
	h, env := decisionEnv(t, 0)
	pendingThen(t, env, func(p []decision.PendingDecision) decision.Decision {
		require.Len(t, p, 1)
		return decision.Decision{Key: p[0].Outcome.Key, Action: decision.ActionFree, By: "ops@acme"}
	})
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	require.NoError(t, env.GetWorkflowError())
	var got Booking
	require.NoError(t, env.GetWorkflowResult(&got))
	assert.Equal(t, 2, got.Call, "the freed key ran the body again")
	assert.Equal(t, 2, h.acts.ledger.count("Book"))
}

func TestAwaitDecisionFail(t *testing.T) {
	t.Parallel()
	h, env := decisionEnv(t, 0)
	pendingThen(t, env, func(p []decision.PendingDecision) decision.Decision {
		return decision.Decision{Key: p[0].Outcome.Key, Action: "FAIL", By: "ops@acme"} // actions are case-insensitive
	})
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	o, ok := activity.AsIndeterminate(env.GetWorkflowError())
	require.True(t, ok, "%v", env.GetWorkflowError())
	assert.Equal(t, activity.ReasonBodyFailed, o.Reason)
	assert.Equal(t, 1, h.acts.ledger.count("Book"))
}

func TestAwaitDecisionRetryAfterOutsideResolve(t *testing.T) {
	t.Parallel()
	h, env := decisionEnv(t, 0)
	pendingThen(t, env, func(p []decision.PendingDecision) decision.Decision {
		// An operator settled the record elsewhere (idempotencyctl resolve).
		outcome, err := interceptor.EncodeOutcome(nil, Booking{Flight: "BA117", Call: 7})
		require.NoError(t, err)
		require.NoError(t, h.mem.Resolve(context.Background(), store.ResolveParams{
			Tenant: p[0].Outcome.Tenant, Key: p[0].Outcome.Key, Decision: store.ActionComplete, Outcome: outcome,
		}))
		return decision.Decision{Key: p[0].Outcome.Key, Action: decision.ActionRetry, By: "ops@acme"}
	})
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	require.NoError(t, env.GetWorkflowError())
	var got Booking
	require.NoError(t, env.GetWorkflowResult(&got))
	assert.Equal(t, 7, got.Call)
	assert.Equal(t, 1, h.acts.ledger.count("Book"))
}

// A decision for another key is rejected; the call keeps waiting and the
// timeout ends it with the indeterminate error.
func TestAwaitDecisionTimeout(t *testing.T) {
	t.Parallel()
	h, env := decisionEnv(t, time.Hour)
	pendingThen(t, env, func([]decision.PendingDecision) decision.Decision {
		return decision.Decision{Key: "v1:not-the-key", Action: decision.ActionFree, By: "ops@acme"}
	})
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	_, ok := activity.AsIndeterminate(env.GetWorkflowError())
	require.True(t, ok, "%v", env.GetWorkflowError())
	assert.Equal(t, 1, h.acts.ledger.count("Book"))
}

// Without AwaitDecision the workflow receives the error at once, and
// activities that are not EFFECTFUL are never routed.
func TestAwaitDecisionOff(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	env := h.workflowEnv(t, "acme")
	h.acts.on("Book", func(context.Context, int, BookRequest) error { return errors.New("gateway timeout") })
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	_, ok := activity.AsIndeterminate(env.GetWorkflowError())
	require.True(t, ok)
}

func TestResolveActivityRefusesUnknownAction(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resolve := interceptor.ResolveActivityIn(h.mem, nil)
	err := resolve(context.Background(), decision.ResolveRequest{Tenant: "t", Key: "k", Action: decision.ActionRetry})
	require.Error(t, err)
	assert.NoError(t, resolve(context.Background(), decision.ResolveRequest{Tenant: "t", Key: "k", Action: decision.ActionFree}),
		"a key already settled (here: never claimed) is not an error")
}

// A decision the store refuses as malformed is refused for good: retrying
// the Resolve activity could never succeed.
func TestResolveActivityInvalidIsNonRetryable(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resolve := interceptor.ResolveActivityIn(h.mem, nil)
	for _, req := range []decision.ResolveRequest{
		{Tenant: "ac\x00me", Key: "k", Action: decision.ActionFree},
		{Tenant: "acme", Key: "", Action: decision.ActionFree},
	} {
		err := resolve(context.Background(), req)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr, "%+v", req)
		assert.True(t, appErr.NonRetryable(), "%+v", req)
		assert.ErrorIs(t, err, store.ErrInvalid)
	}
}

// Two identical calls in one turn that both end on the same indeterminate
// key are settled by one decision.
func TestAwaitDecisionSettlesDuplicatesTogether(t *testing.T) {
	t.Parallel()
	h, env := decisionEnv(t, 0)
	want := Booking{Flight: "BA117", Call: 42}
	pendingThen(t, env, func(p []decision.PendingDecision) decision.Decision {
		require.Len(t, p, 1, "one key, listed once")
		result, err := json.Marshal(want)
		require.NoError(t, err)
		return decision.Decision{Key: p[0].Outcome.Key, Action: decision.ActionComplete, Result: result, By: "ops@acme"}
	})
	env.ExecuteWorkflow(TwiceConcurrently, "BA117")
	require.NoError(t, env.GetWorkflowError())
	var got [2]Booking
	require.NoError(t, env.GetWorkflowResult(&got))
	assert.Equal(t, [2]Booking{want, want}, got)
	assert.Equal(t, 1, h.acts.ledger.count("Book"), "the body ran once, for the first call")
}
