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
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// update sends d as the decision update and reports whether it was
// rejected (with the reason) or what the accepted update returned.
type updateOutcome struct {
	rejected error
	result   interceptor.DecisionResult
	err      error
	done     bool
}

func decideByUpdate(env *testsuite.TestWorkflowEnvironment, id string, d any, out *updateOutcome) {
	env.UpdateWorkflow(interceptor.DecisionUpdate, id, &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { out.rejected = err; out.done = true },
		OnComplete: func(v any, err error) {
			out.done = true
			out.err = err
			if err == nil {
				if r, ok := v.(interceptor.DecisionResult); ok {
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
			return interceptor.Decision{Key: "v1:nobody-waits", Action: interceptor.ActionFree}
		}, "no call is waiting"},
		{"unknown action", func() any {
			return interceptor.Decision{Key: key, Action: "forget"}
		}, "unknown action"},
		{"complete without a result", func() any {
			return interceptor.Decision{Key: key, Action: interceptor.ActionComplete}
		}, "needs a result"},
		{"result of the wrong shape", func() any {
			return interceptor.Decision{Key: key, Action: interceptor.ActionComplete, Result: json.RawMessage(`"just a string"`)}
		}, "does not decode"},
		{"result with a typo'd field", func() any {
			return interceptor.Decision{Key: key, Action: interceptor.ActionComplete, Result: json.RawMessage(`{"flight":"BA117","cal":1}`)}
		}, "does not decode"},
		{"wrong tenant", func() any {
			return interceptor.Decision{Key: key, Action: interceptor.ActionFree, Tenant: tenant + "-other"}
		}, "tenant"},
	}
	outs := make([]updateOutcome, len(cases))
	var accepted updateOutcome
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(interceptor.PendingQuery)
		require.NoError(t, err)
		var pending []interceptor.PendingDecision
		require.NoError(t, v.Get(&pending))
		require.Len(t, pending, 1)
		key, tenant = pending[0].Outcome.Key, pending[0].Outcome.Tenant
		for i, tc := range cases {
			decideByUpdate(env, tc.name, tc.d(), &outs[i])
		}
	}, time.Minute)
	want := Booking{Flight: "BA117", Call: 42}
	env.RegisterDelayedCallback(func() {
		decideByUpdate(env, "good", interceptor.Decision{
			Key: key, Action: interceptor.ActionComplete, Result: rawJSON(t, want),
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
	assert.Equal(t, interceptor.DecisionResult{Key: key, Action: interceptor.ActionComplete, Applied: interceptor.AppliedRecorded}, accepted.result)
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
	assert.Equal(t, &interceptor.DecisionAudit{Action: interceptor.ActionComplete, By: "ops@acme",
		Reason: "airline confirmed by phone", Reference: "TICKET-7"}, decided[0].Decision)
}

// A decided key cannot be decided again while the first decision is being
// applied or after it.
func TestDecisionUpdateFreeReturnsWhatItDid(t *testing.T) {
	t.Parallel()
	h, env := decisionEnv(t, 0)
	var first, again updateOutcome
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(interceptor.PendingQuery)
		require.NoError(t, err)
		var pending []interceptor.PendingDecision
		require.NoError(t, v.Get(&pending))
		require.Len(t, pending, 1)
		key := pending[0].Outcome.Key
		decideByUpdate(env, "free", interceptor.Decision{Key: key, Action: "FREE"}, &first)
		decideByUpdate(env, "again", interceptor.Decision{Key: key, Action: interceptor.ActionFail}, &again)
	}, time.Minute)
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	require.NoError(t, env.GetWorkflowError())
	require.NoError(t, first.rejected)
	require.NoError(t, first.err)
	assert.Equal(t, interceptor.AppliedFreed, first.result.Applied)
	require.Error(t, again.rejected)
	assert.Contains(t, again.rejected.Error(), "already decided")
	assert.Equal(t, 2, h.acts.ledger.count("Book"), "the freed key ran the body again")
}

// A malformed signal changes nothing: the call keeps waiting, and the
// pending query lists the rejected signal with its reason.
func TestDecisionSignalRejectedIsListed(t *testing.T) {
	t.Parallel()
	h, env := decisionEnv(t, time.Hour)
	var listed []interceptor.PendingDecision
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(interceptor.PendingQuery)
		require.NoError(t, err)
		var pending []interceptor.PendingDecision
		require.NoError(t, v.Get(&pending))
		require.Len(t, pending, 1)
		env.SignalWorkflow(interceptor.DecisionSignal, interceptor.Decision{Key: pending[0].Outcome.Key, Action: interceptor.ActionComplete})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(interceptor.PendingQuery)
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
		v, err := env.QueryWorkflow(interceptor.PendingQuery)
		require.NoError(t, err)
		var pending []interceptor.PendingDecision
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
	resolve := interceptor.ResolveActivity(h.mem, nil)
	want := Booking{Flight: "BA117", Call: 9}
	require.NoError(t, resolve(context.Background(), interceptor.ResolveRequest{
		Tenant: "acme", Key: "v1:" + strings.Repeat("ab", 32), Action: interceptor.ActionComplete, Result: rawJSON(t, want),
	}))
	rec, err := h.mem.Lookup(context.Background(), store.LookupParams{Tenant: "acme", Key: "v1:" + strings.Repeat("ab", 32)})
	require.NoError(t, err)
	require.Equal(t, store.StateCompleted, rec.State)
	var got Booking
	require.NoError(t, interceptor.DecodeOutcome(nil, rec.Outcome, &got))
	assert.Equal(t, want, got)
}
