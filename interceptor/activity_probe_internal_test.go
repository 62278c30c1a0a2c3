package interceptor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

type fare struct{ Cents int }

func TestCheckProbeResult(t *testing.T) {
	t.Parallel()
	errOnly := func(context.Context) error { return nil }
	byValue := func(context.Context) (fare, error) { return fare{}, nil }
	byPointer := func(context.Context) (*fare, error) { return nil, nil }
	anything := func(context.Context) (any, error) { return nil, nil }

	assert.NoError(t, checkProbeResult(errOnly, nil))
	assert.ErrorContains(t, checkProbeResult(errOnly, "x"), "returns only an error")
	assert.NoError(t, checkProbeResult(byValue, fare{Cents: 1}))
	assert.ErrorContains(t, checkProbeResult(byValue, &fare{}), "type *interceptor.fare")
	assert.ErrorContains(t, checkProbeResult(byValue, nil), "landed with no result")
	assert.NoError(t, checkProbeResult(byPointer, nil))
	assert.NoError(t, checkProbeResult(byPointer, &fare{}))
	assert.NoError(t, checkProbeResult(anything, "whatever"))
}
