package interceptor

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"
)

func info(workflowID, runID, activityID string, attempt int32) sdkactivity.Info {
	return sdkactivity.Info{
		WorkflowExecution: workflow.Execution{ID: workflowID, RunID: runID},
		ActivityID:        activityID,
		Attempt:           attempt,
	}
}

func TestHolderNameRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		info     sdkactivity.Info
		identity string
	}{
		{"Plain", info("wf", "run", "7", 1), "host@42"},
		{"ColonsInIDs", info("wf:1", "run:2", "act:3", 12), "host:with:colons@1"},
		{"EmptyIdentity", info("wf", "run", "7", 3), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := holderName(tt.info, tt.identity)
			want := executionID(tt.info) + ":" + strconv.Itoa(int(tt.info.Attempt)) + ":" + tt.identity
			assert.Equal(t, want, h, "digest, attempt, then the worker identity")
		})
	}
}

func TestExecutionIDDistinguishes(t *testing.T) {
	t.Parallel()
	base := executionID(info("wf", "run", "7", 1))
	assert.Len(t, base, 16)
	assert.Equal(t, base, executionID(info("wf", "run", "7", 5)), "the attempt is not part of the execution")
	others := map[string]sdkactivity.Info{
		"workflow":         info("wf2", "run", "7", 1),
		"run":              info("wf", "run2", "7", 1),
		"activity":         info("wf", "run", "8", 1),
		"field boundaries": info("wfr", "un", "7", 1),
	}
	local := info("wf", "run", "7", 1)
	local.IsLocalActivity = true
	others["local activity with the same ID"] = local
	for what, in := range others {
		assert.NotEqual(t, base, executionID(in), "another %s is another execution", what)
	}
}
