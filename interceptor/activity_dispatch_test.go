package interceptor_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/store"
)

func TestKeyReachesBody(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	env := h.activityEnv(t, "acme")
	runID, _ := h.runIDs(t, env)
	req := BookRequest{Flight: "BA117", RequestID: "a"}

	got, err := book(env, h.acts.Book, req)
	require.NoError(t, err)
	want := h.key(t, "Book", "acme", runID, req)
	assert.Equal(t, want, got.Key, "the body reads the key derived from tenant, run, activity and key arguments")
	claimed := h.rec.first(t, interceptor.EventClaimed)
	assert.Equal(t, want, claimed.Key)
	assert.Equal(t, "acme", claimed.Tenant)
	assert.Equal(t, "Book", claimed.Activity)
	assert.Equal(t, activity.KindEffectful, claimed.ActivityKind)
	assert.Equal(t, runID, claimed.RunID)
	assert.EqualValues(t, 1, claimed.Attempt)
	assert.NotEmpty(t, claimed.ActivityID)

	rec, err := h.lookup(t, "acme", want)
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)
	assert.Equal(t, []interceptor.EventKind{interceptor.EventClaimed, interceptor.EventCompleted}, h.rec.kinds())
}

func TestUndeduplicatedPassThrough(t *testing.T) {
	t.Parallel()
	for _, tt := range passThroughKinds {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			env := h.activityEnv(t, "acme")
			req := BookRequest{Flight: "BA117", RequestID: "a"}
			for call := 1; call <= 2; call++ {
				got, err := book(env, tt.fn(h), req)
				require.NoError(t, err)
				assert.Equal(t, call, got.Call, "the body runs every time")
				assert.Empty(t, got.Key, "no key reaches the body")
			}
			assert.Equal(t, 2, h.acts.ledger.count(tt.act))
			assert.Zero(t, h.mem.Len(), "nothing is claimed or recorded")
			assert.Empty(t, h.rec.kinds(), "no events")
		})
	}
}

func TestUndeduplicatedFailureUnchanged(t *testing.T) {
	t.Parallel()
	for _, tt := range passThroughKinds {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.acts.on(tt.act, func(context.Context, int, BookRequest) error {
				return temporal.NewApplicationError("fare service down", "FareDown")
			})
			env := h.activityEnv(t, "")
			_, err := book(env, tt.fn(h), BookRequest{Flight: "BA117"})
			appErr := requireApplicationError(t, err, "FareDown")
			assert.False(t, appErr.NonRetryable(), "the retry policy is unchanged")
			assert.Zero(t, h.mem.Len())
		})
	}
}

func TestDeduplicated(t *testing.T) {
	t.Parallel()
	for _, tt := range dedupKinds {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			env := h.activityEnv(t, "acme")
			first, err := book(env, tt.fn(h), BookRequest{Flight: "BA117", RequestID: "a"})
			require.NoError(t, err)
			second, err := book(env, tt.fn(h), BookRequest{Flight: "BA117", RequestID: "b"})
			require.NoError(t, err)

			assert.Equal(t, first, second, "the duplicate receives exactly what the first call returned")
			assert.Equal(t, 1, h.acts.ledger.count(tt.act), "the body ran once")
			assert.Equal(t, 1, h.rec.count(interceptor.EventDeduplicated))
			dedup := h.rec.first(t, interceptor.EventDeduplicated)
			assert.Equal(t, first.Key, dedup.Key)

			other, err := book(env, tt.fn(h), BookRequest{Flight: "BA118", RequestID: "c"})
			require.NoError(t, err)
			assert.Equal(t, 2, other.Call, "another key argument is another effect")
			assert.NotEqual(t, first.Key, other.Key)
		})
	}
}

func TestDeduplicatedNoValue(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	env := h.activityEnv(t, "acme")
	for range 2 {
		val, err := env.ExecuteActivity(h.acts.Notify, BookRequest{Flight: "BA117"})
		require.NoError(t, err)
		assert.False(t, val.HasValue(), "an activity returning only an error has no value")
	}
	assert.Equal(t, 1, h.acts.ledger.count("Notify"))
	assert.Equal(t, 1, h.rec.count(interceptor.EventDeduplicated))
}

func TestOutcomeUnreadable(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	env := h.activityEnv(t, "acme")
	runID, _ := h.runIDs(t, env)
	req := BookRequest{Flight: "BA117"}
	key := h.key(t, "Book", "acme", runID, req)
	ctx := context.Background()
	res, err := h.mem.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: key, Holder: "other", Lease: time.Minute})
	require.NoError(t, err)
	require.NoError(t, h.mem.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: key, Token: res.Record.Token, Outcome: []byte{0xff, 0xff, 0xff}}))

	_, err = book(env, h.acts.Book, req)
	appErr := requireApplicationError(t, err, decision.ErrorTypeOutcomeUnreadable)
	assert.True(t, appErr.NonRetryable())
	assert.Zero(t, h.acts.ledger.total(), "the body is not entered")
}

func TestEffectfulFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		hook  hook
		cause string
	}{
		{"Error", func(context.Context, int, BookRequest) error { return errors.New("gateway timeout") }, "gateway timeout"},
		{"RetryableApplicationError", func(context.Context, int, BookRequest) error {
			return temporal.NewApplicationError("gateway timeout", "Gateway")
		}, "gateway timeout"},
		{"Panic", func(context.Context, int, BookRequest) error { panic("seat map corrupt") }, "seat map corrupt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.acts.on("Book", tt.hook)
			env := h.activityEnv(t, "acme")
			req := BookRequest{Flight: "BA117", RequestID: "a"}

			_, err := book(env, h.acts.Book, req)
			o := requireIndeterminate(t, err, activity.ReasonBodyFailed, true)
			assert.Equal(t, "Book", o.Activity)
			assert.Equal(t, "acme", o.Tenant)
			assert.NotEmpty(t, o.Key)
			assert.Contains(t, o.Cause, tt.cause)
			assert.NotEmpty(t, o.RunID)
			assert.NotEmpty(t, o.ActivityID)

			rec, err := h.lookup(t, "acme", o.Key)
			require.NoError(t, err)
			assert.Equal(t, store.StateIndeterminate, rec.State, "the claim is kept and marked")
			assert.Contains(t, rec.Reason, string(activity.ReasonBodyFailed))
			ind := h.rec.first(t, interceptor.EventIndeterminate)
			assert.Equal(t, activity.ReasonBodyFailed, ind.Reason)

			// A duplicate never runs the body again.
			_, err = book(env, h.acts.Book, BookRequest{Flight: "BA117", RequestID: "b"})
			again := requireIndeterminate(t, err, activity.ReasonRecorded, false)
			assert.Equal(t, o.Key, again.Key)
			assert.Equal(t, 1, h.acts.ledger.count("Book"), "the body ran once")
		})
	}
}

func TestIdempotentFailureReleases(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.acts.on("Reserve", func(_ context.Context, call int, _ BookRequest) error {
		if call == 1 {
			return temporal.NewApplicationError("inventory busy", "Busy")
		}
		return nil
	})
	env := h.activityEnv(t, "acme")

	_, err := book(env, h.acts.Reserve, BookRequest{Flight: "BA117", RequestID: "a"})
	appErr := requireApplicationError(t, err, "Busy")
	assert.False(t, appErr.NonRetryable(), "the error is returned unchanged, still retryable")
	_, isInd := activity.AsIndeterminate(err)
	assert.False(t, isInd)
	released := h.rec.first(t, interceptor.EventReleased)
	require.Error(t, released.Err)
	assert.Contains(t, released.Err.Error(), "inventory busy")
	_, err = h.lookup(t, "acme", released.Key)
	require.ErrorIs(t, err, store.ErrNotFound, "the claim is released")

	got, err := book(env, h.acts.Reserve, BookRequest{Flight: "BA117", RequestID: "b"})
	require.NoError(t, err)
	assert.Equal(t, 2, got.Call, "the retry runs the body")
}

func TestIdempotentPanicReleases(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.acts.on("Reserve", func(context.Context, int, BookRequest) error { panic("inventory corrupt") })
	env := h.activityEnv(t, "acme")

	_, err := book(env, h.acts.Reserve, BookRequest{Flight: "BA117"})
	require.Error(t, err)
	var panicErr *temporal.PanicError
	require.ErrorAs(t, err, &panicErr, "the SDK reports the panic as it would without the dispatcher")
	assert.Contains(t, panicErr.Error(), "inventory corrupt")
	_, isInd := activity.AsIndeterminate(err)
	assert.False(t, isInd)

	released := h.rec.first(t, interceptor.EventReleased)
	_, err = h.lookup(t, "acme", released.Key)
	require.ErrorIs(t, err, store.ErrNotFound, "the claim is released")
	assert.Zero(t, h.mem.Len())
}

func TestNoEffectReleases(t *testing.T) {
	t.Parallel()
	declined := temporal.NewNonRetryableApplicationError("card declined", "Declined", nil)
	h := newHarness(t)
	h.acts.on("Book", func(_ context.Context, call int, _ BookRequest) error {
		if call == 1 {
			return activity.NoEffect(declined)
		}
		return nil
	})
	env := h.activityEnv(t, "acme")

	_, err := book(env, h.acts.Book, BookRequest{Flight: "BA117", RequestID: "a"})
	appErr := requireApplicationError(t, err, "Declined")
	assert.True(t, appErr.NonRetryable(), "the error is returned as it was")
	_, isInd := activity.AsIndeterminate(err)
	assert.False(t, isInd, "a failure without effect is not indeterminate")
	assert.Zero(t, h.rec.count(interceptor.EventIndeterminate))
	assert.Equal(t, 1, h.rec.count(interceptor.EventReleased))
	assert.Zero(t, h.mem.Len(), "the key is freed")

	got, err := book(env, h.acts.Book, BookRequest{Flight: "BA117", RequestID: "b"})
	require.NoError(t, err)
	assert.Equal(t, 2, got.Call, "a freed key runs the body again")
}

func TestKeyNotDerivable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		tenant     string
		standalone bool
		req        BookRequest
	}{
		{"MissingKeyArgument", "acme", false, BookRequest{RequestID: "a"}},
		// A standalone activity without a tenant: see TestNoTenant and
		// TestStandaloneActivityTenant.
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			t.Run("Idempotent", func(t *testing.T) {
				t.Parallel()
				h := newHarness(t)
				env := h.activityEnv(t, tt.tenant)
				env.SetExecuteActivitiesInWorkflow(!tt.standalone)
				_, err := book(env, h.acts.Reserve, tt.req)
				appErr := requireApplicationError(t, err, decision.ErrorTypeKeyNotDerivable)
				assert.False(t, appErr.NonRetryable(), "IDEMPOTENT: retryable")
				assert.Zero(t, h.acts.ledger.total(), "the body is never entered")
				assert.Zero(t, h.mem.Len())
			})
			t.Run("Effectful", func(t *testing.T) {
				t.Parallel()
				h := newHarness(t)
				env := h.activityEnv(t, tt.tenant)
				env.SetExecuteActivitiesInWorkflow(!tt.standalone)
				_, err := book(env, h.acts.Book, tt.req)
				o := requireIndeterminate(t, err, activity.ReasonKeyNotDerivable, false)
				assert.Empty(t, o.Key)
				assert.False(t, o.EffectMayHaveLanded, "with no key, no attempt ever ran the body")
				assert.Zero(t, h.acts.ledger.total(), "the body is never entered")
				assert.Zero(t, h.mem.Len())
				assert.Equal(t, 1, h.rec.count(interceptor.EventIndeterminate))
			})
		})
	}
}

func TestStoreUnavailableAtClaim(t *testing.T) {
	t.Parallel()
	t.Run("Idempotent", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.faults.setDown("Claim", true)
		env := h.activityEnv(t, "acme")
		_, err := book(env, h.acts.Reserve, BookRequest{Flight: "BA117"})
		appErr := requireApplicationError(t, err, decision.ErrorTypeStoreUnavailable)
		assert.False(t, appErr.NonRetryable(), "IDEMPOTENT: retryable")
		assert.Zero(t, h.acts.ledger.total(), "a store that is down is not permission")
		assert.Positive(t, h.rec.count(interceptor.EventStoreError))

		h.faults.setDown("Claim", false)
		got, err := book(env, h.acts.Reserve, BookRequest{Flight: "BA117"})
		require.NoError(t, err, "the retry succeeds once the store is back")
		assert.Equal(t, 1, got.Call)
	})
	t.Run("Effectful", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.faults.setDown("Claim", true)
		env := h.activityEnv(t, "acme")
		_, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
		// Nothing ran in this attempt: no indeterminate outcome for a
		// person, but the retryable error that says so.
		_, indeterminate := activity.AsIndeterminate(err)
		assert.False(t, indeterminate, "the store being down before the body is no unknown outcome")
		appErr := requireApplicationError(t, err, decision.ErrorTypeStoreUnavailable)
		assert.False(t, appErr.NonRetryable(), "nothing ran: running it again is safe")
		n, ok := activity.AsNotRun(err)
		require.True(t, ok)
		assert.NotEmpty(t, n.Key, "the key was derived")
		assert.Equal(t, activity.ReasonStoreUnavailable, n.Reason)
		assert.False(t, n.BodyEntered)
		assert.False(t, n.EffectMayHaveLanded)
		assert.True(t, n.MayRetry)
		assert.Contains(t, n.Cause, "down")
		assert.Zero(t, h.acts.ledger.total(), "a store that is down is not permission")
		assert.Zero(t, h.rec.count(interceptor.EventIndeterminate))

		h.faults.setDown("Claim", false)
		got, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
		require.NoError(t, err, "the call run again once the store is back claims and runs")
		assert.Equal(t, 1, got.Call)
		assert.Equal(t, 1, h.acts.ledger.total(), "one effect")
	})
}

func TestCompleteFailsOrphaned(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.faults.setDown("Complete", true)
	env := h.activityEnv(t, "acme")

	got, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
	require.NoError(t, err, "the effect happened: its result is returned")
	assert.Equal(t, 1, got.Call)
	assert.Equal(t, 1, h.rec.count(interceptor.EventOrphaned))
	assert.Equal(t, 2, h.rec.count(interceptor.EventStoreError), "one per recording attempt (RecordAttempts: 2)")
	assert.Zero(t, h.rec.count(interceptor.EventCompleted))
	orphaned := h.rec.first(t, interceptor.EventOrphaned)
	require.ErrorIs(t, orphaned.Err, store.ErrUnavailable)

	rec, err := h.lookup(t, "acme", got.Key)
	require.NoError(t, err)
	assert.Equal(t, store.StatePending, rec.State, "the claim stays pending until its lease runs out")
}

func TestCompleteRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.faults.failNext("Complete", 1)
	env := h.activityEnv(t, "acme")

	got, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
	require.NoError(t, err)
	assert.Equal(t, 1, h.rec.count(interceptor.EventStoreError))
	assert.Equal(t, 1, h.rec.count(interceptor.EventCompleted), "the second attempt records the outcome")
	assert.Zero(t, h.rec.count(interceptor.EventOrphaned))
	rec, err := h.lookup(t, "acme", got.Key)
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)
}

func TestReleaseFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.faults.setDown("Release", true)
	h.acts.on("Reserve", func(context.Context, int, BookRequest) error {
		return temporal.NewApplicationError("inventory busy", "Busy")
	})
	env := h.activityEnv(t, "acme")

	_, err := book(env, h.acts.Reserve, BookRequest{Flight: "BA117"})
	requireApplicationError(t, err, "Busy")
	assert.Zero(t, h.rec.count(interceptor.EventReleased))
	storeErr := h.rec.first(t, interceptor.EventStoreError)
	require.ErrorIs(t, storeErr.Err, store.ErrUnavailable)
	rec, err := h.lookup(t, "acme", storeErr.Key)
	require.NoError(t, err)
	assert.Equal(t, store.StatePending, rec.State, "the claim stays pending until its lease runs out")
}

func TestMarkIndeterminateFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.faults.setDown("MarkIndeterminate", true)
	h.acts.on("Book", func(context.Context, int, BookRequest) error { return errors.New("gateway timeout") })
	env := h.activityEnv(t, "acme")

	_, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
	o := requireIndeterminate(t, err, activity.ReasonBodyFailed, true)
	rec, err := h.lookup(t, "acme", o.Key)
	require.NoError(t, err)
	assert.Equal(t, store.StatePending, rec.State, "the claim is kept: a duplicate will find the holder lost")
}

// An outcome recorded with EncodeOutcome is what a duplicate receives.
func TestResolvedOutcomeReachesDuplicate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	env := h.activityEnv(t, "acme")
	h.acts.on("Book", func(context.Context, int, BookRequest) error { return errors.New("gateway timeout") })
	_, err := book(env, h.acts.Book, BookRequest{Flight: "BA117", RequestID: "a"})
	o, ok := activity.AsIndeterminate(err)
	require.True(t, ok, "%v", err)

	want := Booking{Flight: "BA117", Call: 99, Key: "resolved by a person"}
	outcome, err := interceptor.EncodeOutcome(nil, want)
	require.NoError(t, err)
	require.NoError(t, h.mem.Resolve(context.Background(), store.ResolveParams{
		Tenant: o.Tenant, Key: o.Key, Decision: store.ActionComplete, Outcome: outcome,
	}))
	var decoded Booking
	require.NoError(t, interceptor.DecodeOutcome(nil, outcome, &decoded))
	assert.Equal(t, want, decoded)

	got, err := book(env, h.acts.Book, BookRequest{Flight: "BA117", RequestID: "b"})
	require.NoError(t, err)
	assert.Equal(t, want, got, "the person's answer is the recorded outcome")
	assert.Equal(t, 1, h.acts.ledger.count("Book"), "the body was not entered again")
}

// A tenant the store would refuse fails the call before any store call, at
// once and non-retryable, with no key: nothing could ever be recorded under
// it, so nobody must wait on it or retry it.
func TestInvalidTenantRefusedBeforeTheStore(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, tenant, rule string
	}{
		{"TooLong", strings.Repeat("t", store.MaxTenantLength+1), "longer than"},
		{"InvalidUTF8", "acme\xff", "UTF-8"},
		{"NUL", "ac\x00me", "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			t.Run("Idempotent", func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, tenantIs(tt.tenant))
				h.faults.setDown("Claim", true) // any store call would show up as a store error
				env := h.activityEnv(t, "")
				_, err := book(env, h.acts.Reserve, BookRequest{Flight: "BA117"})
				appErr := requireApplicationError(t, err, decision.ErrorTypeInvalidTenant)
				assert.True(t, appErr.NonRetryable(), "a tenant that is refused now is refused forever")
				assert.Contains(t, err.Error(), tt.rule, "the message names the tenant rule")
				assert.Zero(t, h.acts.ledger.total(), "the body is never entered")
				assert.Zero(t, h.rec.count(interceptor.EventStoreError), "no store call")
			})
			t.Run("Effectful", func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, tenantIs(tt.tenant))
				h.faults.setDown("Claim", true)
				env := h.activityEnv(t, "")
				_, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
				appErr := requireApplicationError(t, err, decision.ErrorTypeInvalidTenant)
				assert.True(t, appErr.NonRetryable(), "a tenant that is refused now is refused forever")
				_, ok := activity.AsIndeterminate(err)
				assert.False(t, ok, "a configuration error, not an effect nobody can state: nobody is asked")
				assert.Contains(t, err.Error(), tt.rule, "the message names the tenant rule")
				assert.Zero(t, h.acts.ledger.total(), "the body is never entered")
				assert.Zero(t, h.rec.count(interceptor.EventStoreError), "no store call")
				assert.Zero(t, h.rec.count(interceptor.EventIndeterminate))
				assert.Equal(t, 1, h.rec.count(interceptor.EventMisconfigured))
			})
		})
	}
}

// An execution with no tenant is refused before any store call, for both
// kinds, with the non-retryable ErrorTypeNoTenant error: the tenant travels
// in the activity's header, which every retry carries unchanged, so a retry
// cannot find one. It is a configuration error, not an outcome nobody can
// state: its event and metric say misconfigured, never indeterminate, and
// the message names the three ways to give a workflow a tenant.
func TestNoTenant(t *testing.T) {
	t.Parallel()
	for _, kc := range dedupKinds {
		t.Run(kc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			metrics := newCountingHandler()
			h.suite.SetMetricsHandler(metrics)
			h.faults.setDown("Claim", true) // any store call would show up as a store error
			env := h.activityEnv(t, "")
			_, err := book(env, kc.fn(h), BookRequest{Flight: "BA117"})
			appErr := requireApplicationError(t, err, decision.ErrorTypeNoTenant)
			assert.Contains(t, err.Error(), "the workflow carries no tenant")
			assert.True(t, appErr.NonRetryable(), "no retry can find a tenant")
			_, ok := activity.AsIndeterminate(err)
			assert.False(t, ok, "not an indeterminate outcome: nothing ran, nobody need decide")
			for _, way := range []string{
				"interceptor.WithTenant", "interceptor.TenantPropagator",
				`--memo 'idempotency-tenant="acme"'`, "Options.DefaultTenant",
			} {
				assert.Contains(t, err.Error(), way, "the message names every way to give a tenant")
			}
			msg := err.Error()
			assert.Less(t, strings.Index(msg, "worker.ClientPlugin()"), strings.Index(msg, "interceptor.TenantPropagator()"),
				"the plugin the docs teach comes before the propagator")
			assert.Contains(t, msg, `worker.PluginOptions{Idempotency: interceptor.Options{DefaultTenant: "acme"}}`)
			assert.Zero(t, h.acts.ledger.total(), "the body is never entered")
			assert.Zero(t, h.mem.Len())
			assert.Equal(t, []interceptor.EventKind{interceptor.EventMisconfigured}, h.rec.kinds())
			ev := h.rec.first(t, interceptor.EventMisconfigured)
			require.Error(t, ev.Err)
			assert.Contains(t, ev.Err.Error(), "no tenant")
			kind := map[string]string{"Book": "EFFECTFUL", "Reserve": "IDEMPOTENT"}[kc.act]
			assert.Equal(t, int64(1), metrics.counter(metricname.Misconfigured, kc.act, kind))
			assert.Zero(t, metrics.counter(metricname.Indeterminate, kc.act, kind))
		})
	}
}

// tenantIs resolves every execution's tenant to tenant.
func tenantIs(tenant string) func(*interceptor.Options) {
	return func(o *interceptor.Options) {
		o.Tenant = func(context.Context, sdkactivity.Info) (string, bool) { return tenant, true }
	}
}

// A record names the execution that made it, so an operator can find the
// workflow waiting on it; identifiers only.
func TestRecordNamesItsOrigin(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	env := h.activityEnv(t, "acme")
	runID, workflowID := h.runIDs(t, env)
	got, err := book(env, h.acts.Book, BookRequest{Flight: "BA117", RequestID: "secret-request"})
	require.NoError(t, err)
	rec, err := h.lookup(t, "acme", got.Key)
	require.NoError(t, err)
	assert.Equal(t, workflowID, rec.Origin.WorkflowID)
	assert.Equal(t, runID, rec.Origin.RunID)
	assert.Equal(t, "Book", rec.Origin.ActivityType)
	assert.NotEmpty(t, rec.Origin.ActivityID)
	assert.EqualValues(t, 1, rec.Origin.Attempt)
	assert.NotContains(t, rec.Origin.WorkflowID+rec.Origin.ActivityID, "secret-request", "never the arguments")
}

// An indeterminate key waits for a person however long that takes: a
// duplicate long past the retention window still finds it indeterminate
// and does not run the effect again.
func TestIndeterminateKeyOutlivesTheWindow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.acts.on("Book", func(context.Context, int, BookRequest) error { return errors.New("gateway timeout") })
	env := h.activityEnv(t, "acme")
	_, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
	requireIndeterminate(t, err, activity.ReasonBodyFailed, true)

	h.clock.Advance(10 * store.DefaultTTL)
	_, err = h.mem.Sweep(context.Background(), store.SweepParams{})
	require.NoError(t, err)
	_, err = book(env, h.acts.Book, BookRequest{Flight: "BA117"})
	requireIndeterminate(t, err, activity.ReasonRecorded, false)
	assert.Equal(t, 1, h.acts.ledger.count("Book"), "the effect ran once")
}

// Two orders in one run under a declaration keyed on every argument are
// two effects; the same order again is one. (Declared with no key
// arguments, which is now refused, they were one key: the second order got
// the first one's answer and was never charged.)
func TestKeyAllArgumentsTwoOrdersTwoEffects(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	require.NoError(t, h.ic.Declare(activity.MustDeclare(h.acts.Plain, activity.Policy{Kind: activity.KindEffectful, KeyAllArguments: true})))
	env := h.activityEnv(t, "acme")
	a, err := book(env, h.acts.Plain, BookRequest{Flight: "o-A", RequestID: "1"})
	require.NoError(t, err)
	b, err := book(env, h.acts.Plain, BookRequest{Flight: "o-B", RequestID: "1"})
	require.NoError(t, err)
	again, err := book(env, h.acts.Plain, BookRequest{Flight: "o-A", RequestID: "1"})
	require.NoError(t, err)
	assert.Equal(t, 2, h.acts.ledger.count("Plain"), "two orders, two charges")
	assert.NotEqual(t, a.Key, b.Key)
	assert.Equal(t, a, again, "the same order again gets the first answer")
}

// A failure the declaration names as definite (a card declined) is the
// key's outcome: returned as the body returned it, not indeterminate, and
// recorded, so a duplicate gets the same error without running the body.
// Any other failure stays indeterminate.
func TestDefiniteFailureIsAnOutcome(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	require.NoError(t, h.ic.Declare(activity.MustDeclare(h.acts.Plain, activity.Policy{Kind: activity.KindEffectful,
		KeyArguments: []string{"flight"}, DefiniteErrors: []string{"CardDeclined"}})))
	h.acts.on("Plain", func(_ context.Context, _ int, req BookRequest) error {
		if req.Flight == "declined" {
			return temporal.NewNonRetryableApplicationError("card declined", "CardDeclined", nil, "insufficient funds")
		}
		return errors.New("gateway timeout")
	})
	env := h.activityEnv(t, "acme")
	for i := range 2 {
		_, err := book(env, h.acts.Plain, BookRequest{Flight: "declined", RequestID: strconv.Itoa(i)})
		_, indeterminate := activity.AsIndeterminate(err)
		require.False(t, indeterminate, "call %d: a declined card is not a question for a person: %v", i, err)
		var ae *temporal.ApplicationError
		require.ErrorAs(t, err, &ae, "call %d", i)
		assert.Equal(t, "CardDeclined", ae.Type())
		assert.True(t, ae.NonRetryable())
		assert.Contains(t, ae.Error(), "card declined")
		var detail string
		require.NoError(t, ae.Details(&detail))
		assert.Equal(t, "insufficient funds", detail)
	}
	assert.Equal(t, 1, h.acts.ledger.count("Plain"), "the duplicate got the recorded failure")
	assert.Equal(t, 1, h.rec.count(interceptor.EventDeduplicated))
	assert.Zero(t, h.rec.count(interceptor.EventIndeterminate))

	_, err := book(env, h.acts.Plain, BookRequest{Flight: "timeout"})
	requireIndeterminate(t, err, activity.ReasonBodyFailed, true)
}
