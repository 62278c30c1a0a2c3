package interceptor

// One call through the dispatcher, from ExecuteActivity to its end state.
// run, below, takes it through four steps, each in the file named for it;
// every path a call can take is named by the states below.
//
//	prepare  activity_prepare.go  who the call is: its identity
//	acquire  activity_acquire.go  the claim, or the record that answers
//	execute  activity_execute.go  what the claim calls for: the body, a
//	                              transaction, or the probe
//	settle   activity_settle.go   what that decided, written under the claim
//
// and every end reports from activity_end.go.
//
//  1. prepare: the tenant, the run the key is scoped by, the key and the
//     digest of the checked arguments (one derivation of the declaration,
//     activity.Declaration.Identity) and this attempt's holder name: the
//     call's identity. A call that has none usable ends here, before any
//     claim: misconfigured (no tenant, an invalid tenant, a key secret
//     this worker lacks) or not deduplicable (no key: IDEMPOTENT gets a
//     retryable error, EFFECTFUL the indeterminate one).
//
//  2. acquire: the claim loop, a state machine over [callState]. Each
//     state makes one store call (storeDown: one pause), and judge, a pure
//     function, turns what came of it into the next state:
//
//     claiming    claim the key (stateClaiming is where every call starts)
//     takingOver  claim the key of a holder whose lease ran out, fenced by
//     its token
//     waiting     wait for a live holder's answer
//     storeDown   the store did not answer: pause, then make the same
//     claim again (Options.ClaimRetry), or end not run
//     acquired    end: the claim is this execution's
//     answered    end: the record answered the call — completed
//     (deduplicated, or refused as a mismatch) or indeterminate
//     notRun      end: the store could not say whether the key is free;
//     nothing ran
//
//     The legal moves are written once, in moves; move makes every one and
//     panics, with the trail of states, on any other. A call that ends
//     without the claim ends there (unclaimed).
//
//  3. execute: with the claim held — a takeover of a gone EFFECTFUL
//     holder goes to the probe or is marked indeterminate (holderLost);
//     a transactional body runs in the store's transaction and commits
//     its outcome with it (runTransactional); any other body runs under
//     its lease (runBody), and what it returned becomes a [settlement]
//     (judgeBody).
//
//  4. settle: one type (settler) writes what the body, or the probe asked
//     about an unknown outcome (unknownOutcome), decided: record the
//     result or a definite failure, free the key, mark it indeterminate,
//     or nothing (the claim was taken over). A write the store does not
//     take is retried in the background (settler.later).
//
// Every end state reports its event with [Event.Final] set, and counts its
// metric with it (reporter.end): deduplicated, completed, released,
// indeterminate, superseded, arguments mismatch, misconfigured, orphaned,
// or the store error of a call that did not run. The caller's own
// cancellation ends a call without an event: the SDK reports it.

import (
	"context"
	"sync/atomic"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/keyspace"
)

// ExecuteActivity is the dispatcher: it claims the key, deduplicates, waits
// and records around the activity's body.
func (a *activityInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := sdkactivity.GetInfo(ctx)
	decl, ok := a.root.Declaration(info.ActivityType.Name)
	if !ok || !decl.Kind().Deduplicated() {
		// No policy, or READ_ONLY: nothing is claimed or recorded and the
		// retry policy is unchanged.
		return a.Next.ExecuteActivity(ctx, in)
	}
	x := &execution{
		root:  a.root,
		opts:  &a.root.opts,
		next:  a.Next,
		decl:  decl,
		kind:  decl.Kind(),
		info:  info,
		rep:   reporter{opts: &a.root.opts, event: baseEvent(decl, info)},
		codec: codec{dc: a.root.opts.dataConverter(ctx), activity: decl.Name()},
		out:   a.out,
	}
	x.rep.metrics = sdkactivity.GetMetricsHandler(ctx).WithTags(map[string]string{
		"activity_type":    decl.Name(),
		"idempotency_kind": decl.Kind().String(),
	})
	return x.run(ctx, in)
}

// run takes one call through its four steps; see the top of this file.
func (x *execution) run(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	id, err := x.prepare(ctx, in.Args)
	if err != nil {
		return nil, err
	}
	x.identity = id
	// From here a timeout of this call carries its key (EFFECTFUL).
	x.mark(ctx, activity.StageClaiming, true)
	a := x.acquire(ctx)
	if a.state != stateAcquired {
		return x.unclaimed(ctx, a)
	}
	return x.execute(ctx, in, a.lost)
}

// execution is one activity execution going through the dispatcher.
type execution struct {
	root  *Interceptor
	opts  *Options
	next  interceptor.ActivityInboundInterceptor
	decl  *activity.Declaration
	kind  activity.Kind
	info  sdkactivity.Info
	rep   reporter // its events and metrics
	codec codec    // records outcomes and reads them back
	// out appends the timeout marker to the execution's heartbeats.
	out *activityOutbound
	// nexus is set on the execution of a Nexus operation's handler
	// (NexusOperation), which is no activity.
	nexus *nexusCall

	identity       // what prepare derived: who the call is, in the store
	token    int64 // the claim's token, once acquired
	// leaseFrom is when the last claim or renewal the store acknowledged
	// was sent: the lease holds at least until leaseFrom + Lease. Written
	// by the renewer while it runs, read once it has stopped.
	leaseFrom atomic.Int64 // UnixNano
}

// identity is who a call is in the store, as prepare derives it once.
type identity struct {
	tenant string
	key    string
	check  keyspace.Check // the digest of the checked arguments; "" for none
	holder string         // this attempt's name, without transactionalHolder
}

type activityInbound struct {
	interceptor.ActivityInboundInterceptorBase
	root *Interceptor
	out  *activityOutbound // set by Init
}

var _ interceptor.ActivityInboundInterceptor = (*activityInbound)(nil)

func baseEvent(decl *activity.Declaration, info sdkactivity.Info) Event {
	return Event{
		Activity:     decl.Name(),
		ActivityKind: decl.Kind(),
		WorkflowID:   info.WorkflowExecution.ID,
		RunID:        info.WorkflowExecution.RunID,
		ActivityID:   info.ActivityID,
		Attempt:      info.Attempt,
	}
}

// heartbeat tells Temporal the activity is alive; a Nexus handler, which
// is no activity, has nobody to tell.
func (x *execution) heartbeat(ctx context.Context) {
	if x.nexus == nil && sdkactivity.IsActivity(ctx) {
		sdkactivity.RecordHeartbeat(ctx)
	}
}
