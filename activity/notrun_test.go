package activity_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
)

func TestNewNotRunError(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial tcp 127.0.0.1:5432: connection refused")
	// The constructor says what is known whatever it is handed.
	err := activity.NewNotRunError(activity.NotRun{Activity: "Book", Tenant: "acme", Key: "v1:abc",
		BodyEntered: true, EffectMayHaveLanded: true}, cause)

	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, activity.ErrorTypeStoreUnavailable, appErr.Type())
	assert.False(t, appErr.NonRetryable(), "nothing ran: the retry policy applies")
	assert.ErrorIs(t, err, cause)
	assert.Contains(t, err.Error(), "ran nothing")
	_, indeterminate := activity.AsIndeterminate(err)
	assert.False(t, indeterminate, "not an outcome for a person")

	want := activity.NotRun{Activity: "Book", Tenant: "acme", Key: "v1:abc", Reason: activity.ReasonStoreUnavailable,
		MayRetry: true, Cause: cause.Error()}
	for name, e := range map[string]error{
		"AsReturned": err,
		"Wrapped":    fmt.Errorf("booking: %w", err),
		"Cause":      temporal.NewApplicationErrorWithCause("trip failed", "TripFailed", err),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, ok := activity.AsNotRun(e)
			require.True(t, ok)
			assert.Equal(t, want, got)
		})
	}
	_, ok := activity.AsNotRun(activity.NewIndeterminateError(activity.IndeterminateOutcome{Activity: "Book"}, nil))
	assert.False(t, ok)
	_, ok = activity.AsNotRun(errors.New("plain"))
	assert.False(t, ok)

	// An error of the type with no details (an IDEMPOTENT call of an
	// earlier release) still reads, as retryable.
	got, ok := activity.AsNotRun(temporal.NewApplicationError("store down", activity.ErrorTypeStoreUnavailable))
	require.True(t, ok)
	assert.True(t, got.MayRetry)
	assert.Contains(t, got.Cause, "store down")
}
