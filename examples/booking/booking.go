package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
)

// Airline is the downstream the activities book against: a legacy system
// with no idempotency of its own. Its ledger is the ground truth the example
// reports — every seat it handed out.
type Airline struct {
	mu       sync.Mutex
	bookings map[string][]string // flight → confirmations, in order
	// lostAnswers lists flights whose next booking lands but whose answer
	// never comes back: a gateway timeout after the seat was taken.
	lostAnswers map[string]bool
}

// NewAirline returns an airline that loses the answer to the first booking
// of each flight in lostAnswers.
func NewAirline(lostAnswers ...string) *Airline {
	a := &Airline{bookings: map[string][]string{}, lostAnswers: map[string]bool{}}
	for _, f := range lostAnswers {
		a.lostAnswers[f] = true
	}
	return a
}

// Bookings returns the confirmations issued on flight.
func (a *Airline) Bookings(flight string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.bookings[flight]...)
}

func (a *Airline) book(flight, passenger string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.bookings[flight]) + 1
	confirmation := fmt.Sprintf("%s-%s-%d", flight, passenger, n)
	a.bookings[flight] = append(a.bookings[flight], confirmation)
	if a.lostAnswers[flight] {
		delete(a.lostAnswers, flight)
		return "", errors.New("airline gateway timeout: no answer after the request was sent")
	}
	return confirmation, nil
}

// BookRequest asks for a seat. RequestID is fresh on every call, which is
// why it is not a key argument: a model or a retry that renumbers itself is
// still one booking.
type BookRequest struct {
	Flight    string `json:"flight"`
	Passenger string `json:"passenger"`
	RequestID string `json:"request_id"`
}

// Activities are the booking activities, bound to one airline.
type Activities struct {
	Airline *Airline
	// slow keeps Book's body running a moment, so that duplicates scheduled
	// together overlap as they would against a real airline.
	slow time.Duration
}

// LookupFare reads the fare: READ_ONLY, never deduplicated.
func (a *Activities) LookupFare(_ context.Context, flight string) (int, error) {
	return 100 + 7*len(flight), nil
}

// Book takes a seat: EFFECTFUL, keyed by flight and passenger.
func (a *Activities) Book(_ context.Context, req BookRequest) (string, error) {
	// A downstream with an Idempotency-Key header of its own would be sent
	// activity.Key(ctx); this airline has none, which is the point.
	time.Sleep(a.slow)
	return a.Airline.book(req.Flight, req.Passenger)
}

// Policies declares the activities for worker.RegisterActivities.
func Policies() map[string]activity.Policy {
	return map[string]activity.Policy{
		"LookupFare": {Kind: activity.KindReadOnly},
		"Book":       {Kind: activity.KindEffectful, KeyArguments: []string{"flight", "passenger"}},
	}
}

// Trip is what BookTrip books.
type Trip struct {
	Passenger string
	// Repeated is booked twice at once, as a model that repeats itself
	// would; Connection once.
	Repeated   string
	Connection string
}

// Itinerary is what BookTrip returns.
type Itinerary struct {
	Fares         map[string]int
	Repeated      [2]string // the two answers to the repeated booking
	Connection    string
	PersonDecided bool
}

// The names a person uses to reach a run stopped on an indeterminate
// booking: a query that says what is pending, a signal that carries the
// decision.
const (
	PendingQuery   = "pending-decision"
	DecisionSignal = "decision"
)

// Decision is a person's answer about an effect whose outcome was unknown.
type Decision struct {
	// Happened: the effect landed; Result is what it returned. The person
	// has recorded Result against the key, so any duplicate receives it too.
	Happened bool
	Result   string
	// Otherwise the effect did not happen: the person freed the key and the
	// workflow books again.
}

// BookTrip books a trip. When a booking's outcome is unknown it does not
// guess: it exposes the indeterminate outcome through PendingQuery and waits
// for a person's Decision on DecisionSignal.
func BookTrip(ctx workflow.Context, trip Trip) (Itinerary, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	it := Itinerary{Fares: map[string]int{}}
	for _, f := range []string{trip.Repeated, trip.Repeated, trip.Connection} {
		var fare int
		if err := workflow.ExecuteActivity(ctx, "LookupFare", f).Get(ctx, &fare); err != nil {
			return it, err
		}
		it.Fares[f] = fare
	}

	// The same booking twice in one turn, each with a fresh request id.
	req := func(flight, id string) BookRequest {
		return BookRequest{Flight: flight, Passenger: trip.Passenger, RequestID: id}
	}
	first := workflow.ExecuteActivity(ctx, "Book", req(trip.Repeated, "r1"))
	second := workflow.ExecuteActivity(ctx, "Book", req(trip.Repeated, "r2"))
	if err := first.Get(ctx, &it.Repeated[0]); err != nil {
		return it, err
	}
	if err := second.Get(ctx, &it.Repeated[1]); err != nil {
		return it, err
	}

	// The connection: its answer may be lost.
	for attempt := 1; ; attempt++ {
		err := workflow.ExecuteActivity(ctx, "Book", req(trip.Connection, fmt.Sprint("c", attempt))).Get(ctx, &it.Connection)
		o, indeterminate := activity.AsIndeterminate(err)
		if !indeterminate {
			return it, err
		}
		d, err := askPerson(ctx, o)
		if err != nil {
			return it, err
		}
		it.PersonDecided = true
		if d.Happened {
			it.Connection = d.Result
			return it, nil
		}
		// Not booked: the person freed the key, so booking again is safe.
	}
}

// askPerson publishes o on PendingQuery and waits for the Decision.
func askPerson(ctx workflow.Context, o activity.IndeterminateOutcome) (Decision, error) {
	pending := &o
	if err := workflow.SetQueryHandler(ctx, PendingQuery, func() (*activity.IndeterminateOutcome, error) {
		return pending, nil
	}); err != nil {
		return Decision{}, err
	}
	var d Decision
	workflow.GetSignalChannel(ctx, DecisionSignal).Receive(ctx, &d)
	pending = nil
	return d, nil
}
