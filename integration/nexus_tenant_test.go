package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// NexusPassengerRequest books a seat for a passenger. The flight and seat
// are the key; the passenger is not, so a booking answered from another
// caller's record names that caller's passenger.
type NexusPassengerRequest struct {
	Flight    string `json:"flight"`
	Seat      string `json:"seat"`
	Passenger string `json:"passenger"`
}

// NexusCall calls operation of service on endpoint and says how it ended:
// the answer; "indeterminate TENANT KEY" for an indeterminate outcome;
// "error TYPE" for another application error.
func NexusCall(ctx workflow.Context, endpoint, service, operation string, req NexusPassengerRequest) (string, error) {
	var out string
	err := workflow.NewNexusClient(endpoint, service).ExecuteOperation(ctx, operation, req, workflow.NexusOperationOptions{
		ScheduleToCloseTimeout: time.Minute,
	}).Get(ctx, &out)
	if o, ok := activity.AsIndeterminate(err); ok {
		return "indeterminate " + o.Tenant + " " + o.Key, nil
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return "error " + ae.Type(), nil
	}
	return out, err
}

// nexusDesk is an airline's booking desk behind a Nexus operation. Its
// ledger lists every booking made, with the passenger it was made for:
// one line per effect, whatever answer reached a caller.
type nexusDesk struct {
	failures int32 // the first N calls fail, after nothing landed: unknown to the dispatcher

	calls atomic.Int32
	mu    sync.Mutex
	books []string
}

func (d *nexusDesk) book(_ context.Context, req NexusPassengerRequest, _ nexus.StartOperationOptions) (string, error) {
	if d.calls.Add(1) <= d.failures {
		return "", errors.New("the airline hung up mid-booking")
	}
	d.mu.Lock()
	d.books = append(d.books, req.Flight+" "+req.Seat+" "+req.Passenger)
	d.mu.Unlock()
	return fmt.Sprintf("seat %s on %s for %s", req.Seat, req.Flight, req.Passenger), nil
}

func (d *nexusDesk) ledger() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(slices.Values(d.books))
}

// registerDesk registers on e's worker the "desk" service, whose book-seat
// operation is d's, declared EFFECTFUL and keyed by flight and seat, and
// the NexusCall workflow.
func registerDesk(t *testing.T, e *env, d *nexusDesk) {
	t.Helper()
	op, err := interceptor.NexusOperation(e.worker.Interceptor(), "book-seat",
		activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight", "seat"}}, d.book)
	require.NoError(t, err)
	svc := nexus.NewService("desk")
	require.NoError(t, svc.Register(op))
	e.worker.RegisterNexusService(svc)
	e.worker.RegisterWorkflow(NexusCall)
}

// call runs NexusCall on e's queue, the workflow started under tenant (the
// caller's own choice: its client writes it), through endpoint.
func (e *env) call(tenant, endpoint string, req NexusPassengerRequest) string {
	e.t.Helper()
	var got string
	require.NoError(e.t, e.execute(tenant, NexusCall, &got, endpoint, "desk", "book-seat", req))
	return got
}

// claimedTenants returns the tenant of every claim the dispatcher made, in
// order.
func (l *eventLog) claimedTenants() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ev := range l.events {
		if ev.Kind == interceptor.EventClaimed {
			out = append(out, ev.Tenant)
		}
	}
	return out
}

// The handler decides a Nexus request's tenant; the caller does not. The
// handler serves two tenants through an endpoint each (the server, not the
// caller, says which endpoint a request came through). A caller of
// globex's endpoint whose workflow claims tenant acme — its client writes
// the idempotency-tenant header, as any client can — neither reads acme's
// recorded booking nor pre-empts acme's: its calls run under globex.
// Without the handler's decision (the header's tenant), the first call
// reads Ada's seat and the second makes Ada's request answer with
// Mallory's booking, Ada's never made.
func TestNexusTenantIsTheHandlers(t *testing.T) {
	t.Parallel()
	srv := newNexusServer(t)
	forEachStore(t, func(t *testing.T, st store.Store) {
		acmeEP, globexEP := endpointName(), endpointName()
		e := newEnvOn(t, srv, st, interceptor.Options{
			NexusTenant: interceptor.NexusTenantByEndpoint(map[string]string{acmeEP: "acme", globexEP: "globex"}),
		})
		createNamedEndpoint(t, srv, e.client, acmeEP, e.queue)
		createNamedEndpoint(t, srv, e.client, globexEP, e.queue)
		d := &nexusDesk{}
		registerDesk(t, e, d)
		e.start()

		// Ada (acme) books; Mallory, calling through globex's endpoint
		// and claiming acme, asks for the same seat: he does not get Ada's
		// booking, he gets his own, under globex.
		assert.Equal(t, "seat 12A on BA117 for Ada", e.call("acme", acmeEP, NexusPassengerRequest{"BA117", "12A", "Ada"}))
		assert.Equal(t, "seat 12A on BA117 for Mallory", e.call("acme", globexEP, NexusPassengerRequest{"BA117", "12A", "Mallory"}),
			"a caller outside acme read acme's recorded booking")

		// Mallory books first, claiming acme; then Ada asks: her booking
		// runs, and she gets it.
		assert.Equal(t, "seat 1A on LH400 for Mallory", e.call("acme", globexEP, NexusPassengerRequest{"LH400", "1A", "Mallory"}))
		assert.Equal(t, "seat 1A on LH400 for Ada", e.call("acme", acmeEP, NexusPassengerRequest{"LH400", "1A", "Ada"}),
			"a caller outside acme pre-empted acme's booking")

		assert.Equal(t, []string{"BA117 12A Ada", "BA117 12A Mallory", "LH400 1A Ada", "LH400 1A Mallory"}, d.ledger(),
			"one booking per tenant and seat, each for its own passenger")
		assert.Equal(t, []string{"acme", "globex", "globex", "acme"}, e.events.claimedTenants(),
			"each claim under the tenant of the endpoint it came through")

		// Within acme, the key is one: Ada's seat asked again through acme's
		// endpoint is answered from her record.
		assert.Equal(t, "seat 12A on BA117 for Ada", e.call("acme", acmeEP, NexusPassengerRequest{"BA117", "12A", "Ada again"}))
		assert.Len(t, d.ledger(), 4)
	})
}

// endpointName returns a name for an endpoint not yet created: the
// handler's options name endpoints before its worker, and so its queue,
// exists.
func endpointName() string {
	return strings.NewReplacer("_", "-", ".", "-", ":", "-").Replace(testenv.UniqueName("ep"))
}

// createNamedEndpoint creates the endpoint name, reaching the workers of queue.
func createNamedEndpoint(t *testing.T, srv *temporaltest.TestServer, c client.Client, name, queue string) {
	t.Helper()
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
}

// A caller's tenant header counts only where the handler trusts the
// endpoint the request came through (NexusTenantFromHeader): through the
// platform's endpoint the caller's tenant is the record's; through any
// other, the request is refused for want of a tenant, and nothing runs.
func TestNexusTenantHeaderTrustedOnlyFromNamedEndpoints(t *testing.T) {
	t.Parallel()
	srv := newNexusServer(t)
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	platform, public := endpointName(), endpointName()
	e := newEnvOn(t, srv, mem, interceptor.Options{NexusTenant: interceptor.NexusTenantFromHeader(platform)})
	createNamedEndpoint(t, srv, e.client, platform, e.queue)
	createNamedEndpoint(t, srv, e.client, public, e.queue)
	d := &nexusDesk{}
	registerDesk(t, e, d)
	e.start()

	assert.Equal(t, "seat 3C on AF10 for Ada", e.call("acme", platform, NexusPassengerRequest{"AF10", "3C", "Ada"}))
	assert.Equal(t, []string{"acme"}, e.events.claimedTenants(), "the trusted caller's tenant")
	assert.Equal(t, "error "+decision.ErrorTypeNoTenant, e.call("acme", public, NexusPassengerRequest{"AF10", "3C", "Mallory"}),
		"an untrusted caller's header names no tenant")
	assert.Equal(t, []string{"AF10 3C Ada"}, d.ledger())
	assert.EqualValues(t, 1, d.calls.Load(), "the refused request ran nothing")
}

// A Nexus handler's outcome is recorded through the client's codec, as a
// declared activity's is on the same worker: the store holds only what the
// encrypting codec made of it, and the duplicate answered from the record
// gets the first caller's answer.
func TestNexusOutcomeGoesThroughTheClientsCodec(t *testing.T) {
	t.Parallel()
	srv := newNexusServer(t)
	forEachStore(t, func(t *testing.T, st store.Store) {
		dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), newEncryptingCodec(t))
		logger := zaptest.NewLogger(t)
		c := newClient(srv, worker.ClientOptions(client.Options{DataConverter: dc}, logger))
		queue := testenv.UniqueName("tq")
		events := &eventLog{}
		w, err := worker.New(c, queue, worker.Options{Worker: workerOptions,
			Idempotency: interceptor.Options{Store: st, Observer: events}, Logger: logger})
		require.NoError(t, err)
		e := &env{t: t, client: c, worker: w, queue: queue, ledger: newLedger(), events: events}
		endpoint := createEndpoint(t, srv, c, queue)
		d := &nexusDesk{}
		registerDesk(t, e, d)
		e.start()

		first := e.call("acme", endpoint, NexusPassengerRequest{"BA117", "12A", "Ada"})
		assert.Equal(t, "seat 12A on BA117 for Ada", first)
		assert.Equal(t, first, e.call("acme", endpoint, NexusPassengerRequest{"BA117", "12A", "Ada"}), "answered from the record")
		assert.Len(t, d.ledger(), 1)
		assert.Equal(t, 1, events.count(interceptor.EventDeduplicated))

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rec, err := st.Lookup(ctx, store.LookupParams{Tenant: srv.GetDefaultNamespace(), Key: completedKey(t, events)})
		require.NoError(t, err)
		require.NotEmpty(t, rec.Outcome)
		raw := fmt.Sprintf("%+v %s", rec, rec.Outcome)
		assert.NotContains(t, raw, "BA117", "the store holds the Nexus outcome in the clear")
		assert.NotContains(t, raw, "Ada", "the store holds the Nexus outcome in the clear")
		var stored commonpb.Payloads
		require.NoError(t, proto.Unmarshal(rec.Outcome, &stored))
		require.Len(t, stored.Payloads, 1)
		assert.Equal(t, encryptedEncoding, string(stored.Payloads[0].Metadata[converter.MetadataEncoding]))
	})
}

// Nexus keys are derived under the handler worker's KeySecret ("k1:"), and
// a request finds the record another derivation left: one written before
// the secret was switched on (unkeyed), one written under the generation
// before a rotation. Three handler workers on one store, one after the
// other: unkeyed, keyed under generation 1, keyed under generation 2 with
// generation 1 kept. One booking per seat.
func TestNexusKeysUnderKeySecret(t *testing.T) {
	t.Parallel()
	srv := newNexusServer(t)
	forEachStore(t, func(t *testing.T, st store.Store) {
		s1, s2 := testSecret(t, 1, 0x11), testSecret(t, 2, 0x22)
		d := &nexusDesk{}
		handler := func(opts interceptor.Options) (*env, string) {
			e := newEnvOn(t, srv, st, opts)
			endpoint := createEndpoint(t, srv, e.client, e.queue)
			registerDesk(t, e, d)
			e.start()
			return e, endpoint
		}
		claimedKeys := func(e *env) []string {
			e.events.mu.Lock()
			defer e.events.mu.Unlock()
			var keys []string
			for _, ev := range e.events.events {
				if ev.Kind == interceptor.EventClaimed {
					keys = append(keys, ev.Key)
				}
			}
			return keys
		}

		unkeyed, ep0 := handler(interceptor.Options{})
		assert.Equal(t, "seat 1A on BA1 for Ada", unkeyed.call("acme", ep0, NexusPassengerRequest{"BA1", "1A", "Ada"}))
		require.Len(t, claimedKeys(unkeyed), 1)
		assert.True(t, strings.HasPrefix(claimedKeys(unkeyed)[0], "v1:"))

		gen1, ep1 := handler(interceptor.Options{KeySecret: s1})
		assert.Equal(t, "seat 1A on BA1 for Ada", gen1.call("acme", ep1, NexusPassengerRequest{"BA1", "1A", "Ada"}),
			"the unkeyed record answers after the switch")
		assert.Equal(t, "seat 2B on BA2 for Bob", gen1.call("acme", ep1, NexusPassengerRequest{"BA2", "2B", "Bob"}))
		keys := claimedKeys(gen1)
		require.Len(t, keys, 1, "one claim: BA1 was found, not claimed")
		assert.True(t, strings.HasPrefix(keys[0], "k1:"), "a Nexus key derived under the worker's secret: %s", keys[0])

		gen2, ep2 := handler(interceptor.Options{KeySecret: s2, KeySecrets: []*keyspace.Secret{s1}})
		assert.Equal(t, "seat 2B on BA2 for Bob", gen2.call("acme", ep2, NexusPassengerRequest{"BA2", "2B", "Bob"}),
			"the generation-1 record answers after the rotation")
		assert.Equal(t, "seat 1A on BA1 for Ada", gen2.call("acme", ep2, NexusPassengerRequest{"BA1", "1A", "Ada"}),
			"so does the unkeyed one")
		assert.Empty(t, claimedKeys(gen2), "nothing claimed: both found")

		assert.Equal(t, []string{"BA1 1A Ada", "BA2 2B Bob"}, d.ledger(), "one booking per seat across the switch and the rotation")
	})
}

// No workflow's Resolve or Probe activity touches a record no workflow
// made: a Nexus handler's indeterminate record, and a standalone
// activity's, are refused (IdempotencyForeignRecord) to a workflow of the
// very tenant they are under, and stay indeterminate for a person.
func TestWorkflowlessRecordsBoundToNoWorkflow(t *testing.T) {
	t.Parallel()
	t.Run("nexus", func(t *testing.T) {
		t.Parallel()
		srv := newNexusServer(t)
		mem, err := store.NewMemory(store.MemoryOptions{})
		require.NoError(t, err)
		e := newEnvOn(t, srv, mem, interceptor.Options{})
		endpoint := createEndpoint(t, srv, e.client, e.queue)
		d := &nexusDesk{failures: 1}
		registerDesk(t, e, d)
		e.worker.RegisterWorkflow(Forge)
		e.start()

		got := e.call("acme", endpoint, NexusPassengerRequest{"BA118", "1C", "Ada"})
		f := strings.Fields(got)
		require.Len(t, f, 3, got)
		require.Equal(t, "indeterminate", f[0], got)
		tenant, key := f[1], f[2]
		assert.Equal(t, srv.GetDefaultNamespace(), tenant, "the handler's tenant: its namespace, not the caller's acme")
		requireForgeRefused(t, e, tenant, key)
	})
	t.Run("standalone", func(t *testing.T) {
		t.Parallel()
		mem, err := store.NewMemory(store.MemoryOptions{})
		require.NoError(t, err)
		e := newAirlineEnvWith(t, mem, activity.KindEffectful, &airline{failures: 1}, interceptor.Options{}, Forge)
		_, err = e.bookStandalone("acme", testenv.UniqueName("standalone"), BookRequest{Flight: "BA119", RequestID: "ada"})
		o, ok := activity.AsIndeterminate(err)
		require.True(t, ok, "%v", err)
		requireForgeRefused(t, e, o.Tenant, o.Key)
	})
}

// requireForgeRefused has a workflow of tenant free, complete and probe
// the record under key, and asserts each is refused and the record stays
// indeterminate.
func requireForgeRefused(t *testing.T, e *env, tenant, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	forge := func(activityName string, resolve decision.ResolveRequest, probe decision.ProbeRequest) string {
		run, err := e.client.ExecuteWorkflow(interceptor.WithTenant(ctx, tenant),
			client.StartWorkflowOptions{ID: testenv.UniqueName("forger"), TaskQueue: e.queue}, Forge, activityName, resolve, probe)
		require.NoError(t, err)
		var typ string
		require.NoError(t, run.Get(ctx, &typ))
		return typ
	}
	assert.Equal(t, decision.ErrorTypeForeignRecord, forge(decision.ResolveActivityName,
		decision.ResolveRequest{Tenant: tenant, Key: key, Action: decision.ActionFree, By: "a workflow"}, decision.ProbeRequest{}),
		"a workflow of the tenant frees the record")
	assert.Equal(t, decision.ErrorTypeForeignRecord, forge(decision.ResolveActivityName,
		decision.ResolveRequest{Tenant: tenant, Key: key, Action: decision.ActionComplete, Result: []byte(`"forged seat"`), By: "a workflow"}, decision.ProbeRequest{}),
		"a workflow of the tenant completes the record")
	assert.Equal(t, decision.ErrorTypeForeignRecord, forge(decision.ProbeActivityName, decision.ResolveRequest{},
		decision.ProbeRequest{Activity: "Book", Tenant: tenant, Key: key}), "a workflow of the tenant probes the record")
	rec, err := e.worker.Interceptor().Store().Lookup(ctx, store.LookupParams{Tenant: tenant, Key: key})
	require.NoError(t, err)
	assert.Equal(t, store.StateIndeterminate, rec.State, "the record is still for a person to decide")
	assert.Equal(t, 3, e.events.count(interceptor.EventForeignRecord))
}

// An indeterminate Nexus outcome reaches a person: the caller's workflow
// gets the handler's tenant and the key; idempotencyctl shows the handler's
// record, says no workflow waits on it, and resolve settles it; the
// caller's next request for the same seat is answered with the person's
// outcome, and the handler does not run again.
func TestNexusIndeterminateDecidedByAPerson(t *testing.T) {
	t.Parallel()
	srv := newNexusServer(t)
	st, global := ctlStore(t)
	e := newEnvOn(t, srv, st, interceptor.Options{})
	endpoint := createEndpoint(t, srv, e.client, e.queue)
	d := &nexusDesk{failures: 1}
	registerDesk(t, e, d)
	e.start()
	tempEnv := []string{"TEMPORAL_ADDRESS=" + srv.GetFrontendHostPort(), "TEMPORAL_NAMESPACE=" + srv.GetDefaultNamespace()}

	got := e.call("acme", endpoint, NexusPassengerRequest{"BA120", "4D", "Ada"})
	f := strings.Fields(got)
	require.Len(t, f, 3, got)
	require.Equal(t, "indeterminate", f[0], got)
	tenant, key := f[1], f[2]

	r := ctl(t, tempEnv, append(global, "show", "-tenant", tenant, "-key", key)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "state        indeterminate\n")
	assert.Contains(t, r.stdout, "workflow_id  - (no workflow: a standalone activity or a Nexus operation)\n")
	assert.Contains(t, r.stdout, "activity     book-seat\n")

	r = ctl(t, tempEnv, append(global, "decide", "-tenant", tenant, "-key", key, "-free", "-by", "ops@airline")...)
	assert.Equal(t, 1, r.code, "stdout: %s", r.stdout)
	assert.Contains(t, r.stderr, "the record was made outside any workflow, by book-seat ")
	assert.Contains(t, r.stderr, "a Nexus operation's request ID): no workflow waits on the key; settle the record in the store with 'idempotencyctl resolve'")

	r = ctl(t, tempEnv, append(global, "resolve", "-tenant", tenant, "-key", key,
		"-outcome", `"seat 4D on BA120 for Ada, confirmed by phone"`, "-by", "ops@airline", "-reason", "the airline confirmed")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)

	assert.Equal(t, "seat 4D on BA120 for Ada, confirmed by phone", e.call("acme", endpoint, NexusPassengerRequest{"BA120", "4D", "Ada"}),
		"the caller's next request gets the person's outcome")
	assert.EqualValues(t, 1, d.calls.Load(), "the handler ran once")
	assert.Empty(t, d.ledger())
}
