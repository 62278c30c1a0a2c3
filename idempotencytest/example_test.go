package idempotencytest_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/idempotencytest"
)

// BookRequest is the booking activity's argument; Flight is its key.
type BookRequest struct {
	Flight    string `json:"flight"`
	RequestID string `json:"request_id"`
}

// Airline sells seats: every booking that runs is one seat sold.
type Airline struct {
	mu   sync.Mutex
	Sold int
}

// Book is EFFECTFUL: repeating it sells a second seat.
func (a *Airline) Book(_ context.Context, req BookRequest) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Sold++
	return fmt.Sprintf("CONF-%s-%d", req.Flight, a.Sold), nil
}

// BookTrip books one flight.
func BookTrip(ctx workflow.Context, flight string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3, InitialInterval: time.Second}})
	var conf string
	err := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "r-1"}).Get(ctx, &conf)
	return conf, err
}

// quietSuite is a test suite that does not log each failed attempt.
func quietSuite() *testsuite.WorkflowTestSuite {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	return &suite
}

// What does BookTrip do when the booking's answer is lost, and a person
// then records what the airline says? The call waits for the decision and
// returns the person's answer; one seat was sold.
func Example() {
	airline := &Airline{}
	env, err := idempotencytest.New(quietSuite(), idempotencytest.Options{
		Declarations:  []*activity.Declaration{activity.Effectful(airline.Book, "flight")},
		AwaitDecision: true,
	})
	if err != nil {
		panic(err)
	}
	defer env.Stop()
	env.OnNext("Book", idempotencytest.Indeterminate(activity.ReasonBodyFailed))
	env.DecideAfter(time.Hour, "Book", decision.Decision{Action: decision.ActionComplete,
		Result: []byte(`"CONF-BA117-by-phone"`), By: "ops@acme"})
	env.ExecuteWorkflow(BookTrip, "BA117")

	var conf string
	fmt.Println("error:", env.GetWorkflowError())
	_ = env.GetWorkflowResult(&conf)
	fmt.Println("result:", conf)
	fmt.Println("effects:", len(env.Effects()), "seats sold:", airline.Sold)
	d := env.Decisions()[0]
	fmt.Println("decision:", d.Result.Action, d.Result.Applied)
	// Output:
	// error: <nil>
	// result: CONF-BA117-by-phone
	// effects: 1 seats sold: 1
	// decision: complete recorded
}

// A call answered from a record another call made returns that answer;
// the body does not run.
func ExampleDeduplicated() {
	airline := &Airline{}
	env, err := idempotencytest.New(quietSuite(), idempotencytest.Options{
		Declarations: []*activity.Declaration{activity.Effectful(airline.Book, "flight")},
	})
	if err != nil {
		panic(err)
	}
	defer env.Stop()
	env.OnNext("Book", idempotencytest.Deduplicated("CONF-BA117-earlier"))
	env.ExecuteWorkflow(BookTrip, "BA117")

	var conf string
	_ = env.GetWorkflowResult(&conf)
	fmt.Println("result:", conf)
	fmt.Println("seats sold:", airline.Sold)
	fmt.Println("events:", env.EventKinds("Book"))
	// Output:
	// result: CONF-BA117-earlier
	// seats sold: 0
	// events: [deduplicated]
}

// Without AwaitDecision the workflow receives the indeterminate error: here
// an earlier call left the key indeterminate, and nobody has decided.
func ExampleIndeterminate() {
	airline := &Airline{}
	env, err := idempotencytest.New(quietSuite(), idempotencytest.Options{
		Declarations: []*activity.Declaration{activity.Effectful(airline.Book, "flight")},
	})
	if err != nil {
		panic(err)
	}
	defer env.Stop()
	env.OnNext("Book", idempotencytest.Indeterminate(activity.ReasonRecorded))
	env.ExecuteWorkflow(BookTrip, "BA117")

	o, ok := activity.AsIndeterminate(env.GetWorkflowError())
	fmt.Println("indeterminate:", ok, o.Reason)
	fmt.Println("seats sold:", airline.Sold)
	// Output:
	// indeterminate: true recorded
	// seats sold: 0
}

// A probe that finds the booking settles the lost answer with nobody asked.
func ExampleOutcome_ProbeAnswers() {
	airline := &Airline{}
	book, err := activity.Effectful(airline.Book, "flight").WithProbe(
		func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
			return activity.AnswerCannotTell(), nil // the real lookup; scripted below
		})
	if err != nil {
		panic(err)
	}
	env, err := idempotencytest.New(quietSuite(), idempotencytest.Options{Declarations: []*activity.Declaration{book}})
	if err != nil {
		panic(err)
	}
	defer env.Stop()
	env.OnNext("Book", idempotencytest.Indeterminate(activity.ReasonBodyFailed).
		ProbeAnswers(activity.AnswerLanded("CONF-BA117-found")))
	env.ExecuteWorkflow(BookTrip, "BA117")

	var conf string
	_ = env.GetWorkflowResult(&conf)
	fmt.Println("result:", conf)
	fmt.Println("events:", env.EventKinds("Book"))
	// Output:
	// result: CONF-BA117-found
	// events: [claimed probe_landed completed]
}
