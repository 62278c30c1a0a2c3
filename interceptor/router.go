package interceptor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/store"
)

// The names by which a person reaches a workflow waiting on a decision (see
// Options.AwaitDecision), and the activity that applies it.
const (
	// PendingQuery answers with the workflow's []PendingDecision.
	PendingQuery = "idempotency.pending"
	// DecisionSignal carries a [Decision].
	DecisionSignal = "idempotency.decision"
	// ResolveActivityName is the activity that records a decision in the
	// store; worker.New registers [ResolveActivity] under it.
	ResolveActivityName = "idempotency.Resolve"
)

// Action is what a person decided about an effect whose outcome was unknown.
type Action string

// The actions a [Decision] can carry.
const (
	// ActionComplete: the effect happened and Decision.Result is what it
	// returned. The result is recorded against the key, so the waiting
	// call and every later duplicate receive it.
	ActionComplete Action = "complete"
	// ActionFree: the effect did not happen. The key is freed and the
	// activity runs again.
	ActionFree Action = "free"
	// ActionRetry: the record was already settled elsewhere (for instance
	// with idempotencyctl resolve); run the activity again, and it answers
	// from the record or runs afresh.
	ActionRetry Action = "retry"
	// ActionFail: give up; the call fails with the indeterminate error, as
	// it would have without AwaitDecision.
	ActionFail Action = "fail"
)

// Decision is the payload of [DecisionSignal].
type Decision struct {
	// Key is the indeterminate key the decision is about, as the pending
	// decision names it.
	Key string `json:"key"`
	// Action is what was decided.
	Action Action `json:"action"`
	// Result is the activity's result as JSON, with ActionComplete.
	Result json.RawMessage `json:"result,omitempty"`
}

// PendingDecision is one effect a workflow is waiting on a person for.
type PendingDecision struct {
	Outcome activity.IndeterminateOutcome `json:"outcome"`
	// Since is the workflow time at which the wait began.
	Since time.Time `json:"since"`
}

// ResolveRequest is the input of the [ResolveActivityName] activity.
type ResolveRequest struct {
	Tenant string          `json:"tenant"`
	Key    string          `json:"key"`
	Action Action          `json:"action"`
	Result json.RawMessage `json:"result,omitempty"`
}

// ResolveActivity returns the activity that records a person's decision in
// st, encoding a result with dc as the dispatcher encodes one (nil: as
// Options.DataConverter's nil does, the client's converter when the context
// carries it, else the default). A record that is no longer indeterminate (someone
// settled it already) or no longer exists is not an error: the workflow
// runs the activity again, which answers from whatever the record now says.
func ResolveActivity(st store.Store, dc converter.DataConverter) func(context.Context, ResolveRequest) error {
	return func(ctx context.Context, req ResolveRequest) error {
		p := store.ResolveParams{Tenant: req.Tenant, Key: req.Key}
		switch req.Action {
		case ActionComplete:
			outcome, err := EncodeOutcome((&Options{DataConverter: dc}).dataConverter(ctx), req.Result)
			if err != nil {
				return temporal.NewNonRetryableApplicationError(err.Error(), "IdempotencyBadDecision", err)
			}
			p.Decision, p.Outcome = store.DecisionComplete, outcome
		case ActionFree:
			p.Decision = store.DecisionFree
		default:
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("idempotency: action %q records nothing", req.Action), "IdempotencyBadDecision", nil)
		}
		err := st.Resolve(ctx, p)
		switch {
		case errors.Is(err, store.ErrNotIndeterminate) || errors.Is(err, store.ErrNotFound):
			return nil
		case errors.Is(err, store.ErrInvalid):
			// The store will refuse this decision every time.
			return temporal.NewNonRetryableApplicationError(err.Error(), "IdempotencyBadDecision", err)
		}
		return err
	}
}

// InterceptWorkflow implements interceptor.WorkerInterceptor: with
// Options.AwaitDecision, a workflow waits for a person when an EFFECTFUL
// activity declared here fails indeterminate.
func (i *Interceptor) InterceptWorkflow(
	_ workflow.Context,
	next interceptor.WorkflowInboundInterceptor,
) interceptor.WorkflowInboundInterceptor {
	if !i.opts.AwaitDecision {
		return next
	}
	w := &workflowInbound{root: i}
	w.Next = next
	return w
}

type workflowInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	root *Interceptor
}

func (w *workflowInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	o := &workflowOutbound{root: w.root, waiters: map[string][]workflow.Channel{}, pending: map[string]PendingDecision{}}
	o.Next = outbound
	return w.Next.Init(o)
}

// workflowOutbound routes indeterminate outcomes to a person. Workflow code
// runs one coroutine at a time, so its maps need no lock.
type workflowOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	root *Interceptor

	listening bool                          // the signal and query handlers are set
	waiters   map[string][]workflow.Channel // key → the calls waiting on it
	pending   map[string]PendingDecision    // key → what the person is asked
}

func (o *workflowOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	first := o.Next.ExecuteActivity(ctx, activityType, args...)
	d, ok := o.root.Declaration(activityType)
	if !ok || d.Kind() != activity.KindEffectful {
		return first
	}
	result, settable := workflow.NewFuture(ctx)
	o.Next.Go(ctx, "idempotency:"+activityType, func(ctx workflow.Context) {
		f := first
		for {
			// Wait without decoding anything: the caller's Get decodes
			// the result, once, into whatever type it asks for.
			err := f.Get(ctx, nil)
			out, indeterminate := activity.AsIndeterminate(err)
			if !indeterminate || out.Key == "" {
				// Settled, or nothing a person could decide: with no key
				// there is no record to settle, and a missing tenant or key
				// argument will not appear by waiting.
				// The caller gets the payloads as the activity sent them,
				// codecs still applied: decoding them here and handing
				// them on would make its Get decode them a second time.
				settable.Chain(f)
				return
			}
			decision, ok := o.await(ctx, out)
			if !ok || decision.Action == ActionFail {
				settable.Set(nil, err)
				return
			}
			if decision.Action == ActionComplete || decision.Action == ActionFree {
				rctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
					StartToCloseTimeout: time.Minute,
					RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: time.Minute},
				})
				req := ResolveRequest{Tenant: out.Tenant, Key: out.Key, Action: decision.Action, Result: decision.Result}
				if rerr := o.Next.ExecuteActivity(rctx, ResolveActivityName, req).Get(ctx, nil); rerr != nil {
					settable.Set(nil, fmt.Errorf("idempotency: applying the decision on key %s: %w", out.Key, rerr))
					return
				}
			}
			// The record now says what happened: run the activity again and
			// it answers from the record, or runs afresh on a freed key.
			f = o.Next.ExecuteActivity(ctx, activityType, args...)
		}
	})
	return result
}

// await publishes out as pending and blocks until a person's decision on its
// key arrives, or Options.DecisionTimeout passes (ok false).
func (o *workflowOutbound) await(ctx workflow.Context, out activity.IndeterminateOutcome) (Decision, bool) {
	o.listen(ctx)
	// Duplicates in one workflow may wait on the same key; one decision
	// settles them all, and the key stays pending until the last is done.
	ch := workflow.NewBufferedChannel(ctx, 1)
	o.waiters[out.Key] = append(o.waiters[out.Key], ch)
	if _, ok := o.pending[out.Key]; !ok {
		o.pending[out.Key] = PendingDecision{Outcome: out, Since: o.Next.Now(ctx)}
	}
	defer func() {
		o.waiters[out.Key] = slices.DeleteFunc(o.waiters[out.Key], func(c workflow.Channel) bool { return c == ch })
		if len(o.waiters[out.Key]) == 0 {
			delete(o.waiters, out.Key)
			delete(o.pending, out.Key)
		}
	}()
	o.Next.GetLogger(ctx).Warn("idempotency: waiting for a person's decision",
		"activity", out.Activity, "tenant", out.Tenant, "key", out.Key, "reason", string(out.Reason),
		"query", PendingQuery, "signal", DecisionSignal)

	var (
		d        Decision
		received bool
	)
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &d); received = true })
	if t := o.root.opts.DecisionTimeout; t > 0 {
		sel.AddFuture(o.Next.NewTimer(ctx, t), func(workflow.Future) {})
	}
	sel.Select(ctx)
	return d, received
}

// listen sets, once per workflow, the query that lists pending decisions and
// the coroutine that hands each signalled decision to the call waiting on
// its key.
func (o *workflowOutbound) listen(ctx workflow.Context) {
	if o.listening {
		return
	}
	o.listening = true
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	if err := o.Next.SetQueryHandler(ctx, PendingQuery, func() ([]PendingDecision, error) {
		keys := make([]string, 0, len(o.pending))
		for k := range o.pending {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := make([]PendingDecision, 0, len(keys))
		for _, k := range keys {
			out = append(out, o.pending[k])
		}
		return out, nil
	}); err != nil {
		o.Next.GetLogger(ctx).Error("idempotency: cannot set the pending-decision query", "error", err)
	}
	signals := o.Next.GetSignalChannel(ctx, DecisionSignal)
	o.Next.Go(ctx, "idempotency:decisions", func(ctx workflow.Context) {
		for {
			var d Decision
			signals.Receive(ctx, &d)
			d.Action = Action(strings.ToLower(string(d.Action)))
			chs := o.waiters[d.Key]
			switch {
			case len(chs) == 0:
				o.Next.GetLogger(ctx).Warn("idempotency: a decision for a key no call is waiting on was dropped", "key", d.Key)
			case !validAction(d.Action):
				o.Next.GetLogger(ctx).Warn("idempotency: a decision with an unknown action was dropped", "key", d.Key, "action", string(d.Action))
			default:
				for _, ch := range chs {
					ch.SendAsync(d)
				}
			}
		}
	})
}

func validAction(a Action) bool {
	switch a {
	case ActionComplete, ActionFree, ActionRetry, ActionFail:
		return true
	}
	return false
}
