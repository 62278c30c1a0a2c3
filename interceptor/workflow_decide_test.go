package interceptor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// update sends d as the decision update and reports whether it was
// rejected (with the reason) or what the accepted update returned.
type updateOutcome struct {
	rejected error
	result   decision.Result
	err      error
	done     bool
}

func decideByUpdate(env *testsuite.TestWorkflowEnvironment, id string, d any, out *updateOutcome) {
	env.UpdateWorkflow(decision.UpdateName, id, &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { out.rejected = err; out.done = true },
		OnComplete: func(v any, err error) {
			out.done = true
			out.err = err
			if err == nil {
				if r, ok := v.(decision.Result); ok {
					out.result = r
				}
			}
		},
	}, d)
}

func rawJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// Every malformed decision is refused by the update's validator with a
// reason the caller reads; none of them settles the call, and a valid one
// sent afterwards still does.
func TestDecisionUpdateValidatorRejects(t *testing.T) {
	t.Parallel()
	h, env := decisionEnv(t, 0)
	var key, tenant string
	cases := []struct {
		name   string
		d      func() any
		reason string
	}{
		{"unknown key", func() any {
			return decision.Decision{Key: "v1:nobody-waits", Action: decision.ActionFree, By: "ops@acme"}
		}, "no call is waiting"},
		{"unknown action", func() any {
			return decision.Decision{Key: key, Action: "forget", By: "ops@acme"}
		}, "unknown action"},
		{"complete without a result", func() any {
			return decision.Decision{Key: key, Action: decision.ActionComplete, By: "ops@acme"}
		}, "needs a result"},
		{"result of the wrong shape", func() any {
			return decision.Decision{Key: key, Action: decision.ActionComplete, Result: json.RawMessage(`"just a string"`), By: "ops@acme"}
		}, "does not decode"},
		{"result with a typo'd field", func() any {
			return decision.Decision{Key: key, Action: decision.ActionComplete, Result: json.RawMessage(`{"flight":"BA117","cal":1}`), By: "ops@acme"}
		}, "does not decode"},
		{"wrong tenant", func() any {
			return decision.Decision{Key: key, Action: decision.ActionFree, Tenant: tenant + "-other", By: "ops@acme"}
		}, "tenant"},
	}
	outs := make([]updateOutcome, len(cases))
	var accepted updateOutcome
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(decision.QueryName)
		require.NoError(t, err)
		var pending []decision.PendingDecision
		require.NoError(t, v.Get(&pending))
		require.Len(t, pending, 1)
		key, tenant = pending[0].Outcome.Key, pending[0].Outcome.Tenant
		for i, tc := range cases {
			decideByUpdate(env, tc.name, tc.d(), &outs[i])
		}
	}, time.Minute)
	want := Booking{Flight: "BA117", Call: 42}
	env.RegisterDelayedCallback(func() {
		decideByUpdate(env, "good", decision.Decision{
			Key: key, Action: decision.ActionComplete, Result: rawJSON(t, want),
			By: "ops@acme", Reason: "airline confirmed by phone", Reference: "TICKET-7",
		}, &accepted)
	}, 2*time.Minute)
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	require.NoError(t, env.GetWorkflowError())
	for i, tc := range cases {
		require.True(t, outs[i].done, tc.name)
		require.Error(t, outs[i].rejected, tc.name)
		assert.Contains(t, outs[i].rejected.Error(), tc.reason, tc.name)
	}
	require.True(t, accepted.done)
	require.NoError(t, accepted.rejected)
	require.NoError(t, accepted.err)
	assert.Equal(t, decision.Result{Key: key, Action: decision.ActionComplete, Applied: decision.AppliedRecorded}, accepted.result)
	var got Booking
	require.NoError(t, env.GetWorkflowResult(&got))
	assert.Equal(t, want, got)
	assert.Equal(t, 1, h.acts.ledger.count("Book"))

	// Who decided, and why, is reported once as an event; never the result.
	var decided []interceptor.Event
	for _, e := range h.rec.all() {
		if e.Kind == interceptor.EventDecided {
			decided = append(decided, e)
		}
	}
	require.Len(t, decided, 1)
	assert.Equal(t, "decided", decided[0].Kind.String())
	assert.Equal(t, key, decided[0].Key)
	assert.Equal(t, "Book", decided[0].Activity)
	assert.Equal(t, activity.KindEffectful, decided[0].ActivityKind, "the event names the declared kind, not UNKNOWN")
	assert.Equal(t, &interceptor.DecisionAudit{Action: decision.ActionComplete, By: "ops@acme",
		Reason: "airline confirmed by phone", Reference: "TICKET-7"}, decided[0].Decision)
}

// A decided key cannot be decided again while the first decision is being
// applied or after it.
func TestDecisionUpdateFreeReturnsWhatItDid(t *testing.T) {
	t.Parallel()
	h, env := decisionEnv(t, 0)
	var first, again updateOutcome
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(decision.QueryName)
		require.NoError(t, err)
		var pending []decision.PendingDecision
		require.NoError(t, v.Get(&pending))
		require.Len(t, pending, 1)
		key := pending[0].Outcome.Key
		decideByUpdate(env, "free", decision.Decision{Key: key, Action: "FREE", By: "ops@acme"}, &first)
		decideByUpdate(env, "again", decision.Decision{Key: key, Action: decision.ActionFail, By: "ops@acme"}, &again)
	}, time.Minute)
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	require.NoError(t, env.GetWorkflowError())
	require.NoError(t, first.rejected)
	require.NoError(t, first.err)
	assert.Equal(t, decision.AppliedFreed, first.result.Applied)
	require.Error(t, again.rejected)
	assert.Contains(t, again.rejected.Error(), "already decided")
	assert.Equal(t, 2, h.acts.ledger.count("Book"), "the freed key ran the body again")
}

// A malformed signal changes nothing: the call keeps waiting, and the
// pending query lists the rejected signal with its reason.
func TestDecisionSignalRejectedIsListed(t *testing.T) {
	t.Parallel()
	h, env := decisionEnv(t, time.Hour)
	var listed []decision.PendingDecision
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(decision.QueryName)
		require.NoError(t, err)
		var pending []decision.PendingDecision
		require.NoError(t, v.Get(&pending))
		require.Len(t, pending, 1)
		env.SignalWorkflow(decision.SignalName, decision.Decision{Key: pending[0].Outcome.Key, Action: decision.ActionComplete, By: "ops@acme"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(decision.QueryName)
		require.NoError(t, err)
		require.NoError(t, v.Get(&listed))
	}, 2*time.Minute)
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	_, ok := activity.AsIndeterminate(env.GetWorkflowError())
	require.True(t, ok, "the rejected signal settled nothing; the timeout ended the wait: %v", env.GetWorkflowError())
	require.Len(t, listed, 2, "%+v", listed)
	assert.Nil(t, listed[0].Rejected, "the wait is still listed")
	require.NotNil(t, listed[1].Rejected)
	assert.Contains(t, listed[1].Rejected.Reason, "needs a result")
	assert.Equal(t, 1, h.acts.ledger.count("Book"))
}

// The pending query answers from the workflow's start, before any wait.
func TestPendingQueryFromStart(t *testing.T) {
	t.Parallel()
	_, env := decisionEnv(t, 0)
	queried := false
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(decision.QueryName)
		require.NoError(t, err)
		var pending []decision.PendingDecision
		require.NoError(t, v.Get(&pending))
		assert.Empty(t, pending)
		queried = true
	}, time.Second)
	env.ExecuteWorkflow(func(ctx workflow.Context) error { return workflow.Sleep(ctx, time.Minute) })
	require.NoError(t, env.GetWorkflowError())
	assert.True(t, queried)
}

// Cancelling a workflow that waits ends it cancelled; the record stays
// indeterminate for a later decision.
func TestAwaitDecisionHonoursCancellation(t *testing.T) {
	t.Parallel()
	_, env := decisionEnv(t, 0)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	require.Error(t, err)
	assert.True(t, temporal.IsCanceledError(err), "%v", err)
}

// A complete decision on a record that is gone (its retention window ended,
// it was swept) records the person's outcome; it does not leave a free key
// for the retry to run the effect again.
func TestResolveCompleteRecordsWhenTheRecordIsGone(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resolve := interceptor.ResolveActivityIn(h.mem, nil)
	want := Booking{Flight: "BA117", Call: 9}
	require.NoError(t, resolve(context.Background(), decision.ResolveRequest{
		Tenant: "acme", Key: "v1:" + strings.Repeat("ab", 32), Action: decision.ActionComplete, Result: rawJSON(t, want),
	}))
	rec, err := h.mem.Lookup(context.Background(), store.LookupParams{Tenant: "acme", Key: "v1:" + strings.Repeat("ab", 32)})
	require.NoError(t, err)
	require.Equal(t, store.StateCompleted, rec.State)
	var got Booking
	require.NoError(t, interceptor.DecodeOutcome(nil, rec.Outcome, &got))
	assert.Equal(t, want, got)
}

// pendingAfter queries the pending decisions of env's workflow, which has
// finished.
func pendingAfter(t *testing.T, env *testsuite.TestWorkflowEnvironment) []decision.PendingDecision {
	t.Helper()
	v, err := env.QueryWorkflow(decision.QueryName)
	require.NoError(t, err)
	var pending []decision.PendingDecision
	require.NoError(t, v.Get(&pending))
	return pending
}

// decided lists the decisions the workflow applied, as its events report
// them.
func decided(h *harness) []interceptor.DecisionAudit {
	var out []interceptor.DecisionAudit
	for _, e := range h.rec.all() {
		if e.Kind == interceptor.EventDecided {
			out = append(out, *e.Decision)
		}
	}
	return out
}

// Alice and Bob decide the same key and both decisions reach the workflow in
// one workflow task (two signals sent while no worker polled). The first
// one is accepted as it is checked; the second finds the key decided, is
// rejected with the reason, and is listed by the pending query. One
// decision is applied, one Resolve runs, and the call returns Alice's
// answer.
func TestDecisionSignalsInOneTaskFirstWins(t *testing.T) {
	t.Parallel()
	h, env := decisionEnv(t, 0)
	want := Booking{Flight: "BA117", Call: 42, Key: "per the airline"}
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(decision.QueryName)
		require.NoError(t, err)
		var pending []decision.PendingDecision
		require.NoError(t, v.Get(&pending))
		require.Len(t, pending, 1)
		key := pending[0].Outcome.Key
		env.SignalWorkflowSkippingWorkflowTask(decision.SignalName, decision.Decision{
			Key: key, Action: decision.ActionComplete, Result: rawJSON(t, want), By: "alice"})
		env.SignalWorkflow(decision.SignalName, decision.Decision{Key: key, Action: decision.ActionFree, By: "bob"})
	}, time.Minute)
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	require.NoError(t, env.GetWorkflowError())
	var got Booking
	require.NoError(t, env.GetWorkflowResult(&got))
	assert.Equal(t, want, got, "Alice's decision, the first, settled the call")
	assert.Equal(t, 1, h.acts.ledger.count("Book"), "the key was not freed: the body did not run again")
	assert.Equal(t, []interceptor.DecisionAudit{{Action: decision.ActionComplete, By: "alice"}}, decided(h), "one decision applied")
	pending := pendingAfter(t, env)
	require.Len(t, pending, 1, "%+v", pending)
	require.NotNil(t, pending[0].Rejected)
	assert.Equal(t, "bob", pending[0].Rejected.Decision.By)
	assert.Contains(t, pending[0].Rejected.Reason, "already decided (complete by alice)")
}

// A decision signal and a decision update reach the workflow in one
// workflow task. Whichever the workflow takes first wins; the other is
// rejected with the reason — the update's caller reads it, or the pending
// query lists the signal — and one decision is applied.
func TestDecisionSignalAndUpdateInOneTaskFirstWins(t *testing.T) {
	t.Parallel()
	h, env := decisionEnv(t, 0)
	want := Booking{Flight: "BA117", Call: 42}
	var upd updateOutcome
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(decision.QueryName)
		require.NoError(t, err)
		var pending []decision.PendingDecision
		require.NoError(t, v.Get(&pending))
		require.Len(t, pending, 1)
		key := pending[0].Outcome.Key
		env.SignalWorkflowSkippingWorkflowTask(decision.SignalName, decision.Decision{Key: key, Action: decision.ActionFree, By: "alice"})
		decideByUpdate(env, "bob", decision.Decision{Key: key, Action: decision.ActionComplete, Result: rawJSON(t, want), By: "bob"}, &upd)
	}, time.Minute)
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	require.NoError(t, env.GetWorkflowError())
	require.True(t, upd.done)
	applied := decided(h)
	require.Len(t, applied, 1, "one decision applied: %+v", applied)
	pending := pendingAfter(t, env)
	t.Logf("the first taken was %s's", applied[0].By)
	if applied[0].By == "alice" {
		require.Error(t, upd.rejected, "the update came second")
		assert.Contains(t, upd.rejected.Error(), "already decided (free by alice)")
		assert.Empty(t, pending)
		assert.Equal(t, 2, h.acts.ledger.count("Book"), "freed: the body ran again")
	} else {
		require.NoError(t, upd.rejected)
		require.NoError(t, upd.err)
		require.Len(t, pending, 1, "the signal came second and is listed")
		assert.Contains(t, pending[0].Rejected.Reason, "already decided (complete by bob)")
		assert.Equal(t, 1, h.acts.ledger.count("Book"))
	}
}

// Who decided is required: an update that names no one is rejected by its
// validator, a signal that names no one is rejected and listed, and the
// call waits on until a decision says who made it.
func TestDecisionWithoutByRejected(t *testing.T) {
	t.Parallel()
	h, env := decisionEnv(t, 0)
	var byUpdate, good updateOutcome
	var listed []decision.PendingDecision
	var key string
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(decision.QueryName)
		require.NoError(t, err)
		var pending []decision.PendingDecision
		require.NoError(t, v.Get(&pending))
		require.Len(t, pending, 1)
		key = pending[0].Outcome.Key
		decideByUpdate(env, "anonymous update", decision.Decision{Key: key, Action: decision.ActionFree, By: "  "}, &byUpdate)
		env.SignalWorkflow(decision.SignalName, decision.Decision{Key: key, Action: decision.ActionFree})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(decision.QueryName)
		require.NoError(t, err)
		require.NoError(t, v.Get(&listed))
		decideByUpdate(env, "good", decision.Decision{Key: key, Action: decision.ActionFree, By: "ops@acme"}, &good)
	}, 2*time.Minute)
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	require.NoError(t, env.GetWorkflowError())
	require.Error(t, byUpdate.rejected)
	assert.Contains(t, byUpdate.rejected.Error(), "names no one")
	require.Len(t, listed, 2, "the wait, then the rejected signal: %+v", listed)
	require.NotNil(t, listed[1].Rejected)
	assert.Contains(t, listed[1].Rejected.Reason, "names no one")
	require.NoError(t, good.rejected)
	assert.Equal(t, []interceptor.DecisionAudit{{Action: decision.ActionFree, By: "ops@acme"}}, decided(h))
}
