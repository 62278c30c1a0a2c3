package integration

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"

	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// resolvesScheduled counts the Resolve activities run's history scheduled:
// one per decision the workflow applied with complete or free.
func resolvesScheduled(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun) int {
	t.Helper()
	n := 0
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == decision.ResolveActivityName {
			n++
		}
	}
	return n
}

// awaitAdmitted waits until the server has admitted update id of run: it
// will be delivered with the next workflow task.
func awaitAdmitted(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := c.WorkflowService().PollWorkflowExecutionUpdate(ctx, &workflowservice.PollWorkflowExecutionUpdateRequest{
			Namespace: server.GetDefaultNamespace(),
			UpdateRef: &updatepb.UpdateRef{
				WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: run.GetID(), RunId: run.GetRunID()},
				UpdateId:          id,
			},
			WaitPolicy: &updatepb.WaitPolicy{LifecycleStage: enumspb.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED},
		})
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return false
		}
		require.NoError(t, err)
		return true
	}, 30*time.Second, 20*time.Millisecond, "the update reaches the server")
}

// Alice and Bob decide the same waiting key, and both decisions reach the
// workflow in one workflow task: they are sent while no worker polls, and a
// worker started afterwards takes them together. The first decision the
// workflow takes wins; the second is rejected with the reason, listed by
// the pending query (a signal) or returned to its caller (an update). One
// Resolve activity runs, and the body is not run again.
func TestDecisionsInOneWorkflowTask(t *testing.T) {
	t.Parallel()
	for _, second := range []string{"signal", "update"} {
		t.Run("signal then "+second, func(t *testing.T) {
			t.Parallel()
			forEachStore(t, func(t *testing.T, st store.Store) {
				c := newClient(server, worker.ClientOptions(client.Options{}, zaptest.NewLogger(t)))
				queue := testenv.UniqueName("tq-race")
				ledger := newLedger()
				a := &airline{failures: 1, ledger: ledger} // the first call fails before booking
				events := &eventLog{}
				stop := bookingWorker(t, c, queue, st, a, awaitOpts, events)
				ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), 2*time.Minute)
				defer cancel()
				run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: queue},
					OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
				require.NoError(t, err)
				o := pendingOf(ctx, t, c, run)
				stop() // nobody polls: what is sent now arrives in one task

				alice := decision.Decision{Key: o.Key, Action: decision.ActionComplete,
					Result: json.RawMessage(`"seat 9 on BA117, says alice"`), By: "alice"}
				require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), decision.SignalName, alice))
				bob := decision.Decision{Key: o.Key, Action: decision.ActionFree, By: "bob"}
				updateErr := make(chan error, 1)
				if second == "signal" {
					require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), decision.SignalName, bob))
				} else {
					go func() {
						h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
							WorkflowID: run.GetID(), RunID: run.GetRunID(), UpdateID: "bob", UpdateName: decision.UpdateName,
							Args: []any{bob}, WaitForStage: client.WorkflowUpdateStageCompleted,
						})
						if err == nil {
							err = h.Get(ctx, nil)
						}
						updateErr <- err
					}()
					awaitAdmitted(ctx, t, c, run, "bob")
				}
				bookingWorker(t, c, queue, st, a, awaitOpts, events)

				var seat string
				require.NoError(t, run.Get(ctx, &seat))
				assert.Equal(t, 1, resolvesScheduled(ctx, t, c, run), "one decision applied, one Resolve")
				var pending []decision.PendingDecision
				v, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), decision.QueryName)
				require.NoError(t, err)
				require.NoError(t, v.Get(&pending))
				var rejected []decision.RejectedDecision
				for _, p := range pending {
					if p.Rejected != nil {
						rejected = append(rejected, *p.Rejected)
					}
				}
				if seat == "seat 9 on BA117, says alice" {
					// Alice's complete, taken first, won; the body did
					// not run again.
					assert.Equal(t, 1, ledger.Calls("BA117"))
					assert.Zero(t, ledger.Effects("BA117"))
					if second == "signal" {
						require.Len(t, rejected, 1)
						assert.Equal(t, "bob", rejected[0].Decision.By)
						assert.Contains(t, rejected[0].Reason, "already decided (complete by alice)")
					} else {
						err := <-updateErr
						require.Error(t, err, "the update came second")
						assert.Contains(t, err.Error(), "already decided (complete by alice)")
						assert.Empty(t, rejected)
					}
					return
				}
				// Bob's update, taken first, freed the key: the body ran
				// again and booked once.
				require.Equal(t, "update", second, "two signals are taken in the order they were sent: %s", seat)
				require.NoError(t, <-updateErr)
				assert.Equal(t, 1, ledger.Effects("BA117"))
				require.Len(t, rejected, 1)
				assert.Equal(t, "alice", rejected[0].Decision.By)
				assert.Contains(t, rejected[0].Reason, "already decided (free by bob)")
				t.Log("the update was taken before the signal")
			})
		})
	}
}
