package worker_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

type BookRequest struct {
	Flight    string `json:"flight"`
	RequestID string `json:"request_id"`
}

// Bookings holds activities registered as methods.
type Bookings struct{}

func (*Bookings) Book(context.Context, BookRequest) (string, error)    { return "booked", nil }
func (*Bookings) Reserve(context.Context, BookRequest) (string, error) { return "reserved", nil }
func (*Bookings) Lookup(context.Context, BookRequest) (string, error)  { return "fare", nil }
func (*Bookings) Plain(context.Context, BookRequest) (string, error)   { return "plain", nil }

func Cancel(context.Context, BookRequest) error { return nil }

func allPolicies() map[string]activity.Policy {
	return map[string]activity.Policy{
		"Book":    {Kind: activity.KindEffectful, KeyArguments: []string{"flight"}},
		"Reserve": {Kind: activity.KindIdempotent, KeyArguments: []string{"flight"}},
		"Lookup":  {Kind: activity.KindReadOnly},
		"Plain":   {},
	}
}

// lazyClient returns a client that never dials: these tests never start a
// worker.
func lazyClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", Logger: discard()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func memStore(t *testing.T) store.Store {
	t.Helper()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	return mem
}

func newWorker(t *testing.T, opts worker.Options) *worker.Worker {
	t.Helper()
	if opts.Idempotency.Store == nil {
		opts.Idempotency.Store = memStore(t)
	}
	w, err := worker.New(lazyClient(t), "bookings", opts)
	require.NoError(t, err)
	return w
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		client func(t *testing.T) client.Client
		opts   func(t *testing.T) worker.Options
		field  string
	}{
		{"NilClient", func(*testing.T) client.Client { return nil },
			func(t *testing.T) worker.Options {
				return worker.Options{Idempotency: interceptor.Options{Store: memStore(t)}}
			}, "worker.New client"},
		{"NoStore", lazyClient, func(*testing.T) worker.Options { return worker.Options{} }, "worker.Options.Idempotency.Store"},
		{"NegativeLease", lazyClient, func(t *testing.T) worker.Options {
			return worker.Options{Idempotency: interceptor.Options{Store: memStore(t), Lease: -1}}
		}, "worker.Options.Idempotency.Lease"},
		{"TinyLease", lazyClient, func(t *testing.T) worker.Options {
			return worker.Options{Idempotency: interceptor.Options{Store: memStore(t), Lease: 2}}
		}, "worker.Options.Idempotency.Lease"},
		{"TinySweepInterval", lazyClient, func(t *testing.T) worker.Options {
			return worker.Options{Idempotency: interceptor.Options{Store: memStore(t)}, SweepInterval: time.Nanosecond}
		}, "worker.Options.SweepInterval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, err := worker.New(tt.client(t), "bookings", tt.opts(t))
			require.Error(t, err)
			assert.Nil(t, w)
			assert.ErrorIs(t, err, interceptor.ErrInvalidOptions)
			var oe *interceptor.OptionsError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, tt.field, oe.Field)
		})
	}
}

func TestNewInstallsInterceptor(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	w := newWorker(t, worker.Options{Idempotency: interceptor.Options{Store: st}})
	require.NotNil(t, w.Interceptor())
	assert.Same(t, st, w.Interceptor().Store())
}

func TestRegister(t *testing.T) {
	t.Parallel()
	w := newWorker(t, worker.Options{})
	book := activity.Effectful((&Bookings{}).Book, "flight")
	require.NoError(t, w.Register(book, activity.ReadOnly(Cancel)))
	got, ok := w.Interceptor().Declaration("Book")
	require.True(t, ok)
	assert.Same(t, book, got)

	err := w.Register(activity.Idempotent((&Bookings{}).Book, "flight"))
	require.ErrorIs(t, err, worker.ErrRegistration)
	assert.ErrorIs(t, err, interceptor.ErrAlreadyDeclared)
	got, _ = w.Interceptor().Declaration("Book")
	assert.Same(t, book, got, "the first declaration stands")
}

func TestRegisterNameTakenBySDK(t *testing.T) {
	t.Parallel()
	w := newWorker(t, worker.Options{})
	w.RegisterActivityWithOptions(Cancel, sdkactivity.RegisterOptions{Name: "Cancel"})
	err := w.Register(activity.MustDeclare(Cancel, activity.Policy{Kind: activity.KindEffectful, OncePerRun: true}))
	require.ErrorIs(t, err, worker.ErrRegistration, "the SDK's panic on a duplicate name becomes an error")
	assert.Contains(t, err.Error(), `"Cancel"`)
	_, declared := w.Interceptor().Declaration("Cancel")
	assert.False(t, declared, "the plain Cancel the SDK kept must not run under a policy it was never registered with")
}

// An SDK refusal in the middle of a batch leaves every registered activity
// declared and every declared activity registered.
func TestRegisterStopsAtSDKRefusal(t *testing.T) {
	t.Parallel()
	w := newWorker(t, worker.Options{})
	w.RegisterActivityWithOptions(Cancel, sdkactivity.RegisterOptions{Name: "Cancel"})
	book := activity.Effectful((&Bookings{}).Book, "flight")
	lookup := activity.ReadOnly((&Bookings{}).Lookup)
	err := w.Register(book, activity.MustDeclare(Cancel, activity.Policy{Kind: activity.KindEffectful, OncePerRun: true}), lookup)
	require.ErrorIs(t, err, worker.ErrRegistration)

	_, ok := w.Interceptor().Declaration("Book")
	assert.True(t, ok, "Book was registered before the refusal and keeps its policy")
	_, ok = w.Interceptor().Declaration("Cancel")
	assert.False(t, ok, "the refused Cancel is not declared")
	_, ok = w.Interceptor().Declaration("Lookup")
	assert.False(t, ok, "nothing after the refusal is declared")
	require.NoError(t, w.Register(lookup), "and can be registered once the cause is fixed")
}

func TestRegisterActivities(t *testing.T) {
	t.Parallel()
	w := newWorker(t, worker.Options{})
	require.NoError(t, w.RegisterActivities(&Bookings{}, "bookings.", allPolicies()))

	tests := []struct {
		name string
		kind activity.Kind
		ok   bool
	}{
		{"bookings.Book", activity.KindEffectful, true},
		{"bookings.Reserve", activity.KindIdempotent, true},
		{"bookings.Lookup", activity.KindReadOnly, true},
		{"bookings.Plain", 0, false},
		{"Book", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := w.Interceptor().Declaration(tt.name)
			require.Equal(t, tt.ok, ok)
			if ok {
				assert.Equal(t, tt.kind, d.Kind())
				assert.Equal(t, tt.name, d.Name())
			}
		})
	}
}

func TestRegisterActivitiesRefuses(t *testing.T) {
	t.Parallel()
	with := func(edit func(map[string]activity.Policy)) map[string]activity.Policy {
		p := allPolicies()
		edit(p)
		return p
	}
	tests := []struct {
		name     string
		acts     any
		policies map[string]activity.Policy
		is       error
		mentions []string
	}{
		{"UnknownMethod", &Bookings{}, with(func(p map[string]activity.Policy) {
			p["Refund"] = activity.Policy{Kind: activity.KindEffectful, OncePerRun: true}
		}), nil, []string{"Refund"}},
		{"MethodWithoutPolicy", &Bookings{}, with(func(p map[string]activity.Policy) { delete(p, "Reserve") }), nil, []string{"Reserve", "no policy"}},
		{"BadDeclaration", &Bookings{}, with(func(p map[string]activity.Policy) {
			p["Book"] = activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flihgt"}}
		}), activity.ErrInvalidDeclaration, []string{"bookings.Book", "flihgt"}},
		{"NoKindWithKeyArguments", &Bookings{}, with(func(p map[string]activity.Policy) {
			p["Plain"] = activity.Policy{KeyArguments: []string{"flight"}}
		}), nil, []string{"Plain", "no Kind"}},
		{"NoKindWithProbe", &Bookings{}, with(func(p map[string]activity.Policy) {
			p["Plain"] = activity.Policy{Probe: func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
				return activity.AnswerCannotTell(), nil
			}}
		}), nil, []string{"Plain", "probe"}},
		{"TransactionalOnMemory", &Bookings{}, with(func(p map[string]activity.Policy) {
			// Reserve sorts after Book: a refusal found while registering
			// would leave Book registered.
			p["Reserve"] = activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, Transactional: true}
		}), store.ErrNotTransactional, []string{"bookings.Reserve", "Transactional", "*store.Memory"}},
		{"NoKindWithTransactional", &Bookings{}, with(func(p map[string]activity.Policy) {
			p["Plain"] = activity.Policy{Transactional: true}
		}), nil, []string{"Plain", "transaction"}},
		{"NotAPointer", Bookings{}, allPolicies(), nil, []string{"not a pointer to a struct"}},
		{"Nil", nil, allPolicies(), nil, []string{"not a pointer to a struct"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorker(t, worker.Options{})
			err := w.RegisterActivities(tt.acts, "bookings.", tt.policies)
			require.ErrorIs(t, err, worker.ErrRegistration)
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
			}
			for _, m := range tt.mentions {
				assert.Contains(t, err.Error(), m)
			}
			for name := range allPolicies() {
				_, ok := w.Interceptor().Declaration("bookings." + name)
				assert.False(t, ok, "a refused registration declares nothing (%s)", name)
			}
			// Nothing was registered either: the whole set still registers.
			require.NoError(t, w.RegisterActivities(&Bookings{}, "bookings.", allPolicies()))
		})
	}
}

func TestRegisterActivitiesTwice(t *testing.T) {
	t.Parallel()
	w := newWorker(t, worker.Options{})
	require.NoError(t, w.RegisterActivities(&Bookings{}, "", allPolicies()))
	err := w.RegisterActivities(&Bookings{}, "", allPolicies())
	require.ErrorIs(t, err, worker.ErrRegistration)
}

func TestClientOptions(t *testing.T) {
	t.Parallel()
	type otherPropagator struct{ workflow.ContextPropagator }
	other := otherPropagator{}
	z := zap.NewNop()

	tests := []struct {
		name       string
		in         client.Options
		logger     *zap.Logger
		wantProps  int
		wantLogger bool
	}{
		{"Empty", client.Options{}, nil, 1, false},
		{"KeepsOthers", client.Options{ContextPropagators: []workflow.ContextPropagator{other}}, nil, 2, false},
		{"AddsOnce", client.Options{ContextPropagators: []workflow.ContextPropagator{interceptor.TenantPropagator()}}, nil, 1, false},
		{"BridgesLogger", client.Options{}, z, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := tt.in
			before := len(in.ContextPropagators)
			got := worker.ClientOptions(in, tt.logger)
			assert.Len(t, got.ContextPropagators, tt.wantProps)
			assert.Len(t, in.ContextPropagators, before, "the caller's slice is not changed")
			assert.Equal(t, tt.wantLogger, got.Logger != nil)
			tenants := 0
			for _, p := range got.ContextPropagators {
				if p == interceptor.TenantPropagator() {
					tenants++
				}
			}
			assert.Equal(t, 1, tenants, "exactly one tenant propagator")

			assert.Len(t, got.Plugins, 1, "the plugin that hands the client's converter to the dispatcher")
			assert.Empty(t, in.Plugins, "the caller's slice is not changed")

			again := worker.ClientOptions(got, tt.logger)
			assert.Len(t, again.ContextPropagators, tt.wantProps, "applying it twice adds nothing")
			assert.Len(t, again.Plugins, 1, "applying it twice adds no second plugin")
		})
	}

	t.Run("KeepsOwnLogger", func(t *testing.T) {
		t.Parallel()
		own := discard()
		got := worker.ClientOptions(client.Options{Logger: own}, z)
		assert.Same(t, own, got.Logger)
	})
}

func TestWorkerEventsReachLogAndObserver(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	var (
		mu    sync.Mutex
		kinds []interceptor.EventKind
	)
	w := newWorker(t, worker.Options{
		Logger: zap.New(core),
		Worker: sdkworker.Options{WorkerStopTimeout: time.Second}, // no log of the default
		Idempotency: interceptor.Options{
			Store:  memStore(t),
			Tenant: func(context.Context, sdkactivity.Info) (string, bool) { return "acme", true },
			Observer: interceptor.ObserverFunc(func(_ context.Context, e interceptor.Event) {
				mu.Lock()
				defer mu.Unlock()
				kinds = append(kinds, e.Kind)
			}),
		},
	})
	b := &Bookings{}
	require.NoError(t, w.Register(activity.Effectful(b.Book, "flight")))

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(discard())
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{w.Interceptor()}})
	env.RegisterActivity(b.Book)
	for _, id := range []string{"a", "b"} {
		_, err := env.ExecuteActivity(b.Book, BookRequest{Flight: "BA117", RequestID: id})
		require.NoError(t, err)
	}

	want := []interceptor.EventKind{interceptor.EventClaimed, interceptor.EventCompleted, interceptor.EventDeduplicated}
	mu.Lock()
	assert.Equal(t, want, kinds, "the caller's observer sees every event")
	mu.Unlock()
	var msgs []string
	for _, e := range logs.All() {
		msgs = append(msgs, e.Message)
	}
	assert.Equal(t, []string{"idempotency: claimed", "idempotency: completed", "idempotency: deduplicated"}, msgs, "and so does the zap log")
}

func discard() log.Logger { return log.NewStructuredLogger(slog.New(slog.DiscardHandler)) }
