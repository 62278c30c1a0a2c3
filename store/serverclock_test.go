package store_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

func TestServerClockFollowsTheServer(t *testing.T) {
	t.Parallel()
	local := storetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	serverAhead := 90 * time.Minute
	var calls atomic.Int32
	var fail atomic.Bool
	c := store.NewServerClock(local, time.Minute, func(context.Context) (time.Time, error) {
		calls.Add(1)
		if fail.Load() {
			return time.Time{}, errors.New("down")
		}
		return local.Now().Add(serverAhead), nil
	})
	ctx := context.Background()
	c.SyncIfStale(ctx)
	require.EqualValues(t, 1, calls.Load(), "the first use measures")
	assert.Equal(t, serverAhead, c.Offset())
	assert.Equal(t, local.Now().Add(serverAhead), c.Now())

	c.SyncIfStale(ctx)
	assert.EqualValues(t, 1, calls.Load(), "a fresh measurement is kept")

	local.Advance(2 * time.Minute)
	serverAhead = -time.Hour
	c.SyncIfStale(ctx)
	assert.EqualValues(t, 2, calls.Load(), "a stale measurement is taken again")
	assert.Equal(t, -time.Hour, c.Offset())

	fail.Store(true)
	local.Advance(2 * time.Minute)
	c.SyncIfStale(ctx)
	assert.Equal(t, -time.Hour, c.Offset(), "a failed measurement keeps the last offset")
}
