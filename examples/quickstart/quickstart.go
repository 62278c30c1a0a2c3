// Package quickstart is the README's quick start as a program: the
// activities and the workflow a worker (./worker) runs and a starter
// (./starter) starts, against any Temporal frontend.
package quickstart

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
)

// TaskQueue is the task queue the worker polls and the starter uses.
const TaskQueue = "quickstart"

// BookRequest asks the airline for a seat.
type BookRequest struct {
	Passenger string `json:"passenger"`
	Flight    string `json:"flight"`
	RequestID string `json:"request_id"` // differs between attempts: not a key argument
}

// Itinerary is what BookTrip returns.
type Itinerary struct {
	Fare          int      `json:"fare"`
	Confirmations []string `json:"confirmations"`
}

// Airline stands in for a downstream service: every seat it sells is one
// line appended to its Ledger file.
type Airline struct{ Ledger string }

// LookupFare reads a fare and changes nothing: READ_ONLY.
func (a *Airline) LookupFare(ctx context.Context, flight string) (int, error) {
	return 120 + len(flight), nil
}

// Book sells a seat: repeating it sells a second one, so it is EFFECTFUL.
func (a *Airline) Book(ctx context.Context, req BookRequest) (string, error) {
	key, _ := activity.Key(ctx) // a real downstream takes it as its Idempotency-Key header
	f, err := os.OpenFile(a.Ledger, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s\t%s\t%s\n", req.Flight, req.Passenger, key); err != nil {
		return "", err
	}
	return "CONF-" + req.Flight + "-" + req.Passenger, nil
}

// Declarations say what repeating each activity would do. The key of a
// booking is its passenger and flight: two requests for them are one seat.
func Declarations(a *Airline) []*activity.Declaration {
	return []*activity.Declaration{
		activity.ReadOnly(a.LookupFare),
		activity.Effectful(a.Book, "passenger", "flight"),
	}
}

// BookTrip looks up the fare, then books the seat twice at once, as a
// double click or a retried request would: the airline sells one seat.
func BookTrip(ctx workflow.Context, passenger, flight string) (Itinerary, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second, // the body's usual run, with room
	})
	var it Itinerary
	if err := workflow.ExecuteActivity(ctx, "LookupFare", flight).Get(ctx, &it.Fare); err != nil {
		return it, err
	}
	var reqs []BookRequest
	var calls []workflow.Future
	for _, id := range []string{"click-1", "click-2"} {
		reqs = append(reqs, BookRequest{Passenger: passenger, Flight: flight, RequestID: id})
		calls = append(calls, workflow.ExecuteActivity(ctx, "Book", reqs[len(reqs)-1]))
	}
	for i, call := range calls {
		var confirmation string
		err := call.Get(ctx, &confirmation)
		if _, ok := activity.AsNotRun(err); ok { // the store was down and nothing ran: run it again
			err = workflow.ExecuteActivity(ctx, "Book", reqs[i]).Get(ctx, &confirmation)
		}
		if o, ok := activity.AsIndeterminate(err); ok {
			// Nobody can say whether the seat was sold: stop, and let a
			// person look (idempotencyctl show -tenant … -key …).
			return it, fmt.Errorf("booking %s needs a person: %s", o.Key, o.Message())
		}
		if err != nil {
			return it, err
		}
		it.Confirmations = append(it.Confirmations, confirmation)
	}
	return it, nil
}
