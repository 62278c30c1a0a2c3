package interceptor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkactivity "go.temporal.io/sdk/activity"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
)

// Two calls of one workflow wait on one key. A single free decision frees
// it once: the first call runs the body again, which fails again and leaves
// a newer indeterminate record. That record is nobody's decision yet; a
// second Resolve for the first decision must not free it, or the second
// call would run the effect a third time.
func TestOneDecisionFreesOnceForDuplicates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *interceptor.Options) { o.AwaitDecision = true })
	env := h.workflowEnv(t, "acme")
	var resolves atomic.Int32
	resolve := interceptor.ResolveActivityIn(h.mem, nil)
	env.RegisterActivityWithOptions(func(ctx context.Context, req decision.ResolveRequest) error {
		resolves.Add(1)
		return resolve(ctx, req)
	}, sdkactivity.RegisterOptions{Name: decision.ResolveActivityName})
	h.acts.on("Book", func(context.Context, int, BookRequest) error { return errors.New("gateway timeout") })
	var key string
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(decision.QueryName)
		require.NoError(t, err)
		var pending []decision.PendingDecision
		require.NoError(t, v.Get(&pending))
		require.Len(t, pending, 1)
		key = pending[0].Outcome.Key
		env.SignalWorkflow(decision.SignalName, decision.Decision{Key: key, Action: decision.ActionFree, By: "ops@acme"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(decision.SignalName, decision.Decision{Key: key, Action: decision.ActionFail, By: "ops@acme"})
	}, 2*time.Minute)
	env.ExecuteWorkflow(TwiceConcurrently, "BA117")
	_, ok := activity.AsIndeterminate(env.GetWorkflowError())
	require.True(t, ok, "%v", env.GetWorkflowError())
	assert.Equal(t, 2, h.acts.ledger.count("Book"), "the body ran once at first and once after the one free decision")
	assert.Equal(t, int32(1), resolves.Load(), "one decision, one Resolve, however many calls wait on the key")
}
