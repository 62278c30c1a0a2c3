package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
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
	// ledger, when set, is a file that holds the bookings instead, one
	// "flight<TAB>confirmation" line each, so that a person in another
	// process (the starter) can look at the airline.
	ledger string
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

// OpenAirline returns an airline whose bookings live in the ledger file
// (created if missing), and that loses the answer to the first booking of
// each flight in lostAnswers made through this value.
func OpenAirline(ledger string, lostAnswers ...string) *Airline {
	a := NewAirline(lostAnswers...)
	a.ledger = ledger
	return a
}

// Bookings returns the confirmations issued on flight.
func (a *Airline) Bookings(flight string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ledger != "" {
		return readLedger(a.ledger)[flight]
	}
	return append([]string(nil), a.bookings[flight]...)
}

func (a *Airline) book(flight, passenger string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ledger != "" {
		a.bookings = readLedger(a.ledger)
	}
	n := len(a.bookings[flight]) + 1
	confirmation := fmt.Sprintf("%s-%s-%d", flight, passenger, n)
	a.bookings[flight] = append(a.bookings[flight], confirmation)
	if a.ledger != "" {
		f, err := os.OpenFile(a.ledger, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return "", err
		}
		_, err = fmt.Fprintf(f, "%s\t%s\n", flight, confirmation)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
	}
	if a.lostAnswers[flight] {
		delete(a.lostAnswers, flight)
		return "", errors.New("airline gateway timeout: no answer after the request was sent")
	}
	return confirmation, nil
}

// readLedger reads a ledger file: flight → confirmations, in order. A
// missing file is an airline that sold nothing yet.
func readLedger(path string) map[string][]string {
	out := map[string][]string{}
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		if flight, confirmation, ok := strings.Cut(line, "\t"); ok {
			out[flight] = append(out[flight], confirmation)
		}
	}
	return out
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
	Fares      map[string]int
	Repeated   [2]string // the two answers to the repeated booking
	Connection string
}

// BookTrip books a trip. It is plain workflow code: it knows nothing of
// idempotency. The worker's interceptor collapses the repeated booking, and
// when the connection's outcome is unknown it holds the call until a person
// decides (interceptor.Options.AwaitDecision) instead of failing the run.
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

	// The connection: the airline will lose this answer.
	err := workflow.ExecuteActivity(ctx, "Book", req(trip.Connection, "c1")).Get(ctx, &it.Connection)
	return it, err
}
