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
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/internal/testenv/redisenv"
)

// The main job books one seat per flight whatever the store: the repeated
// booking collapses, and the lost answer is decided by a person, not retried.
func TestRun(t *testing.T) {
	for _, cfg := range []Config{
		{Store: "memory"},
		{Store: "postgres", PostgresURL: pgenv.PostgresURL(), Table: testenv.UniqueName("booking_records")},
		{Store: "redis", RedisAddr: redisenv.RedisAddr(), Prefix: testenv.UniqueName("booking")},
	} {
		t.Run(cfg.Store, func(t *testing.T) {
			if cfg.Store == "postgres" {
				pool, _ := pgenv.Postgres(t) // skips, or fails under CI, when the server does not answer
				t.Cleanup(func() {
					_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+cfg.Table+", "+seatsTable(cfg))
				})
			}
			if cfg.Store == "redis" {
				rdb, _ := redisenv.Redis(t)
				t.Cleanup(func() { _ = redisenv.DeleteRedisPrefix(context.Background(), rdb, cfg.Prefix) })
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
			if cfg.Store == "postgres" {
				// The transactional seat: asked twice, failed once after
				// writing, one row.
				assert.Len(t, r.Seats, 1, "the seat map's rows")
				assert.Equal(t, r.SeatAnswers[0], r.SeatAnswers[1])
				assert.Contains(t, out.String(), "exactly once, and nobody was asked")
			} else {
				assert.Empty(t, r.Seats)
			}
		})
	}
}

// With the airline's lookup up, the lost answer is settled by the probe:
// the booking that landed is recorded and returned, nobody is asked, and
// nothing is booked twice.
func TestRunWithLookup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	r, err := Run(ctx, &out, Config{Store: "memory", Lookup: true})
	require.NoError(t, err, out.String())
	assert.Len(t, r.Airline["BA118"], 1, "the lost answer was settled, not retried")
	assert.Equal(t, "BA118-Ada-1", r.Itinerary.Connection, "the probe's answer")
	assert.False(t, r.PersonDecided, "nobody was asked")
	assert.Zero(t, r.Indeterminate)
}

// The airline answers a probe from the references it was sent.
func TestProbeOf(t *testing.T) {
	airline := NewAirline()
	probe := ProbeOf(airline)
	ctx := context.Background()
	_, err := probe(ctx, activity.ProbeRequest{Key: "v1:k"})
	require.ErrorIs(t, err, ErrLookupDown, "the story's airline cannot tell")
	airline.LookupAvailable = true
	confirmation, err := airline.book("BA1", "Ada", "v1:k")
	require.NoError(t, err)
	a, err := probe(ctx, activity.ProbeRequest{Key: "v1:k"})
	require.NoError(t, err)
	assert.Equal(t, activity.Landed, a.Landing)
	assert.Equal(t, confirmation, a.Result)
	a, err = probe(ctx, activity.ProbeRequest{Key: "v1:other"})
	require.NoError(t, err)
	assert.Equal(t, activity.NotLanded, a.Landing)
}
