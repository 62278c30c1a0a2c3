package activity_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/activity"
)

func TestNoEffect(t *testing.T) {
	t.Parallel()
	declined := errors.New("card declined")

	t.Run("Nil", func(t *testing.T) {
		t.Parallel()
		assert.NoError(t, activity.NoEffect(nil))
		assert.False(t, activity.IsNoEffect(nil))
		assert.NoError(t, activity.UnwrapNoEffect(nil))
	})
	t.Run("Marked", func(t *testing.T) {
		t.Parallel()
		err := activity.NoEffect(declined)
		require.Error(t, err)
		assert.True(t, activity.IsNoEffect(err))
		assert.ErrorIs(t, err, declined, "the mark keeps the error matchable")
		assert.Equal(t, declined.Error(), err.Error(), "the mark does not change the message")
		assert.Same(t, declined, activity.UnwrapNoEffect(err))
	})
	t.Run("MarkedThenWrapped", func(t *testing.T) {
		t.Parallel()
		err := fmt.Errorf("charging: %w", activity.NoEffect(declined))
		assert.True(t, activity.IsNoEffect(err))
		assert.Same(t, declined, activity.UnwrapNoEffect(err))
	})
	t.Run("Unmarked", func(t *testing.T) {
		t.Parallel()
		assert.False(t, activity.IsNoEffect(declined))
		assert.Same(t, declined, activity.UnwrapNoEffect(declined))
	})
}
