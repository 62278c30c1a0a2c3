package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/pgstore"
)

// SeatRequest asks for a seat on a booked flight. RequestID is fresh on
// every call, so it is not a key argument.
type SeatRequest struct {
	Flight    string `json:"flight"`
	Passenger string `json:"passenger"`
	Seat      string `json:"seat"`
	RequestID string `json:"request_id"`
}

// SeatMap assigns seats. Unlike the airline, it lives in the store's own
// PostgreSQL database: its table sits beside the idempotency records, so a
// seat and the record of its assignment commit in one transaction.
type SeatMap struct {
	table string // quoted
	// hiccup makes the first assignment fail after it wrote its row: the
	// seat map service timing out mid-request. The row rolls back with the
	// transaction, and the retry assigns it once.
	hiccup atomic.Bool
}

// seatsTable is the seat map's table for cfg: beside the store's.
func seatsTable(cfg Config) string {
	name := "booking_seats"
	if cfg.Table != "" {
		name = cfg.Table + "_seats"
	}
	return pgx.Identifier{name}.Sanitize()
}

// createSeats is the seat map's table.
const createSeats = ` (flight text NOT NULL, passenger text NOT NULL, seat text NOT NULL, attempt integer NOT NULL)`

// AssignSeat writes the passenger's seat through the store's transaction:
// EFFECTFUL and Transactional, keyed by flight and passenger. It answers
// with the seat and the attempt that assigned it.
func (m *SeatMap) AssignSeat(ctx context.Context, req SeatRequest) (string, error) {
	tx, err := pgstore.Tx(ctx)
	if err != nil {
		return "", err
	}
	time.Sleep(100 * time.Millisecond) // duplicates scheduled together overlap
	attempt := sdkactivity.GetInfo(ctx).Attempt
	if _, err := tx.Exec(ctx, "INSERT INTO "+m.table+" (flight, passenger, seat, attempt) VALUES ($1, $2, $3, $4)",
		req.Flight, req.Passenger, req.Seat, attempt); err != nil {
		return "", err
	}
	if m.hiccup.CompareAndSwap(true, false) {
		return "", errors.New("seat map: timed out after writing the seat")
	}
	return fmt.Sprintf("%s %s seat %s (attempt %d)", req.Flight, req.Passenger, req.Seat, attempt), nil
}

// SeatDeclaration declares AssignSeat transactional.
func (m *SeatMap) SeatDeclaration() *activity.Declaration {
	return activity.MustDeclare(m.AssignSeat, activity.Policy{
		Kind: activity.KindEffectful, KeyArguments: []string{"flight", "passenger"}, Transactional: true, Name: "AssignSeat",
	})
}

// AssignSeats asks for the same seat twice at once, as a model that
// repeats itself would, and returns both answers.
func AssignSeats(ctx workflow.Context, req SeatRequest) ([2]string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 5},
	})
	var out [2]string
	a := req
	a.RequestID = "s1"
	b := req
	b.RequestID = "s2"
	first := workflow.ExecuteActivity(ctx, "AssignSeat", a)
	second := workflow.ExecuteActivity(ctx, "AssignSeat", b)
	if err := first.Get(ctx, &out[0]); err != nil {
		return out, err
	}
	err := second.Get(ctx, &out[1])
	return out, err
}
