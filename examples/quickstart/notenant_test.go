package quickstart_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/examples/quickstart"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// The quick start's workflow started with no tenant (no header, no memo,
// no DefaultTenant: a start from the temporal CLI without --memo) fails with
// the configuration error, which says how to give one; it does not tell a
// person to look at a booking that never ran, and no seat is sold.
func TestBookTripWithoutATenant(t *testing.T) {
	t.Parallel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	ic, err := interceptor.New(interceptor.Options{Store: st})
	require.NoError(t, err)
	t.Cleanup(ic.Stop)
	a := &quickstart.Airline{Ledger: filepath.Join(t.TempDir(), "airline.ledger")}
	require.NoError(t, ic.Declare(quickstart.Declarations(a)...))

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}})
	env.SetContextPropagators([]workflow.ContextPropagator{interceptor.TenantPropagator()})
	env.RegisterActivity(a.LookupFare)
	env.RegisterActivity(a.Book)
	env.ExecuteWorkflow(quickstart.BookTrip, "Ada", "BA117")

	err = env.GetWorkflowError()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.Equal(t, decision.ErrorTypeNoTenant, appErr.Type())
	assert.NotContains(t, err.Error(), "needs a person")
	assert.Contains(t, err.Error(), `--memo 'idempotency-tenant="acme"'`)
	_, statErr := os.Stat(a.Ledger)
	assert.True(t, os.IsNotExist(statErr), "no seat was sold")
}
