package decision_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
)

// The pending query's token is a 64-bit integer; a JSON reader that holds
// numbers as doubles printed 3388600842896735013 as 3388600842896735000.
// It is written as a string, and both shapes are read.
func TestPendingTokenIsAString(t *testing.T) {
	const token = int64(3388600842896735013)
	p := decision.PendingDecision{
		Outcome: activity.IndeterminateOutcome{Tenant: "acme", Key: "v1:ab", Token: token, Reason: activity.ReasonBodyFailed},
		Since:   time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC),
	}
	b, err := json.Marshal(p)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"token":"3388600842896735013"`)
	var asJS map[string]any // what a reader that holds numbers as doubles sees
	require.NoError(t, json.Unmarshal(b, &asJS))
	assert.Equal(t, "3388600842896735013", asJS["outcome"].(map[string]any)["token"])

	var back decision.PendingDecision
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, p, back)

	old := []byte(`{"outcome":{"tenant":"acme","key":"v1:ab","token":3388600842896735013,"reason":"body_failed"},"since":"2026-12-03T12:00:00Z"}`)
	var fromOld decision.PendingDecision
	require.NoError(t, json.Unmarshal(old, &fromOld), "the shape earlier releases wrote")
	assert.Equal(t, token, fromOld.Outcome.Token)
	assert.Equal(t, "acme", fromOld.Outcome.Tenant)

	none, err := json.Marshal(decision.PendingDecision{Outcome: activity.IndeterminateOutcome{Key: "v1:ab"}})
	require.NoError(t, err)
	assert.NotContains(t, string(none), "token", "no token, none written")

	var bad decision.PendingDecision
	assert.Error(t, json.Unmarshal([]byte(`{"outcome":{"token":"12x"}}`), &bad))
}
