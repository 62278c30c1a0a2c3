package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// SkewedClock is the system clock shifted by a fixed offset: a worker whose
// clock is wrong.
type SkewedClock time.Duration

// Now returns the system's time shifted by the offset.
func (c SkewedClock) Now() time.Time { return time.Now().Add(time.Duration(c)) }

// RunClockSkew checks that a store with a clock of its own (a database
// server's) judges leases and expiries by it: two instances on one backend,
// made by open with local clocks an hour apart — far more than any lease
// and than the retention window open must give them (30 minutes) — must
// agree that a renewing holder's claim is live and its record unexpired.
// open returns a store on the same backend every time it is called in one
// test, reading its local time from local and taking its retention window
// from ttl.
func RunClockSkew(t *testing.T, open func(t *testing.T, local store.Clock, ttl time.Duration) store.Store) {
	t.Helper()
	const (
		ttl   = 30 * time.Minute
		lease = 2 * time.Second
	)
	for _, tt := range []struct {
		name            string
		holder, contend time.Duration
	}{
		{"ContenderAhead", 0, time.Hour},
		{"HolderAhead", time.Hour, 0},
		{"BothWrong", -time.Hour, time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			holder := open(t, SkewedClock(tt.holder), ttl)
			contender := open(t, SkewedClock(tt.contend), ttl)
			tenant, key := "skew", "k-"+tt.name

			res, err := holder.Claim(ctx, store.ClaimParams{Tenant: tenant, Key: key, Holder: "holder", Lease: lease})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			token := res.Record.Token
			for i := range 3 {
				got, err := contender.Claim(ctx, store.ClaimParams{Tenant: tenant, Key: key, Holder: "contender", Lease: lease})
				require.NoError(t, err)
				require.Equal(t, store.StatusHeld, got.Status, "round %d: the contender must see the claim held, not free", i)
				assert.False(t, got.LeaseExpired, "round %d: a renewing holder's lease is live by the server's clock", i)
				time.Sleep(lease / 4)
				_, err = holder.Renew(ctx, store.RenewParams{Tenant: tenant, Key: key, Token: token, Lease: lease})
				require.NoError(t, err, "round %d: the holder still holds its claim", i)
			}
			require.NoError(t, holder.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: key, Token: token, Outcome: []byte("x")}))
			got, err := contender.Claim(ctx, store.ClaimParams{Tenant: tenant, Key: key, Holder: "contender", Lease: lease})
			require.NoError(t, err)
			assert.Equal(t, store.StatusCompleted, got.Status, "the record is live for the contender too")
		})
	}
}
