package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// The operator's command, built once for the package.
var (
	ctlOnce sync.Once
	ctlPath string
	ctlErr  error
)

// ctlBinary builds cmd/idempotencyctl, as an operator installs it.
func ctlBinary(t *testing.T) string {
	t.Helper()
	ctlOnce.Do(func() {
		dir, err := os.MkdirTemp("", "idempotencyctl-*")
		if err != nil {
			ctlErr = err
			return
		}
		ctlPath = filepath.Join(dir, "idempotencyctl")
		// TestMain removes the directory once the package's tests have run.
		out, err := exec.Command("go", "build", "-o", ctlPath, "github.com/tesserix/idempotency/cmd/idempotencyctl").CombinedOutput()
		if err != nil {
			ctlErr = errors.New(string(out))
		}
	})
	require.NoError(t, ctlErr, "building idempotencyctl")
	return ctlPath
}

// removeCtlBinary deletes the command built for the package's tests;
// TestMain calls it once they have run.
func removeCtlBinary() {
	if ctlPath != "" {
		_ = os.RemoveAll(filepath.Dir(ctlPath))
	}
}

// ctlResult is what one run of the command produced.
type ctlResult struct {
	code           int
	stdout, stderr string
}

// ctl runs the built command with args and a clean environment plus env.
func ctl(t *testing.T, env []string, args ...string) ctlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ctlBinary(t), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	return ctlResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
}

// ctlStore is a PostgreSQL store the command reaches through its flags.
func ctlStore(t *testing.T) (store.Store, []string) {
	t.Helper()
	pool, schema := pgenv.Postgres(t)
	s, err := pgstore.New(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, s.EnsureSchema(context.Background()))
	t.Cleanup(s.Close)
	return s, []string{"-store", "postgres", "-postgres-url", pgenv.PostgresURL(), "-schema", schema}
}

// temporalEnv points the command at the test server the way an operator's
// shell does, through the temporal CLI's variables.
func temporalEnv() []string {
	return []string{"TEMPORAL_ADDRESS=" + server.GetFrontendHostPort(), "TEMPORAL_NAMESPACE=" + server.GetDefaultNamespace()}
}

// awaitOptsOff leave indeterminate calls to fail the workflow.
var awaitOptsOff = interceptor.Options{Lease: 2 * time.Second}

// BookThenLinger books once and, when the booking fails, keeps running
// without waiting on a decision, as a workflow without AwaitDecision that
// handles the error itself does.
func BookThenLinger(ctx workflow.Context, flight string) (string, error) {
	ctx = activityOptions(ctx, 10*time.Second, 100*time.Millisecond)
	var r string
	err := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "linger"}).Get(ctx, &r)
	if err != nil {
		_ = workflow.Sleep(ctx, time.Hour)
	}
	return r, err
}

// decide, run as an operator runs it, wakes the waiting workflow with the
// outcome the person established: the call returns it, the record holds it,
// the airline was called once and booked nothing more. A decision the
// workflow's validator rejects prints the reason, exits 1 and changes
// nothing; the next valid one still applies.
func TestCtlDecideWakesTheWaitingWorkflow(t *testing.T) {
	t.Parallel()
	st, global := ctlStore(t)
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
	run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	r := ctl(t, temporalEnv(), append(global, "show", "-tenant", o.Tenant, "-key", o.Key)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "workflow_id  "+run.GetID()+"\n")
	assert.Contains(t, r.stdout, "run_id       "+run.GetRunID()+"\n")
	assert.Contains(t, r.stdout, "activity     Book\n")

	decide := append(append([]string{}, global...), "decide", "-tenant", o.Tenant, "-key", o.Key, "-by", "ops@acme", "-reason", "the airline confirmed", "-reference", "TICKET-7")

	// resolve while the workflow waits: it points to decide, which checks
	// the result's shape (a wrong one failed the workflow at its
	// 'decide -retry'), and changes nothing.
	r = ctl(t, temporalEnv(), append(global, "resolve", "-tenant", o.Tenant, "-key", o.Key, "-outcome", `{"seat":1}`, "-by", "ops@acme")...)
	assert.Equal(t, 1, r.code, "stdout: %s", r.stdout)
	assert.Contains(t, r.stderr, "workflow "+run.GetID()+" waits on this key for a decision: send it there with 'idempotencyctl decide")
	rec, err := st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
	require.NoError(t, err)
	assert.Equal(t, store.StateIndeterminate, rec.State, "a refused resolve changes nothing")
	r = ctl(t, temporalEnv(), append(global, "resolve", "-tenant", o.Tenant, "-key", o.Key, "-outcome", `{"seat":1}`, "-by", "ops@acme", "-dry-run")...)
	assert.Equal(t, 1, r.code, "a dry run is refused too; stdout: %s", r.stdout)
	assert.Contains(t, r.stderr, "waits on this key for a decision: send it there with 'idempotencyctl decide")
	assert.NotContains(t, r.stdout, "dry run: would")

	r = ctl(t, temporalEnv(), append(decide, "-outcome", `{"seat":1}`)...)
	assert.Equal(t, 1, r.code, "stdout: %s", r.stdout)
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	assert.Contains(t, r.stderr, "rejected the decision: the result does not decode into string")
	assert.NotContains(t, r.stderr, "resolve", "the workflow waits: resolve is not the way")
	rec, err = st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
	require.NoError(t, err)
	assert.Equal(t, store.StateIndeterminate, rec.State, "a rejected decision changes nothing")

	r = ctl(t, temporalEnv(), append(decide, "-outcome", `"seat 9 on BA117, confirmed by phone"`)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Empty(t, r.stderr)
	assert.Contains(t, r.stdout, "record: tenant acme key "+o.Key+" is indeterminate")
	assert.Contains(t, r.stdout, "decided: workflow "+run.GetID()+" run "+run.GetRunID()+" answered: recorded;")

	var result string
	require.NoError(t, run.Get(ctx, &result))
	assert.Equal(t, "seat 9 on BA117, confirmed by phone", result)
	assert.Equal(t, 1, e.ledger.Calls("BA117"), "the airline was called once")
	assert.Equal(t, 0, e.ledger.Effects("BA117"), "and booked nothing after the decision")
	rec, err = st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)

	// The same decision again, the workflow ended: Temporal answers with
	// the first one's result, under the same Update ID, and nothing changes.
	r = ctl(t, temporalEnv(), append(decide, "-outcome", `"seat 9 on BA117, confirmed by phone"`)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "answered: recorded;")
	assert.Contains(t, r.stdout, "this decision was sent before: that is its answer, and nothing changed")
	assert.Equal(t, 0, e.ledger.Effects("BA117"))

	// Another decision: the record is completed and the workflow has
	// ended; there is nothing to resolve, and decide does not say there is.
	r = ctl(t, temporalEnv(), append(decide, "-free")...)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "the record is completed already")
	assert.NotContains(t, r.stderr, "idempotencyctl resolve")
}

// Where no workflow waits, decide says so, points to resolve and exits 1:
// the workflow ended (it did not use AwaitDecision, so the indeterminate
// error failed it), or it runs on without waiting on the key.
func TestCtlDecideWithNoWaitingWorkflow(t *testing.T) {
	t.Parallel()
	st, global := ctlStore(t)
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOptsOff, BookThenLinger)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("ended", func(t *testing.T) {
		err := e.execute("acme", OneBooking, nil, "BA117", 10*time.Second, 100*time.Millisecond)
		o := requireIndeterminate(t, err, activity.ReasonBodyFailed)
		r := ctl(t, temporalEnv(), append(global, "decide", "-tenant", o.Tenant, "-key", o.Key, "-free", "-yes", "-by", "ops@acme")...)
		assert.Equal(t, 1, r.code, "stdout: %s", r.stdout)
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
		assert.Contains(t, r.stderr, "has ended (failed): no workflow waits on the key; settle the record in the store with 'idempotencyctl resolve'")
		rec, err := st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
		require.NoError(t, err)
		assert.Equal(t, store.StateIndeterminate, rec.State)
	})

	t.Run("running without waiting", func(t *testing.T) {
		run, err := e.client.ExecuteWorkflow(interceptor.WithTenant(ctx, "acme"), client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: e.queue}, BookThenLinger, "LH400")
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.client.TerminateWorkflow(context.Background(), run.GetID(), run.GetRunID(), "test over") })
		var ev interceptor.Event
		require.Eventually(t, func() bool {
			var ok bool
			ev, ok = e.events.indeterminateOf(run.GetID())
			return ok
		}, 30*time.Second, 50*time.Millisecond)
		r := ctl(t, temporalEnv(), append(global, "decide", "-tenant", ev.Tenant, "-key", ev.Key, "-free", "-yes", "-by", "ops@acme")...)
		assert.Equal(t, 1, r.code, "stdout: %s", r.stdout)
		assert.Contains(t, r.stderr, "rejected the decision: no call is waiting on key")
		assert.Contains(t, r.stderr, "since nothing in it waits on the key, settle the record in the store with 'idempotencyctl resolve'")
	})
}

// indeterminateOf returns the key that workflow wfID's call left
// indeterminate, as the dispatcher reported it.
func (l *eventLog) indeterminateOf(wfID string) (interceptor.Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if e.Kind == interceptor.EventIndeterminate && e.WorkflowID == wfID && e.Key != "" {
			return e, true
		}
	}
	return interceptor.Event{}, false
}

// A workflow whose worker is down cannot answer: decide gives up after
// -timeout and names the task queue no worker polls, rather than hanging.
func TestCtlDecideWithTheWorkerDown(t *testing.T) {
	t.Parallel()
	st, global := ctlStore(t)
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
	run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	e.worker.Stop()

	args := append([]string{"-timeout", "3s"}, global...)
	r := ctl(t, temporalEnv(), append(args, "decide", "-tenant", o.Tenant, "-key", o.Key, "-free", "-yes", "-by", "ops@acme")...)
	assert.Equal(t, 1, r.code, "stdout: %s", r.stdout)
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	assert.Contains(t, r.stderr, "workflow "+run.GetID()+" run "+run.GetRunID()+" did not answer the decision in time: is a worker polling task queue "+e.queue+"?")
	rec, err := st.Lookup(context.Background(), store.LookupParams{Tenant: o.Tenant, Key: o.Key})
	require.NoError(t, err)
	assert.Equal(t, store.StateIndeterminate, rec.State)
	require.NoError(t, e.client.TerminateWorkflow(context.Background(), run.GetID(), run.GetRunID(), "test over"))
}

// The store-only path, then the workflow: resolve records the outcome,
// decide refuses to decide a completed record again and takes -retry, on
// which the waiting call answers from the record without a second effect.
func TestCtlResolveThenDecideRetry(t *testing.T) {
	t.Parallel()
	st, global := ctlStore(t)
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
	run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Temporal out of reach (no address for it): resolve cannot ask
	// whether the workflow waits, says so, and goes on.
	r := ctl(t, []string{"TEMPORAL_ADDRESS=127.0.0.1:1"}, append(global, "resolve", "-tenant", o.Tenant, "-key", o.Key, "-outcome", `"seat 7 on BA117"`, "-by", "ops@acme")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "note: could not ask Temporal whether workflow "+run.GetID()+" waits on the key")

	decide := append(append([]string{}, global...), "decide", "-tenant", o.Tenant, "-key", o.Key, "-by", "ops@acme")
	r = ctl(t, temporalEnv(), append(decide, "-outcome", `"seat 7 on BA117"`)...)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "the record is completed already, by something other than this decision; if its workflow still waits, send -retry")

	r = ctl(t, temporalEnv(), append(decide, "-retry")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "answered: retried; the activity runs again and answers from the record as it stands\n")
	var result string
	require.NoError(t, run.Get(ctx, &result))
	assert.Equal(t, "seat 7 on BA117", result)
	assert.Equal(t, 1, e.ledger.Calls("BA117"), "the retry answered from the record")
	assert.Equal(t, 0, e.ledger.Effects("BA117"))
}

// A record gone from the store (erased, expired) no longer names its
// workflow: -workflow-id and -run-id do, and a complete decision is
// recorded afresh by the workflow's Resolve activity.
func TestCtlDecideByWorkflowID(t *testing.T) {
	t.Parallel()
	st, global := ctlStore(t)
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
	run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := st.Forget(ctx, store.ForgetParams{Tenant: o.Tenant})
	require.NoError(t, err)

	decide := append(append([]string{}, global...), "decide", "-tenant", o.Tenant, "-key", o.Key, "-by", "ops@acme", "-outcome", `"seat 3 on BA117"`)
	r := ctl(t, temporalEnv(), decide...)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "no record: tenant acme has no live record under key "+o.Key)
	assert.Contains(t, r.stderr, "if a workflow still waits on the key, name it with -workflow-id")

	r = ctl(t, temporalEnv(), append(decide, "-workflow-id", run.GetID(), "-run-id", run.GetRunID())...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "record: tenant acme has no live record under key "+o.Key+" in PostgreSQL table ")
	assert.Contains(t, r.stdout, "answered: recorded;")
	var result string
	require.NoError(t, run.Get(ctx, &result))
	assert.Equal(t, "seat 3 on BA117", result)
	rec, err := st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State, "the decision was recorded afresh")
	assert.Equal(t, 0, e.ledger.Effects("BA117"))
}

// BookThenContinue books; while the first run's call waits for a decision,
// the signal "continue" makes it continue as new, and the next run books
// the same flight. With keys scoped by the workflow ID, that run's call
// finds the record the first run left indeterminate and waits on it.
func BookThenContinue(ctx workflow.Context, flight string, continued bool) (string, error) {
	ctx = activityOptions(ctx, 10*time.Second, 100*time.Millisecond)
	f := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "req-" + workflow.GetInfo(ctx).WorkflowExecution.RunID})
	if !continued {
		workflow.GetSignalChannel(ctx, "continue").Receive(ctx, nil)
		return "", workflow.NewContinueAsNewError(ctx, BookThenContinue, flight, true)
	}
	var r string
	err := f.Get(ctx, &r)
	return r, err
}

// The record names the run that made it; with keys scoped by the workflow
// ID, the run that waits on it may be a later one, after a continue-as-new.
// decide follows the chain to the run that waits now and decides it there.
func TestCtlDecideAfterContinueAsNew(t *testing.T) {
	t.Parallel()
	st, global := ctlStore(t)
	opts := interceptor.Options{Lease: 2 * time.Second, AwaitDecision: true, Scope: interceptor.ScopeWorkflow}
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, opts, BookThenContinue)
	first, o := startWaiting(t, e.client, e.queue, BookThenContinue, "BA117", false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, e.client.SignalWorkflow(ctx, first.GetID(), first.GetRunID(), "continue", nil))

	// The next run waits on the same key.
	var latest string
	require.Eventually(t, func() bool {
		desc, err := e.client.DescribeWorkflowExecution(ctx, first.GetID(), "")
		if err != nil || desc.GetWorkflowExecutionInfo().GetExecution().GetRunId() == first.GetRunID() {
			return false
		}
		latest = desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
		var pending []decision.PendingDecision
		v, err := e.client.QueryWorkflow(ctx, first.GetID(), latest, decision.QueryName)
		return err == nil && v.Get(&pending) == nil && len(pending) == 1 && pending[0].Outcome.Key == o.Key
	}, 30*time.Second, 50*time.Millisecond, "the continued run waits on the key")
	rec, err := st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
	require.NoError(t, err)
	require.Equal(t, first.GetRunID(), rec.Origin.RunID, "the record names the first run")

	r := ctl(t, temporalEnv(), append(global, "decide", "-tenant", o.Tenant, "-key", o.Key, "-outcome", `"seat 4 on BA117"`, "-by", "ops@acme")...)
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "decided: workflow "+first.GetID()+" run "+latest+" answered: recorded;")

	var result string
	require.NoError(t, e.client.GetWorkflow(ctx, first.GetID(), latest).Get(ctx, &result))
	assert.Equal(t, "seat 4 on BA117", result)
	assert.Equal(t, 1, e.ledger.Calls("BA117"), "the airline was called once, by the first run")
	assert.Equal(t, 0, e.ledger.Effects("BA117"))
}
