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
	// never comes back: a gateway timeout after the seat was taken. A
	// booking sent with a reference (a trip's idempotency key) loses its
	// answer the first time that reference books the flight, so every trip
	// a worker books goes through it; one sent without, the first time
	// the flight is booked.
	lostAnswers map[string]bool
	// answered holds the flight and reference pairs whose answer was lost
	// once already.
	answered map[string]bool
	// references maps the reference each booking was sent with (the
	// idempotency key) to its confirmation, so the airline can answer
	// "what happened to the booking with reference K?".
	references map[string]string

	// LookupAvailable says whether the airline's booking lookup answers.
	// The story's airline has it down, so a lost answer nobody can state
	// goes to a person; with it up, the probe settles it by itself.
	LookupAvailable bool
}

// ErrLookupDown is the airline's answer to a lookup while it is down.
var ErrLookupDown = errors.New("airline booking lookup unavailable")

// Lookup answers whether a booking sent with reference landed, and its
// confirmation if it did.
func (a *Airline) Lookup(reference string) (confirmation string, found bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.LookupAvailable {
		return "", false, ErrLookupDown
	}
	confirmation, found = a.references[reference]
	return confirmation, found, nil
}

// NewAirline returns an airline that loses the answer to the first booking
// of each flight in lostAnswers under each reference (see lostAnswers).
func NewAirline(lostAnswers ...string) *Airline {
	a := &Airline{bookings: map[string][]string{}, lostAnswers: map[string]bool{}, answered: map[string]bool{}, references: map[string]string{}}
	for _, f := range lostAnswers {
		a.lostAnswers[f] = true
	}
	return a
}

// OpenAirline returns an airline whose bookings live in the ledger file
// (created if missing), and that loses the answer to the first booking of
// each flight in lostAnswers under each reference made through this value.
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

func (a *Airline) book(flight, passenger, reference string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ledger != "" {
		a.bookings = readLedger(a.ledger)
	}
	n := len(a.bookings[flight]) + 1
	confirmation := fmt.Sprintf("%s-%s-%d", flight, passenger, n)
	a.bookings[flight] = append(a.bookings[flight], confirmation)
	if reference != "" {
		a.references[reference] = confirmation
	}
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
		if reference == "" {
			delete(a.lostAnswers, flight)
			return "", errors.New("airline gateway timeout: no answer after the request was sent")
		}
		if once := flight + "\x00" + reference; !a.answered[once] {
			a.answered[once] = true
			return "", errors.New("airline gateway timeout: no answer after the request was sent")
		}
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

// Book takes a seat: EFFECTFUL, keyed by flight and passenger. The airline
// does not deduplicate, which is the point; it only keeps the reference it
// was sent (the idempotency key), so that it can answer a probe.
func (a *Activities) Book(ctx context.Context, req BookRequest) (string, error) {
	time.Sleep(a.slow)
	key, _ := activity.Key(ctx)
	return a.Airline.book(req.Flight, req.Passenger, string(key))
}

// ProbeOf returns the probe that asks the airline what happened to the
// booking sent with a key, before a person is asked: landed (with its
// confirmation), did not land, or — while its lookup is down — cannot tell.
// It never books. (A function, not a method of Activities: every method of
// Activities is registered as an activity.)
func ProbeOf(airline *Airline) activity.Probe {
	return func(_ context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
		confirmation, found, err := airline.Lookup(string(req.Key))
		switch {
		case err != nil:
			return activity.AnswerCannotTell(), err
		case found:
			return activity.AnswerLanded(confirmation), nil
		default:
			return activity.AnswerNotLanded(), nil
		}
	}
}

// Policies declares the activities for worker.RegisterActivities, with no
// probe.
func Policies() map[string]activity.Policy {
	return map[string]activity.Policy{
		"LookupFare": {Kind: activity.KindReadOnly},
		"Book":       {Kind: activity.KindEffectful, KeyArguments: []string{"flight", "passenger"}},
	}
}

// PoliciesWithProbe declares the activities, Book with airline's probe.
func PoliciesWithProbe(airline *Airline) map[string]activity.Policy {
	p := Policies()
	book := p["Book"]
	book.Probe = ProbeOf(airline)
	p["Book"] = book
	return p
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
