package integration

// This file holds what replaying a Nexus caller's history needs, and
// nothing newer than the previous release has: scripts/previous-release.sh
// copies it into that release's suite, which then replays the committed
// histories of testdata/nexus-histories with the previous release's
// workflow code (a rollback, a mixed fleet).

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// NexusSeatRequest is the input of the seat-booking Nexus operation.
type NexusSeatRequest struct {
	Flight string `json:"flight"`
	Seat   string `json:"seat"`
}

// NexusBooking calls the seat operation of service on endpoint and returns
// its answer, or, for an indeterminate outcome, "indeterminate " and the key.
func NexusBooking(ctx workflow.Context, endpoint, service string, req NexusSeatRequest) (string, error) {
	c := workflow.NewNexusClient(endpoint, service)
	var out string
	err := c.ExecuteOperation(ctx, "book-seat", req, workflow.NexusOperationOptions{
		ScheduleToCloseTimeout: time.Minute,
	}).Get(ctx, &out)
	if o, ok := activity.AsIndeterminate(err); ok {
		return "indeterminate " + o.Key, nil
	}
	return out, err
}

// nexusHistoriesDir holds the histories of workflows that call Nexus
// operations, apart from historiesDir: the previous release's suite has no
// NexusBooking workflow, so scripts/previous-release.sh brings this file
// along to replay them.
const nexusHistoriesDir = "testdata/nexus-histories"

// TestReplayNexusHistories replays every committed history of a workflow
// calling a Nexus operation under the interceptor, off and on, and with no
// interceptor at all. Replay compares a Nexus command's service and
// operation, not its header, so a worker that sets no tenant header (the
// previous release's) replays a history whose calls carry one.
func TestReplayNexusHistories(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(nexusHistoriesDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no committed histories under %s", nexusHistoriesDir)
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	configs := map[string][]sdkinterceptor.WorkerInterceptor{"none": nil}
	for name, opts := range map[string]interceptor.Options{"off": {}, "on": {AwaitDecision: true}} {
		opts.Store = st
		ic, err := interceptor.New(opts)
		require.NoError(t, err)
		configs[name] = []sdkinterceptor.WorkerInterceptor{ic}
	}
	for _, file := range files {
		for name, ics := range configs {
			t.Run(filepath.Base(file)+"/"+name, func(t *testing.T) {
				r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{
					Interceptors:       ics,
					ContextPropagators: []workflow.ContextPropagator{interceptor.TenantPropagator()},
				})
				require.NoError(t, err)
				r.RegisterWorkflow(NexusBooking)
				require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, file))
			})
		}
	}
}
