package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/internal/testenv"
)

// The main job books one seat per flight whatever the store: the repeated
// booking collapses, and the lost answer is decided by a person, not retried.
func TestRun(t *testing.T) {
	for _, cfg := range []Config{
		{Store: "memory"},
		{Store: "postgres", PostgresURL: testenv.PostgresURL(), Table: testenv.UniqueName("booking_records")},
		{Store: "redis", RedisAddr: testenv.RedisAddr(), Prefix: testenv.UniqueName("booking")},
	} {
		t.Run(cfg.Store, func(t *testing.T) {
			if cfg.Store == "postgres" {
				pool, _ := testenv.Postgres(t) // skips, or fails under CI, when the server does not answer
				t.Cleanup(func() {
					_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+cfg.Table)
				})
			}
			if cfg.Store == "redis" {
				rdb, _ := testenv.Redis(t)
				t.Cleanup(func() { _ = testenv.DeleteRedisPrefix(context.Background(), rdb, cfg.Prefix) })
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var out bytes.Buffer
			r, err := Run(ctx, &out, cfg)
			require.NoError(t, err, out.String())

			assert.Len(t, r.Airline["BA117"], 1, "the repeated booking took one seat")
			assert.Len(t, r.Airline["BA118"], 1, "the lost answer was not retried into a second seat")
			assert.Equal(t, r.Itinerary.Repeated[0], r.Itinerary.Repeated[1])
			assert.Equal(t, "BA118-Ada-1", r.Itinerary.Connection)
			assert.True(t, r.PersonDecided)
			assert.Equal(t, 2, r.Deduplicated, "the repeated booking, and the call that got the decided answer from the record")
			assert.Equal(t, 1, r.Indeterminate)
			assert.Equal(t, activity.ReasonBodyFailed, r.Pending.Reason)
			assert.True(t, r.Pending.BodyEntered)
			assert.Contains(t, out.String(), "nothing was booked twice")
			assert.Len(t, r.WithoutLibrary["BA117"], 2, "without the library the repeated booking takes two seats")
			assert.Len(t, r.WithoutLibrary["BA118"], 2, "and the retried lost answer a second seat")
		})
	}
}
