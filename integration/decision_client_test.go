package integration

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/server/common/dynamicconfig"
	servertemporal "go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/store"
)

// The decision client, as idempotencyctl and the booking example use it:
// Pending lists the wait, a rejected decision comes back as a
// *RejectedError with the workflow's reason and changes nothing, and an
// accepted one returns what the workflow did.
func TestDecisionClientPendingAndSend(t *testing.T) {
	t.Parallel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{lostAnswers: 1}, awaitOpts)
	run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	pending, err := decision.Pending(ctx, e.client, run.GetID(), run.GetRunID())
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, o.Key, pending[0].Outcome.Key)
	assert.Nil(t, pending[0].Rejected)
	before := historyEvents(ctx, t, e.client, run)

	_, err = decision.Send(ctx, e.client, run.GetID(), run.GetRunID(), decision.Decision{
		Key: o.Key, Action: decision.ActionComplete, Result: json.RawMessage(`{"seat":1}`), By: "ops@acme",
	})
	var rejected *decision.RejectedError
	require.ErrorAs(t, err, &rejected)
	assert.Equal(t, o.Key, rejected.Key)
	assert.Contains(t, rejected.Reason, "does not decode")
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app, "the workflow's own error is underneath")
	assert.Equal(t, decision.ErrorTypeRejected, app.Type())
	assert.Equal(t, before, historyEvents(ctx, t, e.client, run), "a rejected decision writes nothing to the history")

	res, err := decision.Send(ctx, e.client, run.GetID(), "", decision.Decision{
		Key: o.Key, Action: decision.ActionComplete, Result: json.RawMessage(`"seat 1 on BA117, confirmed by phone"`),
		By: "ops@acme", Reason: "the airline confirmed",
	})
	require.NoError(t, err)
	assert.Equal(t, decision.Result{Key: o.Key, Action: decision.ActionComplete, Applied: decision.AppliedRecorded}, res)
	var result string
	require.NoError(t, run.Get(ctx, &result))
	assert.Equal(t, "seat 1 on BA117, confirmed by phone", result)
	assert.Equal(t, 1, e.ledger.Calls("BA117"), "the body ran once")
	assert.Equal(t, 1, e.ledger.Effects("BA117"), "one booking, never a second")
	rec, err := st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)

	_, err = decision.Send(ctx, e.client, run.GetID(), run.GetRunID(), decision.Decision{Key: o.Key, Action: decision.ActionFree, By: "ops@acme"})
	require.Error(t, err, "a closed workflow takes no decision")
	assert.False(t, errors.As(err, &rejected), "a closed workflow did not reject it: it is not there: %v", err)
}

// On a server whose namespace takes no Workflow Update, Send signals the
// decision instead; the workflow applies it, and Send says it went as a
// signal. A server of its own, with the update disabled by dynamic config.
func TestDecisionSendFallsBackToSignal(t *testing.T) {
	t.Parallel()
	srv := temporaltest.NewServer(temporaltest.WithT(t), temporaltest.WithBaseServerOptions(
		servertemporal.WithDynamicConfigClient(dynamicconfig.StaticClient{
			dynamicconfig.FrontendEnableUpdateWorkflowExecution.Key():   []dynamicconfig.ConstrainedValue{{Value: false}},
			dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): []dynamicconfig.ConstrainedValue{{Value: true}},
		})))
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	e := newEnvOn(t, srv, st, awaitOpts)
	a := &airline{lostAnswers: 1, ledger: e.ledger}
	require.NoError(t, e.worker.Register(activity.MustDeclare(a.Book,
		activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})))
	e.worker.RegisterWorkflow(OneBooking)
	e.start()
	run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	d := decision.Decision{Key: o.Key, Action: decision.ActionComplete,
		Result: json.RawMessage(`"seat 1 on BA117, confirmed by phone"`), By: "ops@acme"}
	_, err = decide(ctx, e.client, run, d)
	require.Error(t, err, "the server refuses the update itself")
	var denied *serviceerror.PermissionDenied
	require.ErrorAs(t, err, &denied, "the refusal Send falls back on")

	res, err := decision.Send(ctx, e.client, run.GetID(), run.GetRunID(), d)
	require.NoError(t, err)
	assert.Equal(t, decision.Result{Key: o.Key, Action: decision.ActionComplete, Applied: decision.AppliedSignalled}, res)
	var result string
	require.NoError(t, run.Get(ctx, &result))
	assert.Equal(t, "seat 1 on BA117, confirmed by phone", result)
	assert.Equal(t, 1, e.ledger.Calls("BA117"), "the body ran once")
	assert.Equal(t, 1, e.ledger.Effects("BA117"), "one booking, never a second")
}
