package interceptor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/internal/backoff"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// Step 2 of a call (see activity_call.go): acquire, the claim loop. Each
// state makes one store call (or, in storeDown, one pause); judge turns
// what came of it into the next state, along the moves table. A call that
// ends without the claim ends here (unclaimed).

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
// ends the call. Every move, the ones out of storeDown included, is
// judge's verdict, made by move.
var moves = map[callState][]callState{
	stateClaiming:   {stateAcquired, stateAnswered, stateWaiting, stateTakingOver, stateClaiming, stateStoreDown, stateNotRun},
	stateTakingOver: {stateAcquired, stateAnswered, stateWaiting, stateTakingOver, stateClaiming, stateStoreDown, stateNotRun},
	stateWaiting:    {stateAnswered, stateWaiting, stateTakingOver, stateClaiming, stateStoreDown, stateNotRun},
	stateStoreDown:  {stateClaiming, stateTakingOver, stateNotRun},
}

// final reports whether s ends the acquisition.
func (s callState) final() bool {
	return s == stateAcquired || s == stateAnswered || s == stateNotRun
}

// trailLen is how many of its last states a call keeps, for the panic of
// an illegal move to say how it got there.
const trailLen = 8

// acquisition is what the claim loop knows between its states.
type acquisition struct {
	state  callState
	res    store.Result  // the store's last answer
	err    error         // the store's last failure
	lost   *store.Record // the record of the holder presumed gone, being taken over
	waited time.Duration // how long the call waited for other holders in all
	// resumed is the storeDown state's outcome: whether the retrier
	// paused and lets the same claim be made again.
	resumed bool
	retry   *retrier
	// trail holds the states the call went through, the last trailLen of
	// them (moved counts them all).
	trail [trailLen]callState
	moved int
}

// move goes to next, panicking on a move the table does not allow: an
// illegal move is a bug in judge, never a condition to handle. The panic
// names the states the call went through.
func (a *acquisition) move(next callState) {
	for _, s := range moves[a.state] {
		if s == next {
			a.trail[a.moved%trailLen] = a.state
			a.moved++
			a.state = next
			return
		}
	}
	panic(fmt.Sprintf("idempotency: illegal move of a call from %s to %s (trail: %s)", a.state, next, a.trailString()))
}

// trailString is the trail of states that led to the current one, oldest
// first: "claiming → waiting → storeDown".
func (a *acquisition) trailString() string {
	var b strings.Builder
	if a.moved > trailLen {
		b.WriteString("… → ")
	}
	for i := max(0, a.moved-trailLen); i < a.moved; i++ {
		b.WriteString(a.trail[i%trailLen].String())
		b.WriteString(" → ")
	}
	b.WriteString(a.state.String())
	return b.String()
}

// acquire runs the claim loop until the claim is this execution's
// (stateAcquired, lost set on a takeover) or the call ends without it
// (stateAnswered, stateNotRun). Each pass makes the one store call (or,
// in storeDown, the one pause) its state stands for, then applies judge's
// verdict on what came of it.
func (x *execution) acquire(ctx context.Context) *acquisition {
	a := &acquisition{state: stateClaiming, retry: x.storeRetry(ctx)}
	for {
		switch a.state {
		case stateClaiming, stateTakingOver:
			a.res, a.err = x.claim(ctx, a.lost)
		case stateWaiting:
			var d time.Duration
			a.res, d, a.err = x.wait(ctx, a.res.Record.Token)
			a.waited += d
		case stateStoreDown:
			// The store could not answer and no body was entered: once it
			// may be back, the same claim is made again.
			a.resumed = a.retry.again(ctx, a.err)
		}
		v := judge(a, ctx.Err(), x.check)
		if v.answered {
			a.retry.answered()
		}
		a.lost = v.lost
		if v.err != nil {
			a.err = v.err
		}
		if v.next == stateAcquired {
			x.token = a.res.Record.Token
		}
		a.move(v.next)
		if a.state.final() {
			return a
		}
	}
}

// verdict is judge's decision: the call's next state and what the claim
// loop keeps with it. judge writes nothing; acquire applies it.
type verdict struct {
	next callState
	// lost is the record of the holder presumed gone that the call takes
	// over from now on; nil when it takes over none.
	lost *store.Record
	// answered says the store answered: the outage, if any, is over, and
	// the next failure starts a new one.
	answered bool
	// err replaces the acquisition's error: why the call ends not run
	// when the store's answer is one nobody can act on.
	err error
}

// judge turns what the last step of the acquisition came to (the store's
// answer, or in storeDown whether it may be asked again) into the call's
// next state. ctxErr is the activity context's error; check the digest of
// the call's checked arguments. It is a pure function of them.
func judge(a *acquisition, ctxErr error, check keyspace.Check) verdict {
	if a.state == stateStoreDown {
		switch {
		case !a.resumed:
			return verdict{next: stateNotRun, lost: a.lost}
		case a.lost != nil:
			return verdict{next: stateTakingOver, lost: a.lost}
		}
		return verdict{next: stateClaiming}
	}
	if a.err != nil {
		if ctxErr != nil || errors.Is(a.err, store.ErrInvalid) {
			return verdict{next: stateNotRun, lost: a.lost}
		}
		return verdict{next: stateStoreDown, lost: a.lost}
	}
	res := a.res
	// The store answered, and the outage, if any, is over. A holder gone
	// is not that answer: after a takeover the store took back (too few
	// replicas acknowledged it, or its answer was lost and the store
	// undid it), the next claim finds the undone takeover's own record,
	// and a window started afresh on it would take the key over again and
	// again until the activity's deadline.
	answered := !(res.Status == store.StatusHeld && res.LeaseExpired)
	switch {
	case res.Status == store.StatusAcquired && a.state != stateWaiting:
		return verdict{next: stateAcquired, lost: a.lost, answered: answered}
	case res.Status == store.StatusCompleted, res.Status == store.StatusIndeterminate:
		return verdict{next: stateAnswered, lost: a.lost, answered: answered}
	case res.Status == store.StatusFree:
		return verdict{next: stateClaiming, answered: answered}
	case res.Status == store.StatusHeld:
		if !res.LeaseExpired {
			// A live holder, waited for — even an earlier attempt of this
			// very activity that Temporal gave up on: its body is still
			// running (it renews until the body returns) and may yet
			// record. Whatever was presumed lost before is not what holds
			// the key now.
			return verdict{next: stateWaiting, answered: answered}
		}
		if mismatched(check, res.Record) {
			// Taking it over would mark another call's effect indeterminate
			// (or probe it, or run the body) as this call's.
			return verdict{next: stateAnswered, lost: a.lost}
		}
		// The holder is gone: its lease ran out. Take the key over, then
		// run the body (IDEMPOTENT) or find out the outcome (EFFECTFUL).
		rec := res.Record
		return verdict{next: stateTakingOver, lost: &rec}
	}
	// An unknown status, or a wait answered as a claim (the contract
	// gives StatusAcquired to Claim only).
	return verdict{next: stateNotRun, lost: a.lost, answered: answered,
		err: fmt.Errorf("idempotency: store answered with unknown status %d", res.Status)}
}

// unclaimed ends a call the acquisition ended without a claim.
func (x *execution) unclaimed(ctx context.Context, a *acquisition) (any, error) {
	if a.state == stateNotRun {
		return nil, x.storeFailed(ctx, a.err)
	}
	rec := a.res.Record
	if mismatched(x.check, rec) {
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
	r.x.rep.storeError(ctx, err)
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
		Holder:    x.claimHolder(x.decl.IsTransactional(), lost),
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
	x.rep.metrics.Timer(metricname.ClaimLatency).Record(time.Since(start))
	if err == nil && res.Status == store.StatusAcquired {
		x.leaseFrom.Store(start.UnixNano())
		x.rep.count(metricname.Claims)
		x.rep.event.Duration = time.Since(start)
		x.rep.observe(ctx, EventClaimed, nil)
		x.rep.event.Duration = 0
	}
	return res, err
}

// wait blocks until the pending claim under token is no longer pending, or
// its lease ran out, heartbeating as it goes so Temporal knows this
// execution is alive.
func (x *execution) wait(ctx context.Context, token int64) (store.Result, time.Duration, error) {
	x.rep.observe(ctx, EventWaiting, nil)
	x.rep.count(metricname.Waits)
	x.mark(ctx, activity.StageWaiting, true)
	start := time.Now()
	every := x.opts.WaitHeartbeat
	if hb := x.info.HeartbeatTimeout; hb > 0 && hb/2 < every {
		every = hb / 2
	}
	defer func() {
		d := time.Since(start)
		x.rep.metrics.Timer(metricname.WaitLatency).Record(d)
		x.rep.waited(ctx, d)
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
