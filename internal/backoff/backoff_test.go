package backoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tesserix/idempotency/internal/backoff"
)

func TestBackoffDoublesUpToItsCap(t *testing.T) {
	b := backoff.New(100*time.Millisecond, 350*time.Millisecond)
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 350 * time.Millisecond,
		350 * time.Millisecond, 350 * time.Millisecond}, got)
	b.Reset()
	assert.Equal(t, 100*time.Millisecond, b.Peek(), "Reset starts over")
	assert.Equal(t, 100*time.Millisecond, b.Next())
}

func TestBackoffWithoutCapKeepsDoubling(t *testing.T) {
	b := backoff.New(time.Millisecond, 0)
	for range 70 {
		b.Next()
	}
	assert.Positive(t, b.Peek(), "no overflow into a negative pause")
	assert.Equal(t, 3*time.Second, func() time.Duration { c := backoff.New(3*time.Second, time.Second); return c.Next() }(),
		"a cap below the start is the start")
}

func TestBackoffSleepEndsWithItsContext(t *testing.T) {
	b := backoff.New(time.Hour, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.False(t, b.Sleep(ctx))
	b = backoff.New(time.Millisecond, 0)
	assert.True(t, b.Sleep(context.Background()))
}
