package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

func TestSweepRunsBatchesUntilShort(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	m, err := store.NewMemory(store.MemoryOptions{TTL: time.Hour, Clock: clock})
	require.NoError(t, err)
	ctx := context.Background()
	for i := range 25 {
		_, err := m.Claim(ctx, store.ClaimParams{Tenant: "t", Key: fmt.Sprint("old-", i), Holder: "h", Lease: time.Minute})
		require.NoError(t, err)
	}
	clock.Advance(2 * time.Hour)
	_, err = m.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "live", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)

	n, err := store.Sweep(ctx, m, 4)
	require.NoError(t, err)
	assert.Equal(t, 25, n, "every expired record, in batches of 4")
	assert.Equal(t, 1, m.Len(), "the live record stays")

	_, err = store.Sweep(ctx, m, -1)
	assert.ErrorIs(t, err, store.ErrInvalid)
}

func TestSweepEveryStopsWithContext(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	m, err := store.NewMemory(store.MemoryOptions{TTL: time.Hour, Clock: clock})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	_, err = m.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	clock.Advance(2 * time.Hour)

	done := make(chan struct{})
	go func() {
		defer close(done)
		store.SweepEvery(ctx, m, time.Millisecond, 0, func(err error) { t.Errorf("sweep: %v", err) })
	}()
	require.Eventually(t, func() bool { return m.Len() == 0 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
}
