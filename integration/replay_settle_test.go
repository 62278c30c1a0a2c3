package integration

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// laterProbe answers cannot tell to the dispatcher's ask and, from the
// second ask on, what the airline booked: a downstream that catches up.
func laterProbe(a *airline) func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
	var mu sync.Mutex
	asked := 0
	return func(_ context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
		mu.Lock()
		asked++
		first := asked == 1
		mu.Unlock()
		if first {
			return activity.AnswerCannotTell(), nil
		}
		return a.bookedAnswer(req.Key), nil
	}
}

// TestRecordSettleHistories records the runs of SettleChangeID (record
// with gen4- or later): a call run again after the store came back, a
// probe's later answer settling a wait, a person deciding before the
// probe, a call Temporal timed out routed and not, a NotRun error reaching
// the workflow's code, a person's update on the visible wait, and (from
// gen6-) a call Temporal timed out settled by the probe asked at once, and
// (from gen9-, run alone with -run 'TestRecordSettleHistories/on-probe-schedule')
// the probe asked on its schedule in one activity (ProbeOnScheduleChangeID):
// settling the wait, and cancelled by a person's decision.
func TestRecordSettleHistories(t *testing.T) {
	prefix := recordPrefix(t)
	type scenario struct {
		name     string
		opts     interceptor.Options
		airline  func() *airline
		wrap     func(store.Store) store.Store
		workflow any
		args     []any
		decide   func(ctx context.Context, t *testing.T, e *env, run client.WorkflowRun, o activity.IndeterminateOutcome, st store.Store)
	}
	on := interceptor.Options{AwaitDecision: true}
	onSchedule := interceptor.Options{AwaitDecision: true, ProbeOnSchedule: true}
	blip := func(s store.Store) store.Store { return &blippingStore{Store: s, failures: 5, calls: map[string]int{}} }
	slow := func() *airline { return &airline{hold: 4 * time.Second} }
	for _, sc := range []scenario{
		{name: "on-store-wait", opts: interceptor.Options{AwaitDecision: true, ClaimRetry: -1}, wrap: blip},
		{name: "off-not-run", opts: interceptor.Options{ClaimRetry: -1}, wrap: blip,
			workflow: BookAttempts, args: []any{"BA117", 10 * time.Second, int32(2)}},
		{name: "on-probe-settles", opts: on, airline: func() *airline {
			a := &airline{lostAnswers: 1, probe: true}
			a.probeAnswer = laterProbe(a)
			return a
		}, decide: func(ctx context.Context, t *testing.T, e *env, run client.WorkflowRun, _ activity.IndeterminateOutcome, _ store.Store) {
		}},
		{name: "on-person-before-probe", opts: on, airline: func() *airline {
			a := &airline{lostAnswers: 1, probe: true}
			a.probeAnswer = func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
				return activity.AnswerCannotTell(), nil
			}
			return a
		}, decide: func(ctx context.Context, t *testing.T, e *env, run client.WorkflowRun, o activity.IndeterminateOutcome, _ store.Store) {
			_, err := decide(ctx, e.client, run, decision.Decision{Key: o.Key, Action: decision.ActionComplete,
				Result: json.RawMessage(`"seat 1 on BA117"`), By: "ops@acme"})
			require.NoError(t, err)
		}},
		{name: "on-probe-schedule-settles", opts: onSchedule, airline: func() *airline {
			a := &airline{lostAnswers: 1, probe: true}
			a.probeAnswer = laterProbe(a)
			return a
		}, decide: func(ctx context.Context, t *testing.T, e *env, run client.WorkflowRun, _ activity.IndeterminateOutcome, _ store.Store) {
		}},
		{name: "on-probe-schedule-person-first", opts: onSchedule, airline: func() *airline {
			a := &airline{lostAnswers: 1, probe: true}
			a.probeAnswer = func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
				return activity.AnswerCannotTell(), nil
			}
			return a
		}, decide: func(ctx context.Context, t *testing.T, e *env, run client.WorkflowRun, o activity.IndeterminateOutcome, _ store.Store) {
			_, err := decide(ctx, e.client, run, decision.Decision{Key: o.Key, Action: decision.ActionComplete,
				Result: json.RawMessage(`"seat 1 on BA117"`), By: "ops@acme"})
			require.NoError(t, err)
		}},
		{name: "on-update-complete", opts: on, airline: func() *airline { return &airline{failures: 1} },
			decide: func(ctx context.Context, t *testing.T, e *env, run client.WorkflowRun, o activity.IndeterminateOutcome, _ store.Store) {
				_, err := decide(ctx, e.client, run, decision.Decision{Key: o.Key, Action: decision.ActionComplete,
					Result: json.RawMessage(`"seat 9 on BA117"`), By: "ops@acme"})
				require.NoError(t, err)
			}},
		{name: "on-timed-out-probe", opts: on, airline: func() *airline { return &airline{hold: 4 * time.Second, probe: true} },
			workflow: BookAttempts, args: []any{"BA117", time.Second, int32(2)}},
		{name: "off-timed-out", airline: slow, workflow: BookAttempts, args: []any{"BA117", time.Second, int32(2)}},
		{name: "on-timed-out-retry", opts: on, airline: slow, workflow: BookAttempts, args: []any{"BA117", time.Second, int32(2)},
			decide: func(ctx context.Context, t *testing.T, e *env, run client.WorkflowRun, o activity.IndeterminateOutcome, st store.Store) {
				require.Eventually(t, func() bool {
					rec, err := st.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: o.Key})
					return err == nil && rec.State == store.StateCompleted
				}, 20*time.Second, 50*time.Millisecond)
				_, err := decide(ctx, e.client, run, decision.Decision{Key: o.Key, Action: decision.ActionRetry, By: "ops@acme"})
				require.NoError(t, err)
			}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			mem, err := store.NewMemory(store.MemoryOptions{})
			require.NoError(t, err)
			var st store.Store = mem
			if sc.wrap != nil {
				st = sc.wrap(st)
			}
			a := &airline{}
			if sc.airline != nil {
				a = sc.airline()
			}
			opts := sc.opts
			opts.Lease = 2 * time.Second
			e := newAirlineEnvWith(t, st, activity.KindEffectful, a, opts, BookAttempts)
			wf, args := sc.workflow, sc.args
			if wf == nil {
				wf, args = OneBooking, []any{"BA117", 10 * time.Second, 100 * time.Millisecond}
			}
			ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), 2*time.Minute)
			defer cancel()
			var run client.WorkflowRun
			if sc.decide != nil {
				var o activity.IndeterminateOutcome
				run, o = startWaiting(t, e.client, e.queue, wf, args...)
				sc.decide(ctx, t, e, run, o, st)
			} else {
				run = startWorkflow(t, e, wf, args...)
			}
			_ = run.Get(ctx, nil) // the history, not the result, is what is kept
			writeHistory(ctx, t, e.client, run, prefix+sc.name)
		})
	}
}
