package interceptor_test

import (
	"context"
	"testing"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
)

type seat struct {
	Flight string `json:"flight"`
}

func bookSeat(context.Context, seat, nexus.StartOperationOptions) (string, error) { return "12A", nil }

// TestNexusOperationDeclarations: a Nexus operation takes the policies an
// activity does, named for the operation, and refuses those it cannot
// honour, before anything is registered.
func TestNexusOperationDeclarations(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	op, err := interceptor.NexusOperation(h.ic, "book-seat",
		activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}}, bookSeat)
	require.NoError(t, err)
	assert.Equal(t, "book-seat", op.Name())

	_, err = interceptor.NexusOperation(h.ic, "book-seat",
		activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"row"}}, bookSeat)
	assert.ErrorIs(t, err, activity.ErrInvalidDeclaration, "a key argument the input does not have")

	_, err = interceptor.NexusOperation(h.ic, "book-seat",
		activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, Transactional: true}, bookSeat)
	assert.ErrorIs(t, err, interceptor.ErrNexusDeclaration)
	assert.ErrorIs(t, err, activity.ErrInvalidDeclaration)

	_, err = interceptor.NexusOperation(h.ic, "book-seat",
		activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"},
			Probe: func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
				return activity.ProbeAnswer{}, nil
			}},
		bookSeat)
	assert.ErrorIs(t, err, interceptor.ErrNexusDeclaration)

	op, err = interceptor.NexusOperation(h.ic, "seat-map", activity.Policy{Kind: activity.KindReadOnly}, bookSeat)
	require.NoError(t, err, "READ_ONLY runs the handler as it is")
	assert.Equal(t, "seat-map", op.Name())
}
