package interceptor

// One call through the dispatcher, from ExecuteActivity to its end state.
// Every path a call can take starts here and is named by the states below.
//
//  1. prepare: the tenant, the run the key is scoped by, the key, the
//     digest of the checked arguments and this attempt's holder name. A
//     call that has none of them usable ends here, before any store call:
//     misconfigured (no tenant, an invalid tenant, a key secret this worker
//     lacks) or not deduplicable (no key: IDEMPOTENT gets a retryable
//     error, EFFECTFUL the indeterminate one).
//
//  2. acquire: the claim loop, a state machine over [callState]. Each
//     state makes one store call, and judge turns the store's answer into
//     the next state:
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
//     The legal moves are written once, in moves; move panics on any other.
//
//  3. execute: with the claim held — a takeover of a gone EFFECTFUL
//     holder goes to the probe or is marked indeterminate (holderLost);
//     a transactional body runs in the store's transaction and commits
//     its outcome with it (runTransactional); any other body runs under
//     its lease (runBody), and what it returned becomes a [settlement].
//
//  4. settle: one place (settle) writes what the body, or the probe asked
//     about an unknown outcome (unknownOutcome), decided: record the
//     result or a definite failure, free the key, mark it indeterminate,
//     or nothing (the claim was taken over). A write the store does not
//     take is retried in the background (settleLater).
//
// Every end state reports its event with [Event.Final] set, and counts its
// metric with it (end): deduplicated, completed, released, indeterminate,
// superseded, arguments mismatch, misconfigured, orphaned, or the store
// error of a call that did not run. The caller's own cancellation ends a
// call without an event: the SDK reports it.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/internal/backoff"
	"github.com/tesserix/idempotency/internal/wire"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

type activityInbound struct {
	interceptor.ActivityInboundInterceptorBase
	root *Interceptor
	out  *activityOutbound // set by Init
}

var _ interceptor.ActivityInboundInterceptor = (*activityInbound)(nil)

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
		event: baseEvent(decl, info),
		dc:    a.root.opts.dataConverter(ctx),
		out:   a.out,
	}
	x.metrics = sdkactivity.GetMetricsHandler(ctx).WithTags(map[string]string{
		"activity_type":    decl.Name(),
		"idempotency_kind": decl.Kind().String(),
	})
	return x.run(ctx, in)
}

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

// execution is one activity execution going through the dispatcher.
type execution struct {
	root    *Interceptor
	opts    *Options
	next    interceptor.ActivityInboundInterceptor
	decl    *activity.Declaration
	kind    activity.Kind
	info    sdkactivity.Info
	metrics client.MetricsHandler
	event   Event // the fields every event of this execution shares
	// dc records outcomes; see Options.dataConverter. What goes back to
	// the SDK is never encoded with it: the SDK encodes results itself.
	dc converter.DataConverter
	// out appends the timeout marker to the execution's heartbeats.
	out *activityOutbound
	// nexus is set on the execution of a Nexus operation's handler
	// (NexusOperation), which is no activity.
	nexus *nexusCall

	tenant string
	key    string
	check  keyspace.Check // the digest of the checked arguments; "" for none
	holder string         // this attempt's name, without transactionalHolder
	token  int64
	// leaseFrom is when the last claim or renewal the store acknowledged
	// was sent: the lease holds at least until leaseFrom + Lease. Written
	// by the renewer while it runs, read once it has stopped.
	leaseFrom atomic.Int64 // UnixNano
}

// run takes one call through its four steps; see the top of this file.
func (x *execution) run(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if err := x.prepare(ctx, in.Args); err != nil {
		return nil, err
	}
	// From here a timeout of this call carries its key (EFFECTFUL).
	x.mark(ctx, activity.StageClaiming, true)
	a := x.acquire(ctx)
	if a.state != stateAcquired {
		return x.unclaimed(ctx, a)
	}
	return x.execute(ctx, in, a.lost)
}

// prepare resolves the tenant, the run, the key, the check and the holder,
// or returns the error the call ends with.
func (x *execution) prepare(ctx context.Context, args []any) error {
	tenant, err := x.resolveTenant(ctx)
	if err != nil {
		return err
	}
	x.tenant, x.event.Tenant = tenant, tenant
	run, resetRun, err := x.scopeRun(ctx)
	if err != nil {
		return err
	}
	// The secret the workflow's keys are derived under, if any: see
	// wire.KeySecretChangeID.
	secret, err := x.keySecret(ctx)
	if err != nil {
		return err
	}
	key, err := x.decl.KeyUnder(secret, tenant, run, args)
	if err != nil {
		return x.notDeduplicable(ctx, activity.ReasonKeyNotDerivable, err)
	}
	x.key, x.event.Key = string(key), string(key)
	if secret != nil {
		// The generation names these bytes in this tenant's store, or
		// the call claims nothing derived from them.
		if err := x.bindSecret(ctx, tenant, secret); err != nil {
			return err
		}
	}
	if (x.nexus != nil || (resetRun || x.opts.Scope == ScopeWorkflow) && !standalone(x.info)) && len(x.root.secrets) > 0 {
		k, s, err := x.keyOfAnEarlierRun(ctx, tenant, run, args, key, secret)
		if err != nil {
			// Nothing ran: the store could not say which derivation
			// holds the earlier run's record, if any does.
			return x.storeFailed(ctx, err)
		}
		key, secret = k, s
	}
	x.key, x.event.Key = string(key), string(key)
	if err := x.deriveCheck(secret, tenant, run, args); err != nil {
		return x.notDeduplicable(ctx, activity.ReasonKeyNotDerivable, err)
	}
	x.holder = holderName(x.info, x.opts.Identity)
	return nil
}

// resolveTenant returns the call's tenant, or the error that refuses it.
func (x *execution) resolveTenant(ctx context.Context) (string, error) {
	var (
		tenant string
		ok     bool
	)
	if x.nexus != nil {
		tenant, ok = x.nexusTenant(ctx)
	} else {
		tenant, ok = x.opts.Tenant(ctx, x.info)
	}
	if !ok && standalone(x.info) && x.opts.DefaultTenant != "" {
		// No workflow carries the default to a standalone activity: it
		// applies here.
		tenant, ok = x.opts.DefaultTenant, true
	}
	if !ok {
		return "", x.noTenant(ctx)
	}
	if err := store.ValidateTenant(tenant); err != nil {
		// No store would keep a record under this tenant: refuse it before
		// deriving a key, so nobody waits on a record that cannot exist.
		return "", x.invalidTenant(ctx, err)
	}
	x.noteIgnoredTenant(ctx, tenant)
	return tenant, nil
}

// scopeRun returns the run the call's key is scoped by, and whether it is
// the run a reset kept rather than the call's own.
func (x *execution) scopeRun(ctx context.Context) (run string, resetRun bool, err error) {
	run = x.info.WorkflowExecution.RunID
	switch {
	case x.nexus != nil:
		if x.nexus.perRequest && x.nexus.opts.RequestID == "" {
			return "", false, x.notDeduplicable(ctx, activity.ReasonKeyNotDerivable, errNexusNoRequestID)
		}
		run = x.nexusRun()
	case standalone(x.info):
		// Scoped by its activity ID, whatever the Scope: see wire.StandaloneRun.
		run = wire.StandaloneRun(x.info.Namespace, x.info.ActivityID)
	case x.opts.Scope == ScopeWorkflow:
		run = x.info.WorkflowExecution.ID
	default: // ScopeRun, ScopeFirstRun
		// The run a reset keeps, or the first run of the chain, when the
		// workflow says so: see wire.RunScopeChangeID and
		// wire.FirstRunScopeChangeID.
		scope, ok, err := headerRunScope(ctx)
		if err != nil {
			return "", false, x.notDeduplicable(ctx, activity.ReasonKeyNotDerivable, err)
		}
		if ok {
			run = scope
			resetRun = scope != x.info.WorkflowExecution.RunID
		}
	}
	if run == "" {
		return "", false, x.notDeduplicable(ctx, activity.ReasonKeyNotDerivable,
			errors.New("idempotency: the execution belongs to no workflow run"))
	}
	return run, resetRun, nil
}

// callState is where a call stands on its way to its claim: see the top of
// this file.
type callState uint8

const (
	stateClaiming callState = iota + 1
	stateTakingOver
	stateWaiting
	stateStoreDown
	stateAcquired
	stateAnswered
	stateNotRun
)

func (s callState) String() string {
	switch s {
	case stateClaiming:
		return "claiming"
	case stateTakingOver:
		return "takingOver"
	case stateWaiting:
		return "waiting"
	case stateStoreDown:
		return "storeDown"
	case stateAcquired:
		return "acquired"
	case stateAnswered:
		return "answered"
	case stateNotRun:
		return "notRun"
	}
	return fmt.Sprintf("callState(%d)", uint8(s))
}

// moves are the legal moves between states, and the only ones:
//
//	claiming, takingOver → acquired | answered | waiting | takingOver | claiming | storeDown | notRun
//	waiting              → answered | waiting | takingOver | claiming | storeDown | notRun
//	storeDown            → claiming | takingOver | notRun
//	acquired, answered, notRun: none (they end the acquisition)
//
// A wait never acquires: its answer is a record to judge, or a key to
// claim again. A store that did not answer sends the same claim again, or
// ends the call.
var moves = map[callState][]callState{
	stateClaiming:   {stateAcquired, stateAnswered, stateWaiting, stateTakingOver, stateClaiming, stateStoreDown, stateNotRun},
	stateTakingOver: {stateAcquired, stateAnswered, stateWaiting, stateTakingOver, stateClaiming, stateStoreDown, stateNotRun},
	stateWaiting:    {stateAnswered, stateWaiting, stateTakingOver, stateClaiming, stateStoreDown, stateNotRun},
	stateStoreDown:  {stateClaiming, stateTakingOver, stateNotRun},
}

// acquisition is what the claim loop knows between its states.
type acquisition struct {
	state  callState
	res    store.Result  // the store's last answer
	err    error         // the store's last failure
	lost   *store.Record // the record of the holder presumed gone, being taken over
	waited time.Duration // how long the call waited for other holders in all
	retry  *retrier
}

// move goes to next, panicking on a move the table does not allow: an
// illegal move is a bug in judge, never a condition to handle.
func (a *acquisition) move(next callState) {
	for _, s := range moves[a.state] {
		if s == next {
			a.state = next
			return
		}
	}
	panic(fmt.Sprintf("idempotency: illegal move of a call from %s to %s", a.state, next))
}

// acquire runs the claim loop until the claim is this execution's
// (stateAcquired, lost set on a takeover) or the call ends without it
// (stateAnswered, stateNotRun).
func (x *execution) acquire(ctx context.Context) *acquisition {
	a := &acquisition{state: stateClaiming, retry: x.storeRetry(ctx)}
	a.res, a.err = x.claim(ctx, nil)
	for {
		a.move(x.judge(ctx, a))
		switch a.state {
		case stateAcquired, stateAnswered, stateNotRun:
			return a
		case stateWaiting:
			var d time.Duration
			a.res, d, a.err = x.wait(ctx, a.res.Record.Token)
			a.waited += d
		case stateStoreDown:
			if !a.retry.again(ctx, a.err) {
				a.move(stateNotRun)
				return a
			}
			// The store could not answer and no body was entered: ask
			// again, as the same claim, once it may be back.
			if a.lost != nil {
				a.move(stateTakingOver)
			} else {
				a.move(stateClaiming)
			}
			a.res, a.err = x.claim(ctx, a.lost)
		default: // claiming, takingOver
			a.res, a.err = x.claim(ctx, a.lost)
		}
	}
}

// judge turns the store's last answer into the call's next state.
func (x *execution) judge(ctx context.Context, a *acquisition) callState {
	if a.err != nil {
		if ctx.Err() != nil || errors.Is(a.err, store.ErrInvalid) {
			return stateNotRun
		}
		return stateStoreDown
	}
	res := a.res
	if !(res.Status == store.StatusHeld && res.LeaseExpired) {
		// The store answered, and the outage, if any, is over. A holder
		// gone is not that answer: after a takeover the store took back
		// (too few replicas acknowledged it, or its answer was lost and
		// the store undid it), the next claim finds the undone takeover's
		// own record, and a window started afresh on it would take the key
		// over again and again until the activity's deadline.
		a.retry.answered()
	}
	switch {
	case res.Status == store.StatusAcquired && a.state != stateWaiting:
		x.token = res.Record.Token
		return stateAcquired
	case res.Status == store.StatusCompleted, res.Status == store.StatusIndeterminate:
		return stateAnswered
	case res.Status == store.StatusFree:
		a.lost = nil
		return stateClaiming
	case res.Status == store.StatusHeld:
		if !res.LeaseExpired {
			// A live holder, waited for — even an earlier attempt of this
			// very activity that Temporal gave up on: its body is still
			// running (it renews until the body returns) and may yet
			// record. Whatever was presumed lost before is not what holds
			// the key now.
			a.lost = nil
			return stateWaiting
		}
		if x.mismatched(res.Record) {
			// Taking it over would mark another call's effect indeterminate
			// (or probe it, or run the body) as this call's.
			return stateAnswered
		}
		// The holder is gone: its lease ran out. Take the key over, then
		// run the body (IDEMPOTENT) or find out the outcome (EFFECTFUL).
		rec := res.Record
		a.lost = &rec
		return stateTakingOver
	}
	// An unknown status, or a wait answered as a claim (the contract
	// gives StatusAcquired to Claim only).
	a.err = fmt.Errorf("idempotency: store answered with unknown status %d", res.Status)
	return stateNotRun
}

// unclaimed ends a call the acquisition ended without a claim.
func (x *execution) unclaimed(ctx context.Context, a *acquisition) (any, error) {
	if a.state == stateNotRun {
		return nil, x.storeFailed(ctx, a.err)
	}
	rec := a.res.Record
	if x.mismatched(rec) {
		waited := a.waited
		if a.res.Status == store.StatusHeld {
			waited = 0
		}
		return nil, x.argumentsMismatch(ctx, rec, found(waited, a.res.Status))
	}
	if a.res.Status == store.StatusCompleted {
		return x.deduplicated(ctx, rec, a.waited)
	}
	// Indeterminate: the outcome names the record standing, for a decision
	// fenced by its token; this execution holds no claim of its own.
	x.token = rec.Token
	return nil, x.indeterminate(ctx, activity.ReasonRecorded, false, errors.New(rec.Reason))
}

// execute runs what the claim just taken calls for.
func (x *execution) execute(ctx context.Context, in *interceptor.ExecuteActivityInput, lost *store.Record) (any, error) {
	if lost != nil {
		// Whether anything outside a transaction may have touched the key
		// is a fact of the record this claim now holds, kept by the holder
		// it was claimed under (see transactionalHolder). A gone holder of
		// a clean record left nothing behind: its transaction rolled back,
		// or committed the record with it. Any other may have left an
		// unknown effect.
		clean := isTransactionalHolder(x.claimHolder(lost))
		if x.kind == activity.KindEffectful && !(x.decl.IsTransactional() && clean) {
			return x.holderLost(ctx, lost)
		}
		x.observe(ctx, EventTakenOver, nil)
		x.count(metricname.Takeovers)
	}
	if x.decl.IsTransactional() {
		return x.runTransactional(ctx, in)
	}
	return x.runBody(ctx, in)
}

// heartbeat tells Temporal the activity is alive; a Nexus handler, which
// is no activity, has nobody to tell.
func (x *execution) heartbeat(ctx context.Context) {
	if x.nexus == nil && sdkactivity.IsActivity(ctx) {
		sdkactivity.RecordHeartbeat(ctx)
	}
}

// deadlineMargin is the time left before the activity's deadline at which
// the dispatcher stops retrying the store, so it can still report.
const deadlineMargin = time.Second

// retrier paces the retries of store calls made before the body runs. Each
// outage gets Options.ClaimRetry from its first failed call — not from the
// start of the execution, which may have waited long for another holder
// before the store stopped answering — and never runs past the activity's
// deadline.
type retrier struct {
	x        *execution
	deadline time.Time // the activity's deadline less deadlineMargin; zero if none
	until    time.Time // end of the current outage's window; zero while the store answers
	pause    backoff.Backoff
}

func (x *execution) storeRetry(ctx context.Context) *retrier {
	r := &retrier{x: x, pause: backoff.New(x.opts.RecordBackoff, backoff.MaxStorePause)}
	if dl, ok := ctx.Deadline(); ok {
		r.deadline = dl.Add(-deadlineMargin)
	}
	return r
}

// answered tells the retrier the store answered: the next failure starts a
// new outage.
func (r *retrier) answered() {
	r.until = time.Time{}
	r.pause.Reset()
}

// again reports err and, if it is worth retrying and time remains, pauses
// (heartbeating) and returns true; otherwise it returns false and leaves the
// error to the caller to report.
func (r *retrier) again(ctx context.Context, err error) bool {
	if r.x.opts.ClaimRetry < 0 || ctx.Err() != nil || errors.Is(err, store.ErrInvalid) {
		return false
	}
	if r.until.IsZero() {
		r.until = time.Now().Add(r.x.opts.ClaimRetry)
		if !r.deadline.IsZero() && r.deadline.Before(r.until) {
			r.until = r.deadline
		}
	}
	if !time.Now().Add(r.pause.Peek()).Before(r.until) {
		return false
	}
	r.x.storeError(ctx, err)
	r.x.heartbeat(ctx)
	return r.pause.Sleep(ctx)
}

// claim claims the key: a free key, or, with lost set, the key of the
// holder presumed gone that lost is the record of, fenced by its token.
func (x *execution) claim(ctx context.Context, lost *store.Record) (store.Result, error) {
	var supersede int64
	if lost != nil {
		supersede = lost.Token
	}
	start := time.Now()
	res, err := x.opts.Store.Claim(ctx, store.ClaimParams{
		Tenant:    x.tenant,
		Key:       x.key,
		Holder:    x.claimHolder(lost),
		Lease:     x.opts.Lease,
		Supersede: supersede,
		Check:     string(x.check),
		Retention: x.decl.Retention(),
		Origin: store.Origin{
			WorkflowID:   x.info.WorkflowExecution.ID,
			RunID:        x.info.WorkflowExecution.RunID,
			ActivityType: x.info.ActivityType.Name,
			ActivityID:   x.info.ActivityID,
			Attempt:      x.info.Attempt,
		},
	})
	x.metrics.Timer(metricname.ClaimLatency).Record(time.Since(start))
	if err == nil && res.Status == store.StatusAcquired {
		x.leaseFrom.Store(start.UnixNano())
		x.count(metricname.Claims)
		x.event.Duration = time.Since(start)
		x.observe(ctx, EventClaimed, nil)
		x.event.Duration = 0
	}
	return res, err
}

// wait blocks until the pending claim under token is no longer pending, or
// its lease ran out, heartbeating as it goes so Temporal knows this
// execution is alive.
func (x *execution) wait(ctx context.Context, token int64) (store.Result, time.Duration, error) {
	x.observe(ctx, EventWaiting, nil)
	x.count(metricname.Waits)
	x.mark(ctx, activity.StageWaiting, true)
	start := time.Now()
	every := x.opts.WaitHeartbeat
	if hb := x.info.HeartbeatTimeout; hb > 0 && hb/2 < every {
		every = hb / 2
	}
	defer func() {
		d := time.Since(start)
		x.metrics.Timer(metricname.WaitLatency).Record(d)
		x.waited(ctx, d)
	}()
	for {
		wctx, cancel := context.WithTimeout(ctx, every)
		res, err := x.opts.Store.Wait(wctx, store.WaitParams{Tenant: x.tenant, Key: x.key, Token: token})
		cancel()
		switch {
		case err == nil:
			return res, time.Since(start), nil
		case ctx.Err() != nil:
			return store.Result{}, time.Since(start), ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			x.heartbeat(ctx)
		default:
			return store.Result{}, time.Since(start), err
		}
	}
}
