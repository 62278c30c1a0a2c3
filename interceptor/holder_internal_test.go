package interceptor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			exec, attempt, ok := parseHolder(h)
			require.True(t, ok, "parse %q", h)
			assert.Equal(t, executionID(tt.info), exec)
			assert.Equal(t, tt.info.Attempt, attempt)
			assert.True(t, strings.HasSuffix(h, ":"+tt.identity), "the holder ends with the worker identity")
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

// Local and regular activities number their IDs from separate counters, so
// a local activity may share a regular one's ID in the same run: neither
// may take the other for an earlier attempt of itself.
func TestLocalAndRegularActivityNeverEarlierAttempts(t *testing.T) {
	t.Parallel()
	regular := info("wf", "run", "1", 1)
	local := info("wf", "run", "1", 2)
	local.IsLocalActivity = true
	assert.False(t, (&execution{info: local}).isEarlierAttempt(holderName(regular, "host")),
		"a local activity's retry must not take a regular activity's live claim for its own earlier attempt")
	regular.Attempt, local.Attempt = 2, 1
	assert.False(t, (&execution{info: regular}).isEarlierAttempt(holderName(local, "host")),
		"nor the reverse")
	earlier := local
	earlier.Attempt = 1
	local.Attempt = 2
	assert.True(t, (&execution{info: local}).isEarlierAttempt(holderName(earlier, "host")),
		"a local activity still recognises its own earlier attempt")
}

func TestParseHolderRefuses(t *testing.T) {
	t.Parallel()
	tests := []string{
		"",
		"worker-elsewhere",
		"short:1:host",
		"0123456789abcdef",
		"0123456789abcdef:1",
		"0123456789abcdef:one:host",
		"0123456789abcdef:99999999999:host",
	}
	for _, h := range tests {
		t.Run(h, func(t *testing.T) {
			t.Parallel()
			_, _, ok := parseHolder(h)
			assert.False(t, ok)
		})
	}
}

func TestIsEarlierAttempt(t *testing.T) {
	t.Parallel()
	current := info("wf", "run", "7", 3)
	x := &execution{info: current}
	tests := []struct {
		name   string
		holder string
		want   bool
	}{
		{"EarlierAttempt", holderName(info("wf", "run", "7", 1), "other-host"), true},
		{"PreviousAttempt", holderName(info("wf", "run", "7", 2), "host"), true},
		{"SameAttempt", holderName(current, "host"), false},
		{"LaterAttempt", holderName(info("wf", "run", "7", 4), "host"), false},
		{"OtherActivity", holderName(info("wf", "run", "8", 1), "host"), false},
		{"OtherRun", holderName(info("wf", "run2", "7", 1), "host"), false},
		{"Foreign", "worker-elsewhere", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, x.isEarlierAttempt(tt.holder))
		})
	}
}
