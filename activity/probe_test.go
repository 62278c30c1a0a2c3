package activity_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/activity"
)

func probeBook(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
	return activity.AnswerLanded("seat 14C"), nil
}

func TestDeclareProbe(t *testing.T) {
	t.Parallel()
	d, err := activity.Effectful(Book, "flight").WithProbe(probeBook)
	require.NoError(t, err)
	require.NotNil(t, d.Probe())
	ans, err := d.Probe()(context.Background(), activity.ProbeRequest{})
	require.NoError(t, err)
	assert.Equal(t, activity.AnswerLanded("seat 14C"), ans)
	assert.Equal(t, []string{"flight"}, d.Policy().KeyArguments, "the rest of the policy is kept")
	assert.Nil(t, activity.Effectful(Book, "flight").Probe(), "no probe unless declared")

	d, err = activity.Declare(Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, Probe: probeBook})
	require.NoError(t, err)
	assert.NotNil(t, d.Probe())
	renamed, err := d.WithName("BookV2")
	require.NoError(t, err)
	assert.NotNil(t, renamed.Probe(), "a renamed declaration keeps its probe")
}

// A probe settles what would be indeterminate, which only EFFECTFUL
// outcomes can be: on another kind it is a mistake, refused at declaration.
func TestDeclareProbeRefused(t *testing.T) {
	t.Parallel()
	for _, kind := range []activity.Kind{activity.KindIdempotent, activity.KindReadOnly} {
		_, err := activity.Declare(Book, activity.Policy{Kind: kind, KeyArguments: []string{"flight"}, Probe: probeBook})
		require.ErrorIs(t, err, activity.ErrInvalidDeclaration, kind.String())
		assert.Contains(t, err.Error(), "EFFECTFUL activities only")
		_, err = activity.MustDeclare(Book, activity.Policy{Kind: kind, KeyArguments: []string{"flight"}}).WithProbe(probeBook)
		require.ErrorIs(t, err, activity.ErrInvalidDeclaration, kind.String())
	}
}

func TestLandingString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "cannot_tell", activity.CannotTell.String())
	assert.Equal(t, "landed", activity.Landed.String())
	assert.Equal(t, "not_landed", activity.NotLanded.String())
	assert.Equal(t, "unknown", activity.Landing(9).String())
	assert.Equal(t, activity.ProbeAnswer{}, activity.AnswerCannotTell(), "the zero answer settles nothing")
	assert.Equal(t, activity.NotLanded, activity.AnswerNotLanded().Landing)
}
