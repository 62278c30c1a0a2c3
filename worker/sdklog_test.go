package worker_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// capture is a slog handler that keeps every record.
type capture struct {
	mu      sync.Mutex
	records []slog.Record
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records = append(c.records, r)
	return nil
}
func (c *capture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capture) WithGroup(string) slog.Handler      { return c }

// levels returns the level of each record whose message is msg.
func (c *capture) levels(msg string) []slog.Level {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []slog.Level
	for _, r := range c.records {
		if r.Message == msg {
			out = append(out, r.Level)
		}
	}
	return out
}

type chargeRequest struct {
	Order string `json:"order"`
}

func charge(context.Context, chargeRequest) (string, error) { return "ch_1", nil }

// Without a zap logger the events reach the logger the worker already has:
// the SDK's logger of the activity (here the test suite's), at the levels
// the zap observer uses.
func TestSDKLogObserverUsesTheWorkersLogger(t *testing.T) {
	t.Parallel()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	ic, err := interceptor.New(interceptor.Options{Store: mem, Observer: worker.SDKLogObserver(nil)})
	require.NoError(t, err)
	t.Cleanup(ic.Stop)
	require.NoError(t, ic.Declare(activity.Effectful(charge, "order")))
	logs := &capture{}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(logs)))
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}})
	env.SetContextPropagators([]workflow.ContextPropagator{interceptor.TenantPropagator()})
	p, err := converter.GetDefaultDataConverter().ToPayload("acme")
	require.NoError(t, err)
	env.SetHeader(&commonpb.Header{Fields: map[string]*commonpb.Payload{interceptor.TenantHeader: p}})
	env.RegisterActivity(charge)
	for range 2 {
		_, err := env.ExecuteActivity(charge, chargeRequest{Order: "o-1"})
		require.NoError(t, err)
	}
	assert.Equal(t, []slog.Level{slog.LevelDebug}, logs.levels("idempotency: claimed"))
	assert.Equal(t, []slog.Level{slog.LevelInfo}, logs.levels("idempotency: deduplicated"))
}
