package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/keyspace"
)

// updateDecision returns a decide function that sends d (its key filled in)
// as the decision update.
func updateDecision(d decision.Decision) func(context.Context, *testing.T, client.Client, client.WorkflowRun, activity.IndeterminateOutcome) {
	return func(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, o activity.IndeterminateOutcome) {
		// A rejected update first: it must leave nothing to replay.
		_, err := decide(ctx, c, run, decision.Decision{Key: o.Key, Action: "forget", By: "ops@acme"})
		require.Error(t, err)
		d.Key = o.Key
		_, err = decide(ctx, c, run, d)
		require.NoError(t, err)
	}
}

// TestRecordDecisionHistories records every decision path of the current
// router (see TestRecordHistories).
func TestRecordDecisionHistories(t *testing.T) {
	on := interceptor.Options{AwaitDecision: true}
	recordScenarios(t, []historyScenario{
		{name: "on-update-complete", opts: on, failures: 1, decide: updateDecision(decision.Decision{
			Action: decision.ActionComplete, Result: json.RawMessage(`"seat 9 on BA117"`), By: "ops", Reason: "confirmed"})},
		{name: "on-update-free", opts: on, failures: 1, decide: updateDecision(decision.Decision{Action: decision.ActionFree, By: "ops@acme"})},
		{name: "on-update-retry-then-fail", opts: on, failures: 1,
			decide: func(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, o activity.IndeterminateOutcome) {
				// Nobody settled the record: the retry finds it
				// indeterminate and waits again, and the person gives up.
				updateDecision(decision.Decision{Action: decision.ActionRetry, By: "ops@acme"})(ctx, t, c, run, o)
				require.Eventually(t, func() bool {
					_, err := decide(ctx, c, run, decision.Decision{Key: o.Key, Action: decision.ActionFail, By: "ops@acme"})
					return err == nil
				}, 30*time.Second, 50*time.Millisecond)
			}},
		{name: "on-update-fail", opts: on, failures: 1, decide: updateDecision(decision.Decision{Action: decision.ActionFail, By: "ops@acme"})},
		{name: "on-signal-rejected-then-free", opts: on, failures: 1,
			decide: func(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, o activity.IndeterminateOutcome) {
				signalDecision(decision.ActionComplete, "")(ctx, t, c, run, o) // rejected: no result
				signalDecision(decision.ActionFree, "")(ctx, t, c, run, o)
			}},
		{name: "on-timeout", opts: interceptor.Options{AwaitDecision: true, DecisionTimeout: time.Second}, failures: 1,
			decide: func(context.Context, *testing.T, client.Client, client.WorkflowRun, activity.IndeterminateOutcome) {}},
		{name: "on-local-update-complete", opts: on, failures: 1, workflow: BookLocally, args: []any{"BA117"},
			decide: updateDecision(decision.Decision{Action: decision.ActionComplete, Result: json.RawMessage(`"seat 5 on BA117"`), By: "ops@acme"})},
		{name: "on-cancelled", opts: on, failures: 1,
			decide: func(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, _ activity.IndeterminateOutcome) {
				require.NoError(t, c.CancelWorkflow(ctx, run.GetID(), run.GetRunID()))
			}},
	})
}

// replaySecret is the secret of generation 1 the gen8- histories were
// keyed under (TestRecordKeyedHistories); replaySecret2 is a later
// generation a replaying worker may hold instead.
var (
	replaySecret  = mustReplaySecret(1, 0x5a)
	replaySecret2 = mustReplaySecret(2, 0xa5)
)

func mustReplaySecret(gen int, fill byte) *keyspace.Secret {
	s, err := keyspace.NewSecret(gen, bytes.Repeat([]byte{fill}, keyspace.MinSecretLength))
	if err != nil {
		panic(err)
	}
	return s
}

// TestRecordKeyedHistories records workflows keyed under a secret
// (Options.KeySecret): the gen8- histories, with the KeySecretChangeID
// marker at the first activity call.
func TestRecordKeyedHistories(t *testing.T) {
	keyed := interceptor.Options{KeySecret: replaySecret}
	on := interceptor.Options{KeySecret: replaySecret, AwaitDecision: true}
	recordScenarios(t, []historyScenario{
		{name: "keyed-off-ok", opts: keyed},
		{name: "keyed-off-indeterminate", opts: keyed, failures: 1},
		{name: "keyed-on-update-complete", opts: on, failures: 1, decide: updateDecision(decision.Decision{
			Action: decision.ActionComplete, Result: json.RawMessage(`"seat 9 on BA117"`), By: "ops", Reason: "confirmed"})},
		{name: "keyed-on-local-update-free", opts: on, failures: 1, workflow: BookLocally, args: []any{"BA117"},
			decide: updateDecision(decision.Decision{Action: decision.ActionFree, By: "ops@acme"})},
	})
}

// TestRecordFirstRunScopeHistories records workflows whose keys are scoped
// by the first run of their chain (Options.Scope ScopeFirstRun): the
// gen10-first-run- histories, with the FirstRunScopeChangeID marker at the
// first activity call.
func TestRecordFirstRunScopeHistories(t *testing.T) {
	first := interceptor.Options{Scope: interceptor.ScopeFirstRun}
	on := interceptor.Options{Scope: interceptor.ScopeFirstRun, AwaitDecision: true}
	recordScenarios(t, []historyScenario{
		{name: "first-run-off-ok", opts: first},
		{name: "first-run-on-update-free", opts: on, failures: 1,
			decide: updateDecision(decision.Decision{Action: decision.ActionFree, By: "ops@acme"})},
	})
}
