package interceptor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/internal/wire"
)

// InterceptWorkflow implements interceptor.WorkerInterceptor. It registers
// the decision handlers ([decision.QueryName], [decision.UpdateName], [decision.SignalName])
// in every workflow and, in workflows routed under [wire.RouterChangeID], makes a
// call that fails indeterminate wait for a person (Options.AwaitDecision).
func (i *Interceptor) InterceptWorkflow(
	_ workflow.Context,
	next interceptor.WorkflowInboundInterceptor,
) interceptor.WorkflowInboundInterceptor {
	w := &workflowInbound{root: i}
	w.Next = next
	return w
}

type workflowInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	root *Interceptor
	out  *workflowOutbound
}

func (w *workflowInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	w.out = &workflowOutbound{root: w.root, waits: map[string]*wait{}, storeWaits: map[string]*storeWait{}}
	w.out.Next = outbound
	return w.Next.Init(w.out)
}

func (w *workflowInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	// Handlers set before the workflow's code runs: the pending query
	// answers (an empty list) from the first task, not "unknown query".
	// None of them writes a command, so they change no history.
	w.out.register(ctx)
	return w.Next.ExecuteWorkflow(w.root.workflowTenant(ctx, w.out), in)
}

// workflowOutbound routes indeterminate outcomes to a person. Workflow code
// runs one coroutine at a time, so its fields need no lock.
type workflowOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	root *Interceptor

	versionKnown bool
	routed       bool
	settleKnown  bool // wire.SettleChangeID asked
	settle       bool

	tenantSource  tenantSource // where the workflow's tenant came from
	tenantProblem string       // why it has none, when its memo gave none
	tenant        string       // the tenant, when it came from the memo or a default

	scopeKnown bool   // wire.RunScopeChangeID asked
	scopeRun   string // the run ID its calls' keys are scoped by; "" for the current one

	onScheduleKnown bool // wire.ProbeOnScheduleChangeID asked
	onSchedule      bool

	probeRerunKnown bool // wire.ProbeRerunChangeID asked
	probeRerun      bool

	secretKnown bool // wire.KeySecretChangeID asked
	secretGen   int  // the generation of the secret its keys are derived under; 0 for none

	waits      map[string]*wait           // key → the wait open on it
	storeWaits map[string]*storeWait      // calls waiting for the store, by key and count
	rejected   []decision.PendingDecision // the latest rejected signals, oldest first

	searchAttribute string   // set while waiting, as the history recorded it
	published       []string // the keys it was last set to
}

// wait is one indeterminate key that calls of the workflow wait on.
type wait struct {
	pending  decision.PendingDecision
	waiters  int
	decision *decision.Decision // accepted; being applied, or applied
	applied  bool
	err      error // the decision could not be applied

	// Set while the probe is asked again (wire.SettleChangeID).
	probe       *decision.ProbeSchedule
	cancelProbe workflow.CancelFunc
	// outcome and token, when set, are what a probe's decision records:
	// the result as the dispatcher encodes it, and the token of the record
	// the probe answered about.
	outcome []byte
	token   int64
}

// isRouted reports whether this workflow routes indeterminate outcomes to a
// person, asking the history once (see wire.RouterChangeID).
func (o *workflowOutbound) isRouted(ctx workflow.Context) bool {
	if !o.versionKnown {
		o.versionKnown = true
		// Off and not replaying: nothing to record, nothing to read. Off
		// and replaying: the history may say this run was routed.
		if o.root.opts.AwaitDecision || o.Next.IsReplaying(ctx) {
			o.routed = o.Next.GetVersion(ctx, wire.RouterChangeID, workflow.DefaultVersion, 1) >= 1
		}
	}
	return o.routed
}

func (o *workflowOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	o.markTenantProblem(ctx)
	o.markRunScope(ctx)
	o.markKeySecret(ctx)
	if activityType == decision.ResolveActivityName || activityType == decision.ProbeActivityName || activityType == decision.ProbeOnScheduleActivityName || !o.isRouted(ctx) {
		return o.Next.ExecuteActivity(ctx, activityType, args...)
	}
	return o.route(ctx, activityType, func(ctx workflow.Context) workflow.Future {
		return o.Next.ExecuteActivity(ctx, activityType, args...)
	})
}

func (o *workflowOutbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	o.markTenantProblem(ctx)
	o.markRunScope(ctx)
	o.markKeySecret(ctx)
	if !o.isRouted(ctx) {
		return o.Next.ExecuteLocalActivity(ctx, activityType, args...)
	}
	return o.route(ctx, activityType, func(ctx workflow.Context) workflow.Future {
		return o.Next.ExecuteLocalActivity(ctx, activityType, args...)
	})
}

// route runs the call and, when it fails with an indeterminate outcome that
// names a key, waits for a person's decision and runs it again. Routing is
// decided by the error alone, not by declarations, so a workflow worker
// that does not host the activities routes too.
func (o *workflowOutbound) route(ctx workflow.Context, activityType string, call func(workflow.Context) workflow.Future) workflow.Future {
	first := call(ctx)
	result, settable := workflow.NewFuture(ctx)
	o.Next.Go(ctx, "idempotency:"+activityType, func(ctx workflow.Context) {
		f := first
		storeWaits := 0
		probeSettled := false // the last wait was settled by the probe
		probeReruns := 0      // runs again the probe's answers made, in a row
		for {
			// Wait without decoding anything: the caller's Get decodes
			// the result, once, into whatever type it asks for.
			err := f.Get(ctx, nil)
			if n, ok := activity.AsNotRun(err); ok && n.Key != "" && storeWaits < storeWaitMax && o.settles(ctx) {
				// Nothing ran: wait for the store, then run the call
				// again; its claim decides. Nobody is asked.
				if werr := o.awaitStore(ctx, n, storeWaits); werr != nil {
					settable.Set(nil, werr)
					return
				}
				storeWaits++
				f = call(o.rerunContext(ctx, activity.IndeterminateOutcome{Tenant: n.Tenant, Key: n.Key}))
				continue
			}
			out, indeterminate := activity.AsIndeterminate(err)
			if indeterminate && out.Reason == activity.ReasonTimedOut && !o.settles(ctx) {
				// Recorded before wire.SettleChangeID: a timeout reached the
				// workflow code as it was.
				indeterminate = false
			}
			if indeterminate && probeSettled && o.settles(ctx) &&
				(probeReruns >= probeRerunMax || !o.waitsAfterProbeRerun(ctx)) {
				// The probe settled this call's key and the call, run
				// again, failed again. Recorded before wire.ProbeRerunChangeID
				// (or the probe made it run again probeRerunMax times):
				// it reaches the workflow with its error, as without
				// AwaitDecision, rather than going round again.
				indeterminate = false
			}
			if !indeterminate || out.Key == "" {
				// Settled, or nothing a person could decide: with no key
				// there is no record to settle, and a missing tenant or key
				// argument will not appear by waiting. The caller gets the
				// payloads as the activity sent them, codecs still applied:
				// decoding them here and handing them on would make its Get
				// decode them a second time.
				settable.Chain(f)
				return
			}
			// again: this wait is on the outcome of a run the probe's
			// answer made (wire.ProbeRerunChangeID).
			again := probeSettled
			d, werr := o.await(ctx, out)
			switch {
			case werr != nil:
				settable.Set(nil, werr)
				return
			case d == nil || d.Action == decision.ActionFail:
				settable.Set(nil, err)
				return
			case again && d.By == decision.ProbeDecider && d.Action == decision.ActionFree:
				// The call keeps failing and, the probe says, nothing
				// landed: the key is free. Running it once more would
				// go round without end on a downstream that fails every
				// call; the workflow decides, as when its retry policy
				// runs out on calls the probe found not landed.
				settable.Set(nil, keepsFailing(out, err))
				return
			}
			probeSettled = d.By == decision.ProbeDecider
			if probeSettled {
				probeReruns++
			} else {
				probeReruns = 0
			}
			// The record now says what happened: run the activity again and
			// it answers from the record, or runs afresh on a freed key.
			f = call(o.rerunContext(ctx, out))
		}
	})
	return result
}

// await publishes out as pending and blocks until a person's decision on its
// key has been applied (the decision returned), Options.DecisionTimeout
// passes before any decision (nil, nil), the workflow is cancelled, or the
// decision could not be applied (the error).
func (o *workflowOutbound) await(ctx workflow.Context, out activity.IndeterminateOutcome) (*decision.Decision, error) {
	w := o.waits[out.Key]
	if w == nil || w.decision != nil {
		// Duplicates in one workflow may wait on the same key; one decision
		// settles them all. A key decided already and failed again opens a
		// new wait.
		w = &wait{pending: decision.PendingDecision{Outcome: out, Since: o.Next.Now(ctx)}}
		o.waits[out.Key] = w
	}
	w.waiters++
	defer func() {
		w.waiters--
		if w.waiters == 0 && o.waits[out.Key] == w {
			delete(o.waits, out.Key)
			if w.cancelProbe != nil {
				w.cancelProbe()
			}
		}
		o.publish(ctx)
	}()
	o.Next.GetLogger(ctx).Warn("idempotency: waiting for a person's decision",
		"activity", out.Activity, "tenant", out.Tenant, "key", out.Key, "reason", string(out.Reason),
		"query", decision.QueryName, "update", decision.UpdateName)
	settle := o.settles(ctx)

	// The configuration in force when the wait began is recorded, so a
	// worker configured otherwise replays this wait as it happened.
	var raw json.RawMessage
	if err := o.Next.SideEffect(ctx, func(workflow.Context) any {
		cfg := waitConfig{Timeout: o.root.opts.DecisionTimeout, SearchAttribute: o.root.searchAttribute()}
		if settle && out.Probe {
			cfg.Probe = newProbeConfig(out)
		}
		return cfg
	}).Get(&raw); err != nil {
		return nil, err
	}
	cfg, err := decodeWaitConfig(raw)
	if err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if cfg.SearchAttribute != "" {
		o.searchAttribute = cfg.SearchAttribute
	}
	if settle && cfg.Probe != nil && w.probe == nil {
		o.startProbing(ctx, w, *cfg.Probe)
	}
	o.publish(ctx)
	decided := func() bool { return w.decision != nil }
	if settle {
		ok, err := o.awaitPerson(ctx, timeout, personSummary(out), decided)
		if err != nil {
			return nil, err
		}
		if !ok {
			o.Next.GetLogger(ctx).Warn("idempotency: no decision within the decision timeout", "key", out.Key, "timeout", timeout)
			return nil, nil
		}
	} else if timeout > 0 {
		ok, err := o.Next.AwaitWithTimeout(ctx, timeout, decided)
		if err != nil {
			return nil, err
		}
		if !ok {
			o.Next.GetLogger(ctx).Warn("idempotency: no decision within the decision timeout", "key", out.Key, "timeout", timeout)
			return nil, nil
		}
	} else if err := o.Next.Await(ctx, decided); err != nil {
		return nil, err
	}
	if err := o.Next.Await(ctx, func() bool { return w.applied }); err != nil {
		return nil, err
	}
	if w.err != nil {
		return nil, fmt.Errorf("idempotency: applying the decision on key %s: %w", out.Key, w.err)
	}
	return w.decision, nil
}

// showDetails sets the workflow's current details (shown by `temporal
// workflow metadata` and on the Web UI's workflow page, under "User
// Metadata"; `temporal workflow describe` does not show them) to a summary
// of its waits: the first line for the waits for a person, then a line for
// each probe schedule and each call waiting for the store, a blank line
// between two (the Web UI renders the details as Markdown, which runs
// lines with one newline between them together).
func (o *workflowOutbound) showDetails(ctx workflow.Context, open []string) {
	var first string
	switch len(open) {
	case 0:
	case 1:
		// What to do first, then the key on a line of its own, in a code
		// span the Web UI neither wraps mid-key nor cuts, then a decision
		// that pastes as it is: in a code span, whose quotes Markdown
		// leaves straight (outside one the Web UI renders them curly, and
		// the pasted JSON is refused).
		p := o.waits[open[0]].pending.Outcome
		first = fmt.Sprintf(
			"**A person decides** whether the effect of activity %s happened (%s). "+
				"Send the Update %s with the decision below, its action complete (the effect happened: result is what the activity returned), "+
				"free (it did not), retry or fail, and by naming you; the query %s has the details.\n\nKEY: `%s`\n\ntenant: %s\n\n"+
				"Update input: `%s`",
			p.Activity, p.Reason, decision.UpdateName, decision.QueryName, p.Key, p.Tenant, declaredResults{o.root}.template(p))
	default:
		first = fmt.Sprintf(
			"waiting for a person's decision on %d keys; query %s, decide with update %s",
			len(open), decision.QueryName, decision.UpdateName)
	}
	if more := o.settleDetails(open); more != "" {
		if first != "" {
			first += "\n\n"
		}
		first += more
	}
	workflow.SetCurrentDetails(ctx, first)
}

// waitConfig is the configuration a wait began under, recorded in the
// history.
type waitConfig struct {
	Timeout         time.Duration `json:"timeout"`
	SearchAttribute string        `json:"search_attribute,omitempty"`
	// Probe is the schedule of asking the probe again (wire.SettleChangeID).
	Probe *probeConfig `json:"probe,omitempty"`
}

// decodeWaitConfig reads a recorded waitConfig, or the bare timeout that
// the first histories of this router recorded.
//
// workflowcheck flags it for encoding/json's reflection; it decodes bytes
// read from the history, the same on every replay.
//
//workflowcheck:ignore
func decodeWaitConfig(raw json.RawMessage) (waitConfig, error) {
	var cfg waitConfig
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] != '{' {
		err := json.Unmarshal(raw, &cfg.Timeout)
		return cfg, err
	}
	err := json.Unmarshal(raw, &cfg)
	return cfg, err
}

// resolveOptions are the activity options of the Resolve activity in
// histories recorded before wire.SettleChangeID: a worker that died with a
// decision accepted left it unapplied for a minute.
var resolveOptions = workflow.ActivityOptions{
	StartToCloseTimeout: time.Minute,
	RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: time.Minute},
}

// settledResolveOptions size the Resolve activity like the store call it
// is (wire.SettleChangeID): a decision accepted as its worker dies is applied by
// the next attempt within seconds.
var settledResolveOptions = workflow.ActivityOptions{
	StartToCloseTimeout: resolveTimeout,
	RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second},
}
