package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/components/nexusoperations"
	servertemporal "go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
)

// nexusRequestTimeout is the Nexus request timeout of the server these tests
// run on: the handler below outlives it, so its first answer is lost.
const nexusRequestTimeout = 3 * time.Second

// newNexusServer starts a server of its own whose Nexus start requests time
// out after nexusRequestTimeout and are retried within a fraction of a
// second.
func newNexusServer(t *testing.T) *temporaltest.TestServer {
	t.Helper()
	return temporaltest.NewServer(temporaltest.WithT(t), temporaltest.WithBaseServerOptions(
		// The server dispatches a Nexus request to a worker through its
		// frontend's HTTP API, which temporaltest leaves off: the option
		// that sees the server's configuration first turns it on.
		servertemporal.WithClaimMapper(func(cfg *config.Config) authorization.ClaimMapper {
			fe := cfg.Services["frontend"]
			fe.RPC.HTTPPort = testenv.FreePort(t)
			cfg.Services["frontend"] = fe
			return authorization.NewNoopClaimMapper()
		}),
		servertemporal.WithDynamicConfigClient(dynamicconfig.StaticClient{
			nexusoperations.CallbackURLTemplate.Key(): []dynamicconfig.ConstrainedValue{
				{Value: "http://localhost:7243/namespaces/{{.NamespaceName}}/nexus/callback"}},
			nexusoperations.RequestTimeout.Key():             []dynamicconfig.ConstrainedValue{{Value: nexusRequestTimeout}},
			nexusoperations.RetryPolicyInitialInterval.Key(): []dynamicconfig.ConstrainedValue{{Value: 200 * time.Millisecond}},
			nexusoperations.RetryPolicyMaximumInterval.Key(): []dynamicconfig.ConstrainedValue{{Value: time.Second}},
		})))
}

// createEndpoint creates a Nexus endpoint that reaches the workers of queue.
func createEndpoint(t *testing.T, srv *temporaltest.TestServer, c client.Client, queue string) string {
	t.Helper()
	name := strings.NewReplacer("_", "-", ".", "-", ":", "-").Replace(testenv.UniqueName("ep"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.OperatorService().CreateNexusEndpoint(ctx, &operatorservice.CreateNexusEndpointRequest{
		Spec: &nexuspb.EndpointSpec{
			Name: name,
			Target: &nexuspb.EndpointTarget{Variant: &nexuspb.EndpointTarget_Worker_{Worker: &nexuspb.EndpointTarget_Worker{
				Namespace: srv.GetDefaultNamespace(), TaskQueue: queue,
			}}},
		},
	})
	require.NoError(t, err)
	return name
}

// nexusAirline books seats in a ledger of its own: every booking is one
// effect, whatever answer reached the caller. Its first booking of a
// flight outlives the Nexus request, so the caller never gets that answer.
type nexusAirline struct {
	mu       sync.Mutex
	bookings map[string]int
	calls    atomic.Int32
	fail     bool
}

func (a *nexusAirline) book(ctx context.Context, req NexusSeatRequest, _ nexus.StartOperationOptions) (string, error) {
	n := a.calls.Add(1)
	if a.fail {
		return "", errors.New("the airline hung up mid-booking")
	}
	a.mu.Lock()
	a.bookings[req.Flight]++
	k := a.bookings[req.Flight]
	a.mu.Unlock()
	if n == 1 {
		// The booking has landed; its answer has not. The request times
		// out while the handler still runs (it ignores its context, as a
		// slow downstream would), and the server starts it again.
		time.Sleep(nexusRequestTimeout + time.Second)
	}
	return fmt.Sprintf("seat %s on %s, booking %d", req.Seat, req.Flight, k), nil
}

func (a *nexusAirline) booked(flight string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bookings[flight]
}

// registerSeats registers on e's worker the "seats" service, whose
// book-seat operation is a's, declared EFFECTFUL and keyed by flight and seat.
func registerSeats(t *testing.T, e *env, a *nexusAirline) {
	t.Helper()
	op, err := interceptor.NexusOperation(e.worker.Interceptor(), "book-seat",
		activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight", "seat"}}, a.book)
	require.NoError(t, err)
	svc := nexus.NewService("seats")
	require.NoError(t, svc.Register(op))
	e.worker.RegisterNexusService(svc)
}

// writeHistoryTo writes run's history under dir as name.json.
func writeHistoryTo(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, dir, name string) {
	t.Helper()
	var h historypb.History
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(&h)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644))
}

// A caller's workflow books a seat through a synchronous Nexus operation
// whose first answer is lost: the handler books, then outlives the Nexus
// request, and the server starts the operation again with the same request
// ID. Declared, the second start waits for the first and answers from its
// record: one booking, and the caller gets the first booking's answer. The
// same handler undeclared books at least twice.
func TestNexusOperationLostAnswerBooksOnce(t *testing.T) {
	t.Parallel()
	srv := newNexusServer(t)
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnvOn(t, srv, st, interceptor.Options{Lease: 2 * time.Second})
		endpoint := createEndpoint(t, srv, e.client, e.queue)

		declared := &nexusAirline{bookings: map[string]int{}}
		plain := &nexusAirline{bookings: map[string]int{}}
		registerSeats(t, e, declared)
		plainSvc := nexus.NewService("seats-undeclared")
		require.NoError(t, plainSvc.Register(nexus.NewSyncOperation("book-seat", plain.book)))
		e.worker.RegisterNexusService(plainSvc)
		e.worker.RegisterWorkflow(NexusBooking)
		e.start()

		var got, gotPlain string
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			assert.NoError(t, e.execute("acme", NexusBooking, &got, endpoint, "seats", NexusSeatRequest{Flight: "BA117", Seat: "12A"}))
		}()
		go func() {
			defer wg.Done()
			assert.NoError(t, e.execute("acme", NexusBooking, &gotPlain, endpoint, "seats-undeclared", NexusSeatRequest{Flight: "BA117", Seat: "12A"}))
		}()
		wg.Wait()

		assert.Equal(t, 1, declared.booked("BA117"), "declared: one booking, though the operation started twice")
		assert.GreaterOrEqual(t, int(declared.calls.Load()), 1)
		assert.Equal(t, "seat 12A on BA117, booking 1", got, "the caller gets the first booking's answer, from its record")
		// Undeclared, every start books: at least twice (the lost answer
		// books again), more when a loaded machine lets a later start's
		// request time out too; the caller gets the last booking.
		plainBooked := plain.booked("BA117")
		assert.GreaterOrEqual(t, plainBooked, 2, "undeclared: the lost answer books again")
		assert.Equal(t, fmt.Sprintf("seat 12A on BA117, booking %d", plainBooked), gotPlain)
		assert.Positive(t, e.events.count(interceptor.EventWaiting)+e.events.count(interceptor.EventDeduplicated),
			"the second start met the first's record")
		for _, ev := range e.events.all() {
			if ev.Kind == interceptor.EventClaimed {
				assert.Equal(t, srv.GetDefaultNamespace(), ev.Tenant, "the handler's tenant (its namespace), not the caller's acme")
			}
		}
	})
}

// An EFFECTFUL handler that fails leaves an outcome nobody can state: the
// caller's workflow gets the typed indeterminate error through the Nexus
// operation error, with the key a person decides on, and the handler is not
// run again.
func TestNexusOperationUnknownOutcomeReachesTheCaller(t *testing.T) {
	t.Parallel()
	srv := newNexusServer(t)
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnvOn(t, srv, st, interceptor.Options{})
		endpoint := createEndpoint(t, srv, e.client, e.queue)
		a := &nexusAirline{bookings: map[string]int{}, fail: true}
		registerSeats(t, e, a)
		e.worker.RegisterWorkflow(NexusBooking)
		e.start()

		ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), time.Minute)
		defer cancel()
		run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: e.queue},
			NexusBooking, endpoint, "seats", NexusSeatRequest{Flight: "BA118", Seat: "1C"})
		require.NoError(t, err)
		var got string
		require.NoError(t, run.Get(ctx, &got))
		if _, ok := os.LookupEnv(recordEnv); ok {
			writeHistoryTo(ctx, t, e.client, run, nexusHistoriesDir, "nexus-indeterminate")
		}
		require.Regexp(t, `^indeterminate v1:[0-9a-f]{64}$`, got, "the caller reads the indeterminate outcome and its key")
		assert.EqualValues(t, 1, a.calls.Load(), "the handler ran once: the outcome is not retried into a second effect")
		rec, err := st.Lookup(context.Background(), store.LookupParams{Tenant: srv.GetDefaultNamespace(), Key: got[len("indeterminate "):]})
		require.NoError(t, err)
		assert.Equal(t, store.StateIndeterminate, rec.State)
	})
}
