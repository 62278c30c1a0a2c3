package interceptor_test

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
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

func activityOptions(ctx workflow.Context, maxAttempts int32) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Millisecond,
			BackoffCoefficient: 1,
			MaximumAttempts:    maxAttempts,
		},
	})
}

// TwiceConcurrently books one flight twice in one workflow turn, with a
// fresh request ID each, as a model emitting two identical calls would.
func TwiceConcurrently(ctx workflow.Context, flight string) ([2]Booking, error) {
	ctx = activityOptions(ctx, 5)
	f1 := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "a"})
	f2 := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "b"})
	var out [2]Booking
	if err := f1.Get(ctx, &out[0]); err != nil {
		return out, err
	}
	err := f2.Get(ctx, &out[1])
	return out, err
}

// Once runs the named activity once under a retry policy of five attempts.
func Once(ctx workflow.Context, name string, req BookRequest) (Booking, error) {
	ctx = activityOptions(ctx, 5)
	var b Booking
	err := workflow.ExecuteActivity(ctx, name, req).Get(ctx, &b)
	return b, err
}

// ShortLived runs the named activity once, with a short start-to-close
// timeout and no retry.
func ShortLived(ctx workflow.Context, name string, req BookRequest) (Booking, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 300 * time.Millisecond,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var b Booking
	err := workflow.ExecuteActivity(ctx, name, req).Get(ctx, &b)
	return b, err
}

func TestWorkflowConcurrentDuplicatesCollapse(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	proceed := make(chan struct{})
	h.acts.on("Book", func(_ context.Context, call int, _ BookRequest) error {
		if call == 1 {
			<-proceed
		}
		return nil
	})
	waiting := h.rec.next(interceptor.EventWaiting)
	go func() {
		// Let the first body return only once its duplicate waits for it.
		<-waiting
		close(proceed)
	}()
	env := h.workflowEnv(t, "acme")
	env.RegisterWorkflow(TwiceConcurrently)
	env.ExecuteWorkflow(TwiceConcurrently, "BA117")

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var out [2]Booking
	require.NoError(t, env.GetWorkflowResult(&out))
	assert.Equal(t, out[0], out[1], "both futures see the same result")
	assert.Equal(t, 1, out[0].Call)
	assert.Equal(t, 1, h.acts.ledger.count("Book"), "one execution")
	assert.Equal(t, 1, h.rec.count(interceptor.EventClaimed))
	assert.Equal(t, 1, h.rec.count(interceptor.EventDeduplicated))
}

func TestWorkflowEffectfulFailureIsIndeterminate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.acts.on("Book", func(context.Context, int, BookRequest) error {
		return temporal.NewApplicationError("gateway timeout", "Gateway")
	})
	env := h.workflowEnv(t, "acme")
	env.RegisterWorkflow(Once)
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})

	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	require.Error(t, err)
	var actErr *temporal.ActivityError
	require.ErrorAs(t, err, &actErr, "the workflow receives the error through an activity error")
	o, ok := activity.AsIndeterminate(err)
	require.True(t, ok, "the workflow reads the typed indeterminate error: %v", err)
	assert.Equal(t, activity.ReasonBodyFailed, o.Reason)
	assert.True(t, o.BodyEntered)
	assert.Equal(t, "Book", o.Activity)
	assert.Equal(t, "acme", o.Tenant)
	assert.Contains(t, o.Cause, "gateway timeout")
	assert.Equal(t, 1, h.acts.ledger.count("Book"), "not retried although the retry policy allows five attempts")

	rec, err := h.lookup(t, "acme", o.Key)
	require.NoError(t, err)
	assert.Equal(t, store.StateIndeterminate, rec.State)
}

func TestWorkflowIdempotentRetriesThenSucceeds(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.acts.on("Reserve", func(_ context.Context, call int, _ BookRequest) error {
		if call < 3 {
			return errors.New("inventory busy")
		}
		return nil
	})
	env := h.workflowEnv(t, "acme")
	env.RegisterWorkflow(Once)
	env.ExecuteWorkflow(Once, "Reserve", BookRequest{Flight: "BA117", RequestID: "a"})

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var got Booking
	require.NoError(t, env.GetWorkflowResult(&got))
	assert.Equal(t, 3, got.Call)
	assert.Equal(t, 3, h.acts.ledger.count("Reserve"), "each attempt ran the body")

	var attempts []int32
	for _, e := range h.rec.all() {
		if e.Kind == interceptor.EventClaimed {
			attempts = append(attempts, e.Attempt)
		}
	}
	assert.Equal(t, []int32{1, 2, 3}, attempts, "each attempt claimed the released key")
	assert.Equal(t, 2, h.rec.count(interceptor.EventReleased))
	assert.Equal(t, 1, h.rec.count(interceptor.EventCompleted))

	rec, err := h.lookup(t, "acme", got.Key)
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State, "the final result is recorded")
}

// An earlier attempt that failed but could not free its claim looks alive
// until its lease runs out: the retry waits for that (heartbeating), then
// takes the key over. (Freeing the key in the background is off here: it
// would free it as soon as the store answered, which
// TestUnreleasedClaimReleasedOnceTheStoreIsBack covers.)
func TestWorkflowEarlierAttemptTakenOverWhenItsLeaseRunsOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *interceptor.Options) { o.OrphanRetry = -1 })
	// Attempt 1 fails and its claim cannot be released: it stays pending
	// under attempt 1 until the store's clock passes its lease.
	h.faults.failNext("Release", 1)
	waiting := h.rec.next(interceptor.EventWaiting)
	go func() {
		receive(t, waiting, "the retry to wait")
		h.clock.Advance(time.Second)
	}()
	h.acts.on("Reserve", func(_ context.Context, call int, _ BookRequest) error {
		if call == 1 {
			return errors.New("inventory busy")
		}
		return nil
	})
	env := h.workflowEnv(t, "acme")
	env.RegisterWorkflow(Once)
	env.ExecuteWorkflow(Once, "Reserve", BookRequest{Flight: "BA117"})

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var got Booking
	require.NoError(t, env.GetWorkflowResult(&got))
	assert.Equal(t, 2, got.Call)
	assert.Equal(t, 1, h.rec.count(interceptor.EventTakenOver), "attempt 2 takes over from attempt 1")
	assert.Equal(t, 1, h.rec.count(interceptor.EventWaiting), "attempt 2 waited for attempt 1's lease")
	taken := h.rec.first(t, interceptor.EventTakenOver)
	assert.EqualValues(t, 2, taken.Attempt)
}

func TestWorkflowWaitHonoursDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *interceptor.Options) { o.Scope = interceptor.ScopeWorkflow })
	req := BookRequest{Flight: "BA117"}
	key := h.key(t, "Reserve", "acme", "wf-deadline", req)
	res, err := h.mem.Claim(context.Background(), store.ClaimParams{Tenant: "acme", Key: key, Holder: "worker-elsewhere", Lease: time.Hour})
	require.NoError(t, err)

	env := h.workflowEnv(t, "acme")
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "wf-deadline"})
	env.RegisterWorkflow(ShortLived)
	env.ExecuteWorkflow(ShortLived, "Reserve", req)

	require.True(t, env.IsWorkflowCompleted())
	err = env.GetWorkflowError()
	require.Error(t, err)
	var timeoutErr *temporal.TimeoutError
	assert.ErrorAs(t, err, &timeoutErr, "the waiter gives up at its deadline: %v", err)
	assert.Equal(t, 1, h.rec.count(interceptor.EventWaiting))
	assert.Zero(t, h.acts.ledger.total(), "the body is not entered")
	rec, err := h.lookup(t, "acme", key)
	require.NoError(t, err)
	assert.Equal(t, res.Record.Token, rec.Token, "the holder keeps its claim")
}
