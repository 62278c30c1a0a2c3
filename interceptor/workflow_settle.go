package interceptor

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/internal/wire"
)

// probeRerunMax bounds the runs in a row that the probe's answers make of
// one call under wire.ProbeRerunChangeID: past it, the call's failure reaches the
// workflow as it did before.
const probeRerunMax = 5

// waitsAfterProbeRerun reports whether a call the probe's answer ran again
// that fails indeterminate again waits once more (wire.ProbeRerunChangeID),
// asking the history once, where that first happens.
func (o *workflowOutbound) waitsAfterProbeRerun(ctx workflow.Context) bool {
	if !o.probeRerunKnown {
		o.probeRerunKnown = true
		// Off and not replaying: nothing to record. Replaying: the
		// history says, whatever the option.
		if o.root.opts.WaitAfterProbeRerun || o.Next.IsReplaying(ctx) {
			o.probeRerun = o.Next.GetVersion(ctx, wire.ProbeRerunChangeID, workflow.DefaultVersion, 1) >= 1
		}
	}
	return o.probeRerun
}

// keepsFailing is the error a call under wire.ProbeRerunChangeID reaches the
// workflow with when, run again on the probe's answer and failed again
// with err (indeterminate on out), the probe answers that nothing landed:
// the retryable [decision.ErrorTypeNotLanded], as the dispatcher's own
// when the probe found a body's effect not landed. Its message carries
// err's; err is not its cause, which would read as indeterminate still.
func keepsFailing(out activity.IndeterminateOutcome, err error) error {
	return temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("idempotency: activity %q keeps failing: run again on its probe's answer, it failed again (%s), "+
			"and its probe says the effect did not land; the key is free: %v", out.Activity, out.Reason, err),
		decision.ErrorTypeNotLanded, temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign})
}

// The schedules of the waits the library settles itself. The probe's is
// recorded with each wait (waitConfig), so changing it applies to new waits
// only.
const (
	storeWaitFirst = 2 * time.Second
	storeWaitCap   = time.Minute
	storeWaitMax   = 60
	probeFirst     = 5 * time.Second
	probeCap       = 5 * time.Minute
	probeMax       = 24
	// probeTimeout is the start-to-close of one ask of the probe.
	probeTimeout = 30 * time.Second
	// probeHeartbeat is the heartbeat timeout of an ask, and probeAttempts
	// how many times an ask Temporal timed out is scheduled: an ask whose
	// worker died is asked again on another within seconds, not after
	// probeTimeout.
	probeHeartbeat = 3 * time.Second
	probeAttempts  = 3
	// resolveTimeout is the start-to-close of the Resolve activity: one
	// store call (Options.StoreTimeout defaults to 10 s).
	resolveTimeout = 15 * time.Second
	// personTimer is the length of each timer a wait for a person with no
	// DecisionTimeout runs, one after the other, to show in the history.
	personTimer = 24 * time.Hour
)

// probeConfig is the probe schedule a wait began under, recorded with it.
// Heartbeat, Attempts and Now are zero in waits recorded before they were:
// those asks ran with no heartbeat timeout and one attempt, the first after
// a timer, and replay so.
type probeConfig struct {
	First     time.Duration `json:"first"`
	Cap       time.Duration `json:"cap"`
	Max       int           `json:"max"`
	Heartbeat time.Duration `json:"heartbeat,omitempty"`
	Attempts  int           `json:"attempts,omitempty"`
	// Now: the first ask is sent when the wait opens, with no timer
	// before it, because nobody asked the probe about this outcome
	// (askedBefore); the next comes First after it.
	Now bool `json:"now,omitempty"`
}

// newProbeConfig is the probe schedule of a wait that opens now on out.
func newProbeConfig(out activity.IndeterminateOutcome) *probeConfig {
	return &probeConfig{First: probeFirst, Cap: probeCap, Max: probeMax,
		Heartbeat: probeHeartbeat, Attempts: probeAttempts, Now: !askedBefore(out.Reason)}
}

// askedBefore reports whether the dispatcher asked the declared probe as
// the outcome of reason became indeterminate: it did for a body whose
// outcome it could not state (holder_lost, body_failed), and did not for a
// call Temporal timed out (timed_out) or an indeterminate record a later
// call found (recorded).
func askedBefore(reason activity.Reason) bool {
	return reason != activity.ReasonTimedOut && reason != activity.ReasonRecorded
}

// askOptions are the activity options of one ask of the probe on queue.
func (cfg probeConfig) askOptions(queue string, out activity.IndeterminateOutcome) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:           queue,
		StartToCloseTimeout: probeTimeout,
		HeartbeatTimeout:    cfg.Heartbeat,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: int32(max(cfg.Attempts, 1))},
		Summary:             fmt.Sprintf("idempotency: asking the probe of %s again (key %s)", out.Activity, out.Key),
	}
}

// storeWait is a call waiting for the store to answer.
type storeWait struct {
	n     activity.NotRun
	until time.Time
	count int
}

// settles reports whether this workflow settles by the rules of
// wire.SettleChangeID, asking the history once.
func (o *workflowOutbound) settles(ctx workflow.Context) bool {
	if !o.settleKnown {
		o.settleKnown = true
		o.settle = o.Next.GetVersion(ctx, wire.SettleChangeID, workflow.DefaultVersion, 1) >= 1
	}
	return o.settle
}

// awaitStore waits on a durable timer before a call that ran nothing,
// because the store did not answer, runs again: the count-th time, for
// storeWaitFirst doubled count times, at most storeWaitCap.
func (o *workflowOutbound) awaitStore(ctx workflow.Context, n activity.NotRun, count int) error {
	d := storeWaitFirst
	for i := 0; i < count && d < storeWaitCap; i++ {
		d *= 2
	}
	d = min(d, storeWaitCap)
	id := fmt.Sprintf("%s:%d", n.Key, count)
	o.storeWaits[id] = &storeWait{n: n, until: o.Next.Now(ctx).Add(d), count: count + 1}
	o.publish(ctx)
	defer func() {
		delete(o.storeWaits, id)
		o.publish(ctx)
	}()
	o.Next.GetLogger(ctx).Warn("idempotency: the store did not answer and the call ran nothing; running it again after a timer",
		"activity", n.Activity, "tenant", n.Tenant, "key", n.Key, "wait", d, "count", count+1, "cause", n.Cause)
	return o.Next.NewTimerWithOptions(ctx, d, workflow.TimerOptions{
		Summary: fmt.Sprintf("idempotency: store did not answer, %s ran nothing; runs again (key %s, wait %d of %d)",
			n.Activity, n.Key, count+1, storeWaitMax),
	}).Get(ctx, nil)
}

// awaitPerson blocks until decided, timeout (if positive) passes, or ctx is
// cancelled, on timers that carry summary, so the wait shows in the
// history and on the Web UI's History view.
func (o *workflowOutbound) awaitPerson(ctx workflow.Context, timeout time.Duration, summary string, decided func() bool) (bool, error) {
	if timeout > 0 {
		return o.Next.AwaitWithOptions(ctx, workflow.AwaitOptions{Timeout: timeout,
			TimerOptions: workflow.TimerOptions{Summary: summary}}, decided)
	}
	for {
		ok, err := o.Next.AwaitWithOptions(ctx, workflow.AwaitOptions{Timeout: personTimer,
			TimerOptions: workflow.TimerOptions{Summary: summary}}, decided)
		if ok || err != nil {
			return ok, err
		}
	}
}

// personSummary is the summary of the timer of a wait for a person.
func personSummary(out activity.IndeterminateOutcome) string {
	return fmt.Sprintf("idempotency: waiting for a person's decision on %s (key %s, %s); decide with update %s",
		out.Activity, out.Key, out.Reason, decision.UpdateName)
}

// startProbing asks the probe of w's activity again on the schedule cfg,
// in a goroutine of its own under ctx, until w is decided, the schedule
// runs out, or the wait ends (its cancel). Definite answers become
// decisions by decision.ProbeDecider, taken as a person's are: the first accepted
// wins.
func (o *workflowOutbound) startProbing(ctx workflow.Context, w *wait, cfg probeConfig) {
	if o.probesOnSchedule(ctx) {
		o.startProbingOnSchedule(ctx, w, cfg)
		return
	}
	w.probe = &decision.ProbeSchedule{Max: cfg.Max}
	w.pending.Probe = w.probe
	out := w.pending.Outcome
	ao := workflow.GetActivityOptions(ctx)
	// Stopping the schedule (a person's decision, the wait's end) cancels
	// the timer of the next ask only: an ask under way still answers, and
	// its answer is rejected with the reason.
	stopped := false
	var cancelTimer workflow.CancelFunc
	w.cancelProbe = func() {
		stopped = true
		if cancelTimer != nil {
			cancelTimer()
		}
	}
	o.Next.Go(ctx, "idempotency:probe", func(gctx workflow.Context) {
		defer func() {
			w.probe.Next = time.Time{}
			o.publish(gctx)
		}()
		actx := workflow.WithActivityOptions(o.libraryContext(gctx), cfg.askOptions(ao.TaskQueue, out))
		// The first ask waits First, unless cfg.Now sends it at once;
		// each later one waits twice the one before, at most Cap.
		delay, timed := cfg.First, !cfg.Now
		for !stopped && w.decision == nil && w.probe.Asked < cfg.Max {
			if timed {
				w.probe.Next = o.Next.Now(gctx).Add(delay)
				o.publish(gctx)
				tctx, cancel := workflow.WithCancel(gctx)
				cancelTimer = cancel
				err := o.Next.NewTimerWithOptions(tctx, delay, workflow.TimerOptions{
					Summary: fmt.Sprintf("idempotency: the probe of %s asks again (key %s, ask %d of %d)",
						out.Activity, out.Key, w.probe.Asked+1, cfg.Max),
				}).Get(gctx, nil)
				cancelTimer = nil
				cancel()
				if err != nil || stopped || w.decision != nil {
					return // cancelled: the wait ended or was decided
				}
				delay = min(2*delay, cfg.Cap)
			}
			timed = true
			w.probe.Asked++
			w.probe.Next = time.Time{}
			o.publish(gctx)
			var reply decision.ProbeReply
			err := o.Next.ExecuteActivity(actx, decision.ProbeActivityName, decision.ProbeRequest{
				Activity: out.Activity, Tenant: out.Tenant, Key: out.Key, Token: out.Token, Reason: out.Reason,
			}).Get(gctx, &reply)
			switch {
			case err != nil && (stopped || w.decision != nil):
				return
			case err != nil:
				w.probe.Last = "the probe activity failed: " + err.Error()
			default:
				o.takeProbeAnswer(gctx, w, reply)
			}
		}
	})
}

// probesOnSchedule reports whether this workflow asks probes on the
// schedule in one activity, asking the history once.
func (o *workflowOutbound) probesOnSchedule(ctx workflow.Context) bool {
	if !o.onScheduleKnown {
		o.onScheduleKnown = true
		// Off and not replaying: nothing to record. Replaying: the
		// history says, whatever the option.
		if o.root.opts.ProbeOnSchedule || o.Next.IsReplaying(ctx) {
			o.onSchedule = o.Next.GetVersion(ctx, wire.ProbeOnScheduleChangeID, workflow.DefaultVersion, 1) >= 1
		}
	}
	return o.onSchedule
}

// probeOnScheduleAttempts is how many attempts the one activity of a
// schedule has: each worker that dies under it hands the schedule, from
// where its heartbeats left it, to the next attempt.
const probeOnScheduleAttempts = 10

// scheduleTime is the longest the whole schedule of cfg can take: its
// pauses and Max asks of probeTimeout each.
func (cfg probeConfig) scheduleTime() time.Duration {
	total, delay := time.Duration(0), cfg.First
	for n := range max(cfg.Max, 1) {
		if n > 0 || !cfg.Now {
			total += delay
			delay = min(2*delay, cfg.Cap)
		}
		total += probeTimeout
	}
	return total
}

// startProbingOnSchedule asks the probe of w's activity on cfg's schedule
// in one activity, which returns the first definite answer (or the last
// after cfg.Max asks). A person's decision, or the wait's end, cancels it.
func (o *workflowOutbound) startProbingOnSchedule(ctx workflow.Context, w *wait, cfg probeConfig) {
	w.probe = &decision.ProbeSchedule{Max: cfg.Max, OnSchedule: true}
	w.pending.Probe = w.probe
	out := w.pending.Outcome
	ao := workflow.GetActivityOptions(ctx)
	stopped := false
	actx, cancel := workflow.WithCancel(o.libraryContext(ctx))
	w.cancelProbe = func() {
		stopped = true
		cancel()
	}
	actx = workflow.WithActivityOptions(actx, workflow.ActivityOptions{
		TaskQueue:           ao.TaskQueue,
		StartToCloseTimeout: cfg.scheduleTime(),
		HeartbeatTimeout:    max(cfg.Heartbeat, probeHeartbeat),
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: probeOnScheduleAttempts},
		Summary: fmt.Sprintf("idempotency: asking the probe of %s on its schedule, up to %d times (key %s)",
			out.Activity, cfg.Max, out.Key),
	})
	o.Next.Go(ctx, "idempotency:probe", func(gctx workflow.Context) {
		defer o.publish(gctx)
		var reply decision.ProbeReply
		err := o.Next.ExecuteActivity(actx, decision.ProbeOnScheduleActivityName, decision.ProbeOnScheduleRequest{
			Probe: decision.ProbeRequest{Activity: out.Activity, Tenant: out.Tenant, Key: out.Key, Token: out.Token, Reason: out.Reason},
			First: cfg.First, Cap: cfg.Cap, Max: cfg.Max, Now: cfg.Now,
		}).Get(gctx, &reply)
		switch {
		case err != nil && (stopped || w.decision != nil):
			return
		case err != nil:
			w.probe.Last = "the probe activity failed: " + err.Error()
			return
		}
		w.probe.Asked = reply.Asked
		o.takeProbeAnswer(gctx, w, reply)
	})
}

// takeProbeAnswer makes a definite answer of the probe the decision on w,
// unless another decision was accepted first, which rejects it with the
// reason.
func (o *workflowOutbound) takeProbeAnswer(ctx workflow.Context, w *wait, r decision.ProbeReply) {
	out := w.pending.Outcome
	d := decision.Decision{Key: out.Key, Tenant: out.Tenant, By: decision.ProbeDecider}
	switch {
	case r.Settled:
		d.Action, d.Reason = decision.ActionRetry, "the record is no longer the indeterminate one asked about: "+r.Detail
	case r.Landing == activity.Landed.String():
		d.Action, d.Result, d.Reason = decision.ActionComplete, r.Result, "the probe answered: landed"
	case r.Landing == activity.NotLanded.String():
		d.Action, d.Reason = decision.ActionFree, "the probe answered: not landed"
	default:
		w.probe.Last = activity.CannotTell.String()
		if r.Detail != "" {
			w.probe.Last += ": " + r.Detail
		}
		return
	}
	if problem := o.probeAnswerProblem(w, r); problem != "" {
		w.probe.Last = "answer not taken: " + problem
		return
	}
	if w.decision == nil && o.waits[out.Key] != w {
		// The wait ended undecided (its DecisionTimeout): nothing calls
		// for the answer.
		w.probe.Last = r.Landing + " (after the wait ended)"
		return
	}
	if w.decision != nil {
		by := ""
		if w.decision.By != "" {
			by = " by " + w.decision.By
		}
		o.reject(ctx, d, fmt.Sprintf("idempotency: key %s is already decided (%s%s); the probe's answer came later",
			out.Key, w.decision.Action, by))
		return
	}
	w.probe.Last = r.Landing
	if r.Settled {
		w.probe.Last = "settled elsewhere"
	}
	w.outcome, w.token = r.Outcome, r.Token
	o.accept(ctx, w, &d)
	o.Next.Go(ctx, "idempotency:decide", func(ctx workflow.Context) { _, _ = o.apply(ctx, w, d) })
}

// probeAnswerProblem is the hook for checks of a probe's answer before it
// becomes a decision (the Probe activity already checked a landed result
// against the declared return type): a non-empty reason leaves the wait to
// the next ask or a person. It reads only the history's values.
func (o *workflowOutbound) probeAnswerProblem(_ *wait, r decision.ProbeReply) string {
	if r.Landing == activity.Landed.String() && len(r.Outcome) == 0 && len(r.Result) == 0 {
		return "landed with neither a result nor an outcome"
	}
	return ""
}

// settleDetails describes, for the current details, the waits the library
// settles itself: calls waiting for the store, and probe schedules.
func (o *workflowOutbound) settleDetails(open []string) string {
	var lines []string
	for _, k := range open {
		w := o.waits[k]
		if w.probe == nil {
			continue
		}
		line := fmt.Sprintf("key %s: the probe was asked %d of %d times", k, w.probe.Asked, w.probe.Max)
		if w.probe.OnSchedule && w.probe.Asked == 0 {
			line = fmt.Sprintf("key %s: the probe is asked on its schedule, up to %d times, in one activity (%s; its heartbeat details say how far)",
				k, w.probe.Max, decision.ProbeOnScheduleActivityName)
		}
		if !w.probe.Next.IsZero() {
			line += ", next at " + w.probe.Next.UTC().Format(time.RFC3339)
		}
		if w.probe.Last != "" {
			line += ", last answer: " + w.probe.Last
		}
		lines = append(lines, line)
	}
	ids := make([]string, 0, len(o.storeWaits))
	// Map order differs between runs, and is sorted away below: workflowcheck
	// cannot see that.
	//workflowcheck:ignore
	for id := range o.storeWaits {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s := o.storeWaits[id]
		lines = append(lines, fmt.Sprintf(
			"waiting for the store: activity %s, tenant %s, key %s ran nothing (%s); runs again at %s (wait %d of %d)",
			s.n.Activity, s.n.Tenant, s.n.Key, s.n.Reason, s.until.UTC().Format(time.RFC3339), s.count, storeWaitMax))
	}
	return strings.Join(lines, "\n\n")
}
