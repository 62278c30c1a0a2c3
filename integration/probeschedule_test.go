package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/store"
)

// probeEvents counts, in run's history, the activities scheduled under
// each of the probe's activity types and the timers the probe's schedule
// started.
func probeEvents(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun) (perAsk, onSchedule, timers, total int) {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		total++
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			switch ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() {
			case decision.ProbeActivityName:
				perAsk++
			case decision.ProbeOnScheduleActivityName:
				onSchedule++
			}
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			if strings.Contains(string(ev.GetUserMetadata().GetSummary().GetData()), "probe") {
				timers++
			}
		}
	}
	return perAsk, onSchedule, timers, total
}

// A waiting workflow whose probe cannot tell twice and then answers landed
// is settled by it with nobody asked, one booking. With
// Options.ProbeOnSchedule the whole schedule is one activity in the
// history; without it, each ask is a timer and an activity (the issue's
// 24 re-asks were 48 pairs of events).
func TestProbeOnScheduleInOneActivity(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off"}[on]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forEachStore(t, func(t *testing.T, st store.Store) {
				var mu sync.Mutex
				asked := 0
				a := &airline{lostAnswers: 1, probe: true}
				a.probeAnswer = func(_ context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
					mu.Lock()
					asked++
					n := asked
					mu.Unlock()
					if n <= 2 { // the dispatcher's ask and the wait's first
						return activity.AnswerCannotTell(), nil
					}
					return a.bookedAnswer(req.Key), nil
				}
				opts := awaitOpts
				opts.ProbeOnSchedule = on
				e := newAirlineEnvWith(t, st, activity.KindEffectful, a, opts, BookThenHold)
				run, o := startWaiting(t, e.client, e.queue, BookThenHold, "BA117")
				require.True(t, o.Probe)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var pending []decision.PendingDecision
				v, err := e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), decision.QueryName)
				require.NoError(t, err)
				require.NoError(t, v.Get(&pending))
				require.Len(t, pending, 1)
				require.NotNil(t, pending[0].Probe)
				assert.Equal(t, on, pending[0].Probe.OnSchedule)

				require.Eventually(t, func() bool {
					rec, err := st.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: o.Key})
					return err == nil && rec.State == store.StateCompleted
				}, 45*time.Second, 100*time.Millisecond, "the probe settles the key")
				require.NoError(t, e.client.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), "finish", nil))
				var seat string
				require.NoError(t, run.Get(ctx, &seat))
				assert.True(t, strings.HasPrefix(seat, "seat 1 on BA117"), seat)
				assert.Equal(t, 1, e.ledger.Effects("BA117"), "one booking")
				rec, err := st.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: o.Key})
				require.NoError(t, err)
				assert.Equal(t, decision.ProbeDecider, rec.Resolution.By, "settled by the probe's answer")

				perAsk, onSchedule, timers, total := probeEvents(ctx, t, e.client, run)
				t.Logf("probe: %d per-ask activities, %d on-schedule activities, %d timers; %d events in all", perAsk, onSchedule, timers, total)
				if on {
					assert.Equal(t, 1, onSchedule, "one activity asks on the whole schedule")
					assert.Zero(t, perAsk+timers, "no activity or timer per ask")
				} else {
					assert.Equal(t, 2, perAsk, "an activity per ask")
					assert.Equal(t, 2, timers, "a timer per ask")
					assert.Zero(t, onSchedule)
				}
			})
		})
	}
}
