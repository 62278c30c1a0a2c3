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

func sampleOutcome() activity.IndeterminateOutcome {
	return activity.IndeterminateOutcome{
		Activity:    "Book",
		Tenant:      "acme",
		Key:         "v1:abc",
		Reason:      activity.ReasonBodyFailed,
		BodyEntered: true,
		WorkflowID:  "wf",
		RunID:       "run",
		ActivityID:  "7",
	}
}

func TestNewIndeterminateError(t *testing.T) {
	t.Parallel()
	cause := errors.New("connection reset")
	err := activity.NewIndeterminateError(sampleOutcome(), cause)

	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, activity.ErrorTypeIndeterminateOutcome, appErr.Type())
	assert.True(t, appErr.NonRetryable(), "an indeterminate outcome is never retried")
	assert.ErrorIs(t, err, cause, "the cause is kept")
	assert.Contains(t, err.Error(), `"Book"`)
	assert.Contains(t, err.Error(), string(activity.ReasonBodyFailed))
	assert.Contains(t, err.Error(), "connection reset")

	want := sampleOutcome()
	want.Cause = "connection reset"
	tests := []struct {
		name string
		err  error
	}{
		{"AsReturned", err},
		{"Wrapped", fmt.Errorf("activity failed: %w", err)},
		{"CauseOfAnotherApplicationError", temporal.NewApplicationErrorWithCause("booking failed", "BookingFailed", err)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := activity.AsIndeterminate(tt.err)
			require.True(t, ok)
			assert.Equal(t, want, got)
		})
	}
}

func TestNewIndeterminateErrorKeepsExplicitCause(t *testing.T) {
	t.Parallel()
	o := sampleOutcome()
	o.Cause = "explicit"
	got, ok := activity.AsIndeterminate(activity.NewIndeterminateError(o, errors.New("other")))
	require.True(t, ok)
	assert.Equal(t, "explicit", got.Cause)
}

func TestAsIndeterminateRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
	}{
		{"Nil", nil},
		{"PlainError", errors.New("boom")},
		{"OtherApplicationErrorType", temporal.NewNonRetryableApplicationError("no", "SomethingElse", nil, sampleOutcome())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := activity.AsIndeterminate(tt.err)
			assert.False(t, ok)
			assert.Zero(t, got)
		})
	}
}

func TestAsIndeterminateForeignDetails(t *testing.T) {
	t.Parallel()
	// A sender that uses the type string but details of its own: the type
	// is the promise, and the message is kept.
	err := temporal.NewNonRetryableApplicationError("foreign", activity.ErrorTypeIndeterminateOutcome, nil, 42)
	got, ok := activity.AsIndeterminate(err)
	require.True(t, ok)
	assert.Contains(t, got.Cause, "foreign")
}

func TestIndeterminateOutcomeMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		o        activity.IndeterminateOutcome
		contains []string
		excludes []string
	}{
		{
			name:     "BodyEntered",
			o:        activity.IndeterminateOutcome{Activity: "Book", Tenant: "acme", Key: "v1:k", Reason: activity.ReasonBodyFailed, BodyEntered: true, EffectMayHaveLanded: true, Cause: "timeout"},
			contains: []string{`"Book"`, `"acme"`, "v1:k", "body_failed", "this attempt ran the body", "the effect may have landed", "timeout"},
		},
		{
			// An operator must not read "not entered" as "nothing was
			// booked" when an earlier holder may have booked it.
			name:     "EarlierHolder",
			o:        activity.IndeterminateOutcome{Activity: "Book", Tenant: "acme", Key: "v1:k", Reason: activity.ReasonHolderLost, EffectMayHaveLanded: true},
			contains: []string{"holder_lost", "this attempt did not run the body", "an earlier holder of the key may have applied the effect"},
			excludes: []string{"no effect"},
		},
		{
			name:     "NoKey",
			o:        activity.IndeterminateOutcome{Activity: "Book", Reason: activity.ReasonKeyNotDerivable},
			contains: []string{"key_not_derivable", "no attempt ran the body", "no effect was applied"},
			excludes: []string{"tenant", "may have landed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msg := tt.o.Message()
			for _, s := range tt.contains {
				assert.Contains(t, msg, s)
			}
			for _, s := range tt.excludes {
				assert.NotContains(t, msg, s)
			}
		})
	}
}
