package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/store"
)

// memoryBackend is a memory store handed to the command, with one
// indeterminate record under testKey in tenant acme, made by a workflow.
func memoryBackend(t *testing.T) (*store.Memory, func(context.Context, config) (*backend, error)) {
	t.Helper()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	res, err := mem.Claim(context.Background(), store.ClaimParams{Tenant: "acme", Key: testKey, Holder: "w", Lease: time.Minute, Origin: testOrigin})
	require.NoError(t, err)
	require.NoError(t, mem.MarkIndeterminate(context.Background(), store.MarkIndeterminateParams{Tenant: "acme", Key: testKey,
		Token: res.Record.Token, Reason: "body_failed: gateway timeout"}))
	return mem, func(context.Context, config) (*backend, error) {
		return &backend{Store: mem, where: "the memory store"}, nil
	}
}

// decide -free on an effect that may have landed is refused without -yes,
// naming what it costs, before Temporal is reached: freeing a charge that
// was taken charges again. Before, it asked nothing.
func TestDecideFreeNeedsYes(t *testing.T) {
	t.Parallel()
	// Temporal at an address nothing answers: reaching it is the sign the
	// decision would have been sent.
	env := map[string]string{envStore: storePostgres, "TEMPORAL_ADDRESS": "127.0.0.1:1"}
	free := []string{"-timeout", "3s", "decide", "-tenant", "acme", "-key", testKey, "-free", "-by", "ops@acme"}

	t.Run("indeterminate, without -yes", func(t *testing.T) {
		t.Parallel()
		mem, open := memoryBackend(t)
		r := invoke(t, env, open, free...)
		assert.Equal(t, exitFailed, r.code)
		assert.Contains(t, r.stdout, "is indeterminate (reason: body_failed: gateway timeout)\n", "the record is shown first")
		requireOneErrorLine(t, r, "decide: refusing to free key "+testKey+" without -yes")
		assert.Contains(t, r.stderr, "it happens a second time — two charges")
		assert.Contains(t, r.stderr, "send -outcome")
		assert.NotContains(t, r.stderr, "cannot reach Temporal", "refused before Temporal is reached")
		rec, err := mem.Lookup(context.Background(), store.LookupParams{Tenant: "acme", Key: testKey})
		require.NoError(t, err)
		assert.Equal(t, store.StateIndeterminate, rec.State)
	})
	t.Run("gone, named by -workflow-id, without -yes", func(t *testing.T) {
		t.Parallel()
		_, open := memoryBackend(t)
		const gone = "v1:4444444444444444444444444444444444444444444444444444444444444444"
		r := invoke(t, env, open, "-timeout", "3s", "decide", "-tenant", "acme", "-key", gone, "-free", "-by", "ops", "-workflow-id", "booking-42")
		assert.Equal(t, exitFailed, r.code)
		requireOneErrorLine(t, r, "refusing to free key "+gone+" without -yes")
	})
	t.Run("with -yes", func(t *testing.T) {
		t.Parallel()
		_, open := memoryBackend(t)
		r := invoke(t, env, open, append(free, "-yes")...)
		assert.Equal(t, exitFailed, r.code)
		requireOneErrorLine(t, r, "cannot reach Temporal at 127.0.0.1:1") // confirmed: on to Temporal
	})
	t.Run("the other decisions need no -yes", func(t *testing.T) {
		t.Parallel()
		for _, d := range [][]string{{"-outcome", `"12A"`}, {"-fail"}, {"-retry"}} {
			_, open := memoryBackend(t)
			args := append([]string{"-timeout", "3s", "decide", "-tenant", "acme", "-key", testKey, "-by", "ops"}, d...)
			r := invoke(t, env, open, args...)
			assert.Equal(t, exitFailed, r.code)
			requireOneErrorLine(t, r, "cannot reach Temporal at 127.0.0.1:1")
		}
	})
}

// decidedClient is a Temporal client whose workflow runs and waits on no
// key: the one decided first is no longer waited on.
type decidedClient struct {
	client.Client
}

func (decidedClient) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}}, nil
}

func (decidedClient) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return pendingValue{}, nil
}

// pendingValue is the pending query's answer: nothing waits.
type pendingValue struct{}

func (pendingValue) HasValue() bool { return true }

func (pendingValue) Get(v any) error {
	*(v.(*[]decision.PendingDecision)) = nil
	return nil
}

// A decision that came second is rejected as already decided: the one
// taken first is being applied, and nothing is left to do. Before, decide
// sent the person to resolve ("nothing in it waits on the key"), which then
// refused: the record was settled by the first decision.
func TestDecideAlreadyDecidedPointsNowhereThatRefuses(t *testing.T) {
	t.Parallel()
	rejected := &decision.RejectedError{Key: testKey,
		Reason: "idempotency: key " + testKey + " is already decided (complete by alice)"}
	req := decideRequest{tenant: "acme", key: testKey, decision: decision.Decision{Action: decision.ActionFree, By: "bob"}}
	err := updateError(context.Background(), decidedClient{}, "booking-42", "run-1", "workflow booking-42 run run-1", req, "booking", resolveHint, rejected)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rejected the decision: key "+testKey+" is already decided (complete by alice)")
	assert.NotContains(t, err.Error(), "resolve", "resolve would find the record settled and refuse")
	assert.Contains(t, err.Error(), "idempotencyctl show -tenant acme -key "+testKey)

	// The command it gives runs as written.
	_, open := memoryBackend(t)
	r := invoke(t, map[string]string{envStore: storePostgres}, open, "show", "-tenant", "acme", "-key", testKey)
	assert.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)

	// Any other rejection, nothing waiting, still points to resolve.
	other := &decision.RejectedError{Key: testKey, Reason: "idempotency: no call is waiting on key " + testKey}
	err = updateError(context.Background(), decidedClient{}, "booking-42", "run-1", "workflow booking-42 run run-1", req, "booking", resolveHint, other)
	assert.Contains(t, err.Error(), "settle the record in the store with 'idempotencyctl resolve'")
}
