package interceptor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// FareRequest is the argument of the checked activities: Flight is the key
// argument, Fare and Seat are checked, RequestID is neither.
type FareRequest struct {
	Flight    string `json:"flight"`
	Fare      int    `json:"fare"`
	Seat      string `json:"seat,omitempty"`
	RequestID string `json:"request_id"`
}

// fares holds the checked activities and the ledger of their effects.
type fares struct {
	ledger ledger
	fail   atomic.Bool // the next body fails (its effect may have landed)
	probed atomic.Int32
}

func (f *fares) body(name string, req FareRequest) (Booking, error) {
	call := f.ledger.add(name)
	if f.fail.CompareAndSwap(true, false) {
		return Booking{}, errors.New("the airline's answer was lost")
	}
	return Booking{Flight: req.Flight, Call: call}, nil
}

// BookFare is declared EFFECTFUL, keyed by flight, checking fare and seat.
func (f *fares) BookFare(_ context.Context, req FareRequest) (Booking, error) {
	return f.body("BookFare", req)
}

// HoldFare is declared IDEMPOTENT, keyed by flight, checking fare and seat.
func (f *fares) HoldFare(_ context.Context, req FareRequest) (Booking, error) {
	return f.body("HoldFare", req)
}

// HoldShort is HoldFare declared with a retention of its own (retention_test.go).
func (f *fares) HoldShort(_ context.Context, req FareRequest) (Booking, error) {
	return f.body("HoldShort", req)
}

// checkHarness is the interceptor harness with the checked activities
// declared (BookFare with a probe that cannot tell, counting its calls).
type checkHarness struct {
	*harness
	fares *fares
	decls map[string]*activity.Declaration
}

func newCheckHarness(t *testing.T) *checkHarness {
	t.Helper()
	h := &checkHarness{harness: newHarness(t), fares: &fares{}}
	book := activity.MustDeclare(h.fares.BookFare, activity.Policy{Kind: activity.KindEffectful,
		KeyArguments: []string{"flight"}, CheckArguments: []string{"fare", "seat"},
		Probe: func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
			h.fares.probed.Add(1)
			return activity.AnswerCannotTell(), nil
		}})
	hold := activity.MustDeclare(h.fares.HoldFare, activity.Policy{Kind: activity.KindIdempotent,
		KeyArguments: []string{"flight"}, CheckArguments: []string{"fare", "seat"}})
	h.decls = map[string]*activity.Declaration{"BookFare": book, "HoldFare": hold}
	require.NoError(t, h.ic.Declare(book, hold))
	return h
}

func (h *checkHarness) env(t *testing.T) *testsuite.TestActivityEnvironment {
	t.Helper()
	env := h.activityEnv(t, "acme")
	env.RegisterActivity(h.fares.BookFare)
	env.RegisterActivity(h.fares.HoldFare)
	return env
}

func (h *checkHarness) call(env *testsuite.TestActivityEnvironment, name string, req FareRequest) (Booking, error) {
	fn := map[string]any{"BookFare": h.fares.BookFare, "HoldFare": h.fares.HoldFare}[name]
	val, err := env.ExecuteActivity(fn, req)
	if err != nil {
		return Booking{}, err
	}
	var b Booking
	return b, val.Get(&b)
}

// preclaim takes the key of name(req) for a holder elsewhere, keeping the
// digest req's checked arguments give (none when unchecked is set, as a
// record written before checks).
func (h *checkHarness) preclaim(t *testing.T, env *testsuite.TestActivityEnvironment, name string, req FareRequest, lease time.Duration, unchecked bool) (string, int64) {
	t.Helper()
	runID, _ := h.runIDs(t, env)
	d := h.decls[name]
	key, err := d.Key("acme", runID, []any{req})
	require.NoError(t, err)
	check, err := d.Check("acme", runID, []any{req})
	require.NoError(t, err)
	require.NotEmpty(t, check)
	if unchecked {
		check = ""
	}
	res, err := h.mem.Claim(context.Background(), store.ClaimParams{Tenant: "acme", Key: string(key), Holder: "worker-elsewhere",
		Lease: lease, Check: string(check), Origin: store.Origin{WorkflowID: "booking-elsewhere", RunID: "run-elsewhere"}})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status)
	return string(key), res.Record.Token
}

func (h *checkHarness) complete(t *testing.T, key string, token int64, b Booking) {
	t.Helper()
	outcome, err := interceptor.EncodeOutcome(converter.GetDefaultDataConverter(), b)
	require.NoError(t, err)
	require.NoError(t, h.mem.Complete(context.Background(), store.CompleteParams{Tenant: "acme", Key: key, Token: token, Outcome: outcome}))
}

// requireMismatch asserts err is the non-retryable mismatch error found
// as found, naming the checked arguments and key, and never their values.
func requireMismatch(t *testing.T, err error, key, found string, values ...string) activity.ArgumentsMismatch {
	t.Helper()
	appErr := requireApplicationError(t, err, activity.ErrorTypeArgumentsMismatch)
	assert.True(t, appErr.NonRetryable(), "the mismatch is not retried")
	m, ok := activity.AsArgumentsMismatch(err)
	require.True(t, ok)
	assert.Equal(t, []string{"fare", "seat"}, m.Arguments)
	assert.Equal(t, key, m.Key)
	assert.Equal(t, "acme", m.Tenant)
	assert.Equal(t, found, m.Found)
	assert.Contains(t, err.Error(), key, "the message names the record's key")
	assert.Contains(t, err.Error(), "fare, seat", "the message names the arguments")
	for _, v := range values {
		assert.NotContains(t, err.Error(), v, "the message never holds a value")
	}
	return m
}

var checkKinds = []string{"BookFare", "HoldFare"}

// A completed record made with other checked arguments refuses the call;
// the same arguments (another request id) get the recorded answer. Before
// checks, the second call silently got the first booking's answer.
func TestCheckCompletedRecord(t *testing.T) {
	t.Parallel()
	for _, name := range checkKinds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newCheckHarness(t)
			env := h.env(t)
			first, err := h.call(env, name, FareRequest{Flight: "BA117", Fare: 120, Seat: "12A", RequestID: "r1"})
			require.NoError(t, err)

			_, err = h.call(env, name, FareRequest{Flight: "BA117", Fare: 95, Seat: "12A", RequestID: "r2"})
			m := requireMismatch(t, err, h.keyOf(t, env, name, first.Flight), activity.FoundCompleted, "95", "120", "12A")
			assert.Equal(t, name, m.Activity)
			_, err = h.call(env, name, FareRequest{Flight: "BA117", Fare: 120, RequestID: "r3"})
			requireMismatch(t, err, h.keyOf(t, env, name, first.Flight), activity.FoundCompleted)

			again, err := h.call(env, name, FareRequest{Flight: "BA117", Fare: 120, Seat: "12A", RequestID: "r4"})
			require.NoError(t, err)
			assert.Equal(t, first, again, "the same checked arguments get the recorded answer")
			assert.Equal(t, 1, h.fares.ledger.count(name), "one effect")
			assert.Equal(t, 2, h.rec.count(interceptor.EventArgumentsMismatch))
		})
	}
}

// keyOf returns the key the harness's declaration derives for flight.
func (h *checkHarness) keyOf(t *testing.T, env *testsuite.TestActivityEnvironment, name, flight string) string {
	t.Helper()
	runID, _ := h.runIDs(t, env)
	k, err := h.decls[name].Key("acme", runID, []any{FareRequest{Flight: flight}})
	require.NoError(t, err)
	return string(k)
}

// A record written before checks (no digest) answers every call.
func TestCheckRecordWithoutDigest(t *testing.T) {
	t.Parallel()
	h := newCheckHarness(t)
	env := h.env(t)
	key, token := h.preclaim(t, env, "BookFare", FareRequest{Flight: "BA117", Fare: 120}, time.Minute, true)
	h.complete(t, key, token, Booking{Flight: "BA117", Call: 7})
	b, err := h.call(env, "BookFare", FareRequest{Flight: "BA117", Fare: 95})
	require.NoError(t, err)
	assert.Equal(t, 7, b.Call, "the old record's answer")
	assert.Zero(t, h.fares.ledger.total())
	assert.Zero(t, h.rec.count(interceptor.EventArgumentsMismatch))
}

// A holder waited for that completes under other checked arguments does
// not answer the waiting call.
func TestCheckWaitedHolder(t *testing.T) {
	t.Parallel()
	for _, name := range checkKinds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newCheckHarness(t)
			env := h.env(t)
			key, token := h.preclaim(t, env, name, FareRequest{Flight: "BA117", Fare: 120, Seat: "12A"}, time.Minute, false)
			waiting := h.rec.next(interceptor.EventWaiting)
			done := make(chan error, 1)
			go func() {
				_, err := h.call(env, name, FareRequest{Flight: "BA117", Fare: 95, Seat: "12A"})
				done <- err
			}()
			receive(t, waiting, "the call to wait")
			h.complete(t, key, token, Booking{Flight: "BA117", Call: 7})
			m := requireMismatch(t, receive(t, done, "the waiting call"), key, activity.FoundWaited, "95", "120")
			assert.Equal(t, "booking-elsewhere", m.RecordWorkflowID, "the record's maker")
			assert.Zero(t, h.fares.ledger.total())
			rec, err := h.lookup(t, "acme", key)
			require.NoError(t, err)
			assert.Equal(t, token, rec.Token, "the record is left as it is")
		})
	}
}

// An indeterminate record made with other checked arguments refuses the
// call instead of routing it to a person, whose decision would answer it
// with the other call's effect; the same arguments still get the
// indeterminate error.
func TestCheckIndeterminateRecord(t *testing.T) {
	t.Parallel()
	h := newCheckHarness(t)
	env := h.env(t)
	key, token := h.preclaim(t, env, "BookFare", FareRequest{Flight: "BA117", Fare: 120}, time.Minute, false)
	require.NoError(t, h.mem.MarkIndeterminate(context.Background(), store.MarkIndeterminateParams{Tenant: "acme", Key: key, Token: token, Reason: "r"}))

	_, err := h.call(env, "BookFare", FareRequest{Flight: "BA117", Fare: 95})
	requireMismatch(t, err, key, activity.FoundIndeterminate)
	_, err = h.call(env, "BookFare", FareRequest{Flight: "BA117", Fare: 120})
	o := requireIndeterminate(t, err, activity.ReasonRecorded, false)
	assert.NotEmpty(t, o.Check, "the outcome carries the digest for the decision")
	assert.Zero(t, h.fares.ledger.total())
}

// A lost holder whose record was made with other checked arguments is not
// taken over: neither marked indeterminate as this call's, nor probed, nor
// (IDEMPOTENT) run again under it.
func TestCheckTakeover(t *testing.T) {
	t.Parallel()
	for _, name := range checkKinds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newCheckHarness(t)
			env := h.env(t)
			key, token := h.preclaim(t, env, name, FareRequest{Flight: "BA117", Fare: 120}, time.Second, false)
			h.clock.Advance(2 * time.Second)

			_, err := h.call(env, name, FareRequest{Flight: "BA117", Fare: 95})
			requireMismatch(t, err, key, activity.FoundTakeover)
			assert.Zero(t, h.fares.probed.Load(), "the probe is not asked about another call's effect")
			assert.Zero(t, h.fares.ledger.total())
			rec, err := h.lookup(t, "acme", key)
			require.NoError(t, err)
			assert.Equal(t, token, rec.Token, "not taken over")
			assert.Equal(t, store.StatePending, rec.State)

			// The call with the record's arguments takes it over.
			_, err = h.call(env, name, FareRequest{Flight: "BA117", Fare: 120})
			if name == "BookFare" {
				requireIndeterminate(t, err, activity.ReasonHolderLost, false)
				assert.Equal(t, int32(1), h.fares.probed.Load(), "the probe is asked about its own call's effect")
			} else {
				require.NoError(t, err)
				assert.Equal(t, 1, h.fares.ledger.count(name))
			}
		})
	}
}

// A person's decision on a key whose record is gone makes a record that
// keeps the decided call's digest, so a later call with other arguments is
// still refused.
func TestCheckDecisionOnGoneKey(t *testing.T) {
	t.Parallel()
	h := newCheckHarness(t)
	env := h.env(t)
	h.fares.fail.Store(true)
	_, err := h.call(env, "BookFare", FareRequest{Flight: "BA117", Fare: 120})
	o := requireIndeterminate(t, err, activity.ReasonBodyFailed, true)
	require.NotEmpty(t, o.Check)
	require.NoError(t, h.mem.Resolve(context.Background(), store.ResolveParams{Tenant: "acme", Key: o.Key, Decision: store.ActionFree}))

	resolve := interceptor.ResolveActivityIn(h.mem, nil)
	require.NoError(t, resolve(context.Background(), decision.ResolveRequest{Tenant: o.Tenant, Key: o.Key,
		Action: decision.ActionComplete, Result: []byte(`{"flight":"BA117","call":1}`), By: "ops",
		Token: o.Token, Check: o.Check, Retention: o.Retention}))
	rec, err := h.lookup(t, "acme", o.Key)
	require.NoError(t, err)
	assert.Equal(t, o.Check, rec.Check)

	_, err = h.call(env, "BookFare", FareRequest{Flight: "BA117", Fare: 95})
	requireMismatch(t, err, o.Key, activity.FoundCompleted)
	b, err := h.call(env, "BookFare", FareRequest{Flight: "BA117", Fare: 120})
	require.NoError(t, err)
	assert.Equal(t, 1, b.Call, "the decided answer")
	assert.Equal(t, 1, h.fares.ledger.total())
}

func TestCheckDeclaration(t *testing.T) {
	t.Parallel()
	f := &fares{}
	for name, p := range map[string]activity.Policy{
		"AlsoAKey":          {Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, CheckArguments: []string{"flight"}},
		"NotAField":         {Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, CheckArguments: []string{"price"}},
		"Twice":             {Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, CheckArguments: []string{"fare", "fare"}},
		"ReadOnly":          {Kind: activity.KindReadOnly, CheckArguments: []string{"fare"}},
		"NegativeRetention": {Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, Retention: -time.Second},
	} {
		_, err := activity.Declare(f.BookFare, p)
		assert.ErrorIs(t, err, activity.ErrInvalidDeclaration, name)
	}
}

// A call Temporal timed out reaches the workflow as an indeterminate
// outcome read from the dispatcher's timeout marker. A person's decision on
// it that finds the key's record gone makes a record keeping the call's
// digest and retention, as for any other indeterminate outcome: a later
// call with other checked arguments is still refused. Before the marker
// carried them, that record kept no digest (it answered every call) and
// the store's window instead of the activity's.
func TestCheckTimedOutCallDecidedOnGoneKey(t *testing.T) {
	t.Parallel()
	h := newCheckHarness(t)
	kept := activity.MustDeclare(h.fares.BookFare, activity.Policy{Kind: activity.KindEffectful, Name: "BookKept",
		KeyArguments: []string{"flight"}, CheckArguments: []string{"fare", "seat"}, Retention: 10 * time.Minute})
	require.NoError(t, h.ic.Declare(kept))
	env := h.env(t)
	env.RegisterActivityWithOptions(h.fares.BookFare, sdkactivity.RegisterOptions{Name: "BookKept"})
	var marker atomic.Pointer[activity.TimeoutMarker]
	env.SetOnActivityHeartbeatListener(func(_ *sdkactivity.Info, d converter.EncodedValues) {
		if m, _, ok := activity.LastDetailMarker(d.Get); ok {
			marker.Store(&m)
		}
	})
	call := func(fare int) (Booking, error) {
		val, err := env.ExecuteActivity("BookKept", FareRequest{Flight: "BA117", Fare: fare, Seat: "12A"})
		if err != nil {
			return Booking{}, err
		}
		var b Booking
		return b, val.Get(&b)
	}
	_, err := call(120)
	require.NoError(t, err)
	m := marker.Load()
	require.NotNil(t, m, "the dispatcher heartbeats its marker as the claim begins")

	// The workflow's view of the call had Temporal ended its attempts: a
	// heartbeat timeout carrying the last heartbeat's details, as decoded
	// from the server's failure.
	fc := temporal.GetDefaultFailureConverter()
	timeout := fc.FailureToError(fc.ErrorToFailure(temporal.NewHeartbeatTimeoutError(*m)))
	o, ok := activity.AsIndeterminate(timeout)
	require.True(t, ok, "%v", timeout)
	require.Equal(t, activity.ReasonTimedOut, o.Reason)
	runID, _ := h.runIDs(t, env)
	want, err := kept.Check("acme", runID, []any{FareRequest{Flight: "BA117", Fare: 120, Seat: "12A"}})
	require.NoError(t, err)
	assert.Equal(t, string(want), o.Check, "the outcome carries the call's digest")
	assert.Equal(t, 10*time.Minute, o.Retention, "and its retention")

	// The record is gone (swept, forgotten) by the time a person decides.
	_, err = h.mem.Forget(context.Background(), store.ForgetParams{Tenant: "acme"})
	require.NoError(t, err)
	resolve := interceptor.ResolveActivityIn(h.mem, nil)
	require.NoError(t, resolve(context.Background(), decision.ResolveRequest{Tenant: o.Tenant, Key: o.Key,
		Action: decision.ActionComplete, Result: []byte(`{"flight":"BA117","call":1}`), By: "ops",
		Token: o.Token, Check: o.Check, Retention: o.Retention}))
	rec, err := h.lookup(t, "acme", o.Key)
	require.NoError(t, err)
	assert.Equal(t, string(want), rec.Check)
	assert.Equal(t, 10*time.Minute, rec.Retention)

	_, err = call(95)
	requireMismatch(t, err, o.Key, activity.FoundCompleted, "12A")
	b, err := call(120)
	require.NoError(t, err)
	assert.Equal(t, 1, b.Call, "the decided answer")
}
