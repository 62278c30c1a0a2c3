package quickstart_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/examples/quickstart"
	"github.com/tesserix/idempotency/idempotencytest"
)

// kitEnv runs BookTrip through the interceptor with idempotencytest: no
// database, no server.
func kitEnv(t *testing.T, awaitDecision bool) (*idempotencytest.Env, *quickstart.Airline) {
	t.Helper()
	a := &quickstart.Airline{Ledger: filepath.Join(t.TempDir(), "airline.ledger")}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env, err := idempotencytest.New(&suite, idempotencytest.Options{
		Declarations:  quickstart.Declarations(a),
		AwaitDecision: awaitDecision,
	})
	require.NoError(t, err)
	t.Cleanup(env.Stop)
	return env, a
}

func seatsSold(t *testing.T, a *quickstart.Airline) int {
	t.Helper()
	b, err := os.ReadFile(a.Ledger)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return len(strings.Split(strings.TrimSpace(string(b)), "\n"))
}

// The two identical bookings of a trip sell one seat.
func TestBookTripSellsOneSeat(t *testing.T) {
	t.Parallel()
	env, a := kitEnv(t, false)
	env.ExecuteWorkflow(quickstart.BookTrip, "Ada", "BA117")
	var it quickstart.Itinerary
	require.NoError(t, env.GetWorkflowResult(&it))
	assert.Equal(t, []string{"CONF-BA117-Ada", "CONF-BA117-Ada"}, it.Confirmations)
	assert.Equal(t, 1, seatsSold(t, a))
	assert.Equal(t, 1, env.EffectsOf("Book"))
}

// When the airline's answer is lost, BookTrip stops and names the booking
// a person must look at; no second seat is sold.
func TestBookTripAnswerLost(t *testing.T) {
	t.Parallel()
	env, a := kitEnv(t, false)
	env.OnNext("Book", idempotencytest.Indeterminate(activity.ReasonBodyFailed))
	env.ExecuteWorkflow(quickstart.BookTrip, "Ada", "BA117")
	err := env.GetWorkflowError()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "needs a person")
	assert.Equal(t, 1, seatsSold(t, a), "the seat the lost answer sold, and no other")
}

// With decisions routed to a person, the trip waits; the person records
// what the airline says, and both bookings receive it.
func TestBookTripPersonCompletes(t *testing.T) {
	t.Parallel()
	env, a := kitEnv(t, true)
	env.OnNext("Book", idempotencytest.Indeterminate(activity.ReasonBodyFailed))
	env.DecideAfter(time.Hour, "Book", decision.Decision{Action: decision.ActionComplete,
		Result: []byte(`"CONF-BA117-Ada"`), By: "ops@acme", Reason: "the airline confirmed by phone"})
	env.ExecuteWorkflow(quickstart.BookTrip, "Ada", "BA117")
	var it quickstart.Itinerary
	require.NoError(t, env.GetWorkflowResult(&it))
	assert.Equal(t, []string{"CONF-BA117-Ada", "CONF-BA117-Ada"}, it.Confirmations)
	assert.Equal(t, 1, seatsSold(t, a))
	require.Len(t, env.Decisions(), 1)
	assert.Equal(t, decision.AppliedRecorded, env.Decisions()[0].Result.Applied)
}
