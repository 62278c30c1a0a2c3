package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
)

// bookAgainSignal makes BookTwiceOnSignal make its second call.
const bookAgainSignal = "again"

// BookTwiceOnSignal books, and books again once signalled, in one run: the
// second call answers from the record the first left (an indeterminate
// one stays indeterminate). It returns how each call ended.
func BookTwiceOnSignal(ctx workflow.Context, flight string) ([]string, error) {
	ctx = activityOptions(ctx, 10*time.Second, 100*time.Millisecond)
	how := func(err error) string {
		if _, ok := activity.AsIndeterminate(err); ok {
			return "indeterminate"
		}
		if err != nil {
			return err.Error()
		}
		return "ok"
	}
	var out []string
	out = append(out, how(workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "1"}).Get(ctx, nil)))
	workflow.GetSignalChannel(ctx, bookAgainSignal).Receive(ctx, nil)
	out = append(out, how(workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "2"}).Get(ctx, nil)))
	return out, nil
}

// Forge schedules one of the library's own activities with a request of
// its choosing, as any workflow on a worker that registers them can, and
// returns the error type it ended with ("" for none).
func Forge(ctx workflow.Context, activityName string, resolve decision.ResolveRequest, probe decision.ProbeRequest) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var req any = resolve
	if activityName == decision.ProbeActivityName {
		req = probe
	}
	err := workflow.ExecuteActivity(ctx, activityName, req).Get(ctx, nil)
	var ae *temporal.ApplicationError
	switch {
	case err == nil:
		return "", nil
	case errors.As(err, &ae):
		return ae.Type(), nil
	default:
		return err.Error(), nil
	}
}

// The library's own activities are bound to the execution that schedules
// them. A workflow of tenant globex that frees acme's indeterminate record
// (whose booking landed) is refused, and acme's call made again stays
// indeterminate: one seat, where the freed record booked a second. So are
// a completion planted on a key nobody claimed, a probe of acme's record,
// and, within acme, a workflow reaching another workflow's record.
func TestLibraryActivitiesBoundToTheirExecution(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{lostAnswers: 1, probe: true,
			probeAnswer: func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
				return activity.AnswerCannotTell(), nil
			}}, interceptor.Options{Lease: 2 * time.Second}, BookTwiceOnSignal, Forge)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		victim, err := e.client.ExecuteWorkflow(interceptor.WithTenant(ctx, "acme"),
			client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: e.queue}, BookTwiceOnSignal, "BA117")
		require.NoError(t, err)
		var key string
		require.Eventually(t, func() bool {
			page, err := st.List(ctx, store.ListParams{Tenant: "acme", States: []store.State{store.StateIndeterminate}})
			if err != nil || len(page.Records) != 1 {
				return false
			}
			key = page.Records[0].Key
			return true
		}, 30*time.Second, 50*time.Millisecond, "acme's booking is indeterminate")
		require.Equal(t, 1, e.ledger.Effects("BA117"), "the booking landed")

		forge := func(tenant, activityName string, resolve decision.ResolveRequest, probe decision.ProbeRequest) string {
			t.Helper()
			run, err := e.client.ExecuteWorkflow(interceptor.WithTenant(ctx, tenant),
				client.StartWorkflowOptions{ID: testenv.UniqueName("attacker"), TaskQueue: e.queue}, Forge, activityName, resolve, probe)
			require.NoError(t, err)
			var typ string
			require.NoError(t, run.Get(ctx, &typ))
			return typ
		}
		free := decision.ResolveRequest{Tenant: "acme", Key: key, Action: decision.ActionFree, By: "globex"}
		assert.Equal(t, decision.ErrorTypeForeignRecord, forge("globex", decision.ResolveActivityName, free, decision.ProbeRequest{}),
			"another tenant frees acme's record")
		assert.Equal(t, decision.ErrorTypeForeignRecord, forge("acme", decision.ResolveActivityName, free, decision.ProbeRequest{}),
			"another workflow of acme frees this workflow's record")
		assert.Equal(t, decision.ErrorTypeForeignRecord, forge("globex", decision.ProbeActivityName, decision.ResolveRequest{},
			decision.ProbeRequest{Activity: "Book", Tenant: "acme", Key: key}), "another tenant asks acme's probe")
		planted := "v1:" + testenv.UniqueName("planted")
		assert.Equal(t, decision.ErrorTypeForeignRecord, forge("globex", decision.ResolveActivityName, decision.ResolveRequest{
			Tenant: "acme", Key: planted, Action: decision.ActionComplete, Result: []byte(`"globex's seat"`), By: "globex"}, decision.ProbeRequest{}),
			"another tenant plants a completed record")
		_, err = st.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: planted})
		assert.ErrorIs(t, err, store.ErrNotFound, "nothing was planted")

		require.NoError(t, e.client.SignalWorkflow(ctx, victim.GetID(), victim.GetRunID(), bookAgainSignal, nil))
		var how []string
		require.NoError(t, victim.Get(ctx, &how))
		assert.Equal(t, []string{"indeterminate", "indeterminate"}, how)
		assert.Equal(t, 1, e.ledger.Effects("BA117"), "a second seat was booked")
		assert.Equal(t, 4, e.events.count(interceptor.EventForeignRecord))
	})
}
