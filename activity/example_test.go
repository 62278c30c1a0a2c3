package activity_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tesserix/idempotency/activity"
)

// FlightRequest is the one struct argument of the booking activities below;
// key arguments name its JSON fields.
type FlightRequest struct {
	Flight    string `json:"flight"`
	RequestID string `json:"request_id"`
}

func BookFlight(ctx context.Context, req FlightRequest) (string, error) {
	if key, ok := activity.Key(ctx); ok {
		_ = key // send as the downstream's Idempotency-Key header
	}
	return "seat 12A on " + req.Flight, nil
}

func ChargeCard(ctx context.Context, card string, cents int, requestID string) error { return nil }

func LookupFlightFare(ctx context.Context, flight string) (int, error) { return 9900, nil }

// Declaring what repeating each activity would do. The request ID is fresh on
// every attempt, which is why it is not a key argument.
func Example_declaring() {
	lookup := activity.ReadOnly(LookupFlightFare)
	book := activity.Effectful(BookFlight, "flight")
	charge, err := activity.Declare(ChargeCard, activity.Policy{
		Kind:         activity.KindEffectful,
		Params:       []string{"card", "cents", "requestID"},
		KeyArguments: []string{"card", "cents"},
	})
	if err != nil {
		panic(err)
	}
	for _, d := range []*activity.Declaration{lookup, book, charge} {
		fmt.Printf("%s: %s %v\n", d.Name(), d.Kind(), d.Policy().KeyArguments)
	}

	a, _ := book.Key("acme", "run_1", []any{FlightRequest{Flight: "BA117", RequestID: "a"}})
	b, _ := book.Key("acme", "run_1", []any{FlightRequest{Flight: "BA117", RequestID: "b"}})
	fmt.Println("a retry that renumbers itself is one key:", a == b)
	// Output:
	// LookupFlightFare: READ_ONLY []
	// BookFlight: EFFECTFUL [flight]
	// ChargeCard: EFFECTFUL [card cents]
	// a retry that renumbers itself is one key: true
}

// A key argument that is not a field of the activity's argument is refused at
// declaration, not at the call that matters.
func ExampleDeclare_refused() {
	_, err := activity.Declare(BookFlight, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flihgt"}})
	fmt.Println(errors.Is(err, activity.ErrInvalidDeclaration))
	var de *activity.DeclarationError
	if errors.As(err, &de) {
		fmt.Println(de.Activity, de.Argument)
	}
	// Output:
	// true
	// BookFlight flihgt
}

// Reading the indeterminate error back, as a workflow does with the error
// workflow.ExecuteActivity returned, before routing the decision to a person.
func ExampleAsIndeterminate() {
	// What the dispatcher returns when an EFFECTFUL body fails.
	err := activity.NewIndeterminateError(activity.IndeterminateOutcome{
		Activity:    "BookFlight",
		Tenant:      "acme",
		Reason:      activity.ReasonBodyFailed,
		BodyEntered: true,
	}, errors.New("gateway timeout"))
	err = fmt.Errorf("activity error: %w", err)

	if o, ok := activity.AsIndeterminate(err); ok {
		fmt.Println("activity:", o.Activity)
		fmt.Println("reason:", o.Reason)
		fmt.Println("body entered:", o.BodyEntered)
		fmt.Println("cause:", o.Cause)
	}
	// Output:
	// activity: BookFlight
	// reason: body_failed
	// body entered: true
	// cause: gateway timeout
}

// Marking a failure that certainly did not take effect, so the dispatcher
// frees the key instead of stopping the run.
func ExampleNoEffect() {
	declined := errors.New("card declined")
	err := activity.NoEffect(declined)
	fmt.Println(err, activity.IsNoEffect(err), activity.UnwrapNoEffect(err) == declined)
	// Output:
	// card declined true true
}

// seatsByReference stands for the airline's booking lookup by the client's
// reference, which the booking sent as its Idempotency-Key.
var seatsByReference = map[string]string{}

// Declaring a probe: when BookFlight fails without saying whether the seat
// was booked, the dispatcher asks the airline by the key before it puts the
// call to a person.
func ExampleDeclaration_WithProbe() {
	probe := func(ctx context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
		seat, found := seatsByReference[string(req.Key)] // a read, never a booking
		if !found {
			// The airline deduplicates by the reference, so the retry,
			// sent under the same key, cannot book twice even if a first
			// request is still in flight.
			return activity.AnswerNotLanded(), nil
		}
		return activity.AnswerLanded(seat), nil // BookFlight returns a string
	}
	book, err := activity.Effectful(BookFlight, "flight").WithProbe(probe)
	if err != nil {
		panic(err)
	}
	fmt.Println(book.Name(), book.Kind(), book.Probe() != nil)

	_, err = activity.Idempotent(BookFlight, "flight").WithProbe(probe)
	fmt.Println("a probe on another kind is refused:", errors.Is(err, activity.ErrInvalidDeclaration))
	// Output:
	// BookFlight EFFECTFUL true
	// a probe on another kind is refused: true
}
