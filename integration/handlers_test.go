package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/store"
)

// The decision handlers describe themselves where a person looks (the Web
// UI and the temporal CLI read the workflow's metadata query): the query
// says what it lists, the Update carries a decision ready to paste, the
// signal says it is the fallback.
func TestDecisionHandlersDescribed(t *testing.T) {
	t.Parallel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
	run, _ := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, err := e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), "__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	described := handlerDescriptions(&md)
	assert.Contains(t, described[decision.QueryName], "wait for a person")
	assert.Contains(t, described[decision.UpdateName], `{"key":"v1:...","action":"complete"`)
	assert.Contains(t, described[decision.SignalName], "without Workflow Update")
}

// handlerDescriptions maps each handler a workflow's metadata lists —
// queries, updates, signals — to its description.
func handlerDescriptions(md *sdkpb.WorkflowMetadata) map[string]string {
	described := map[string]string{}
	for _, q := range md.GetDefinition().GetQueryDefinitions() {
		described[q.GetName()] = q.GetDescription()
	}
	for _, u := range md.GetDefinition().GetUpdateDefinitions() {
		described[u.GetName()] = u.GetDescription()
	}
	for _, s := range md.GetDefinition().GetSignalDefinitions() {
		described[s.GetName()] = s.GetDescription()
	}
	return described
}
