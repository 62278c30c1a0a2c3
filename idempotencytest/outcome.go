package idempotencytest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/wire"
	"github.com/tesserix/idempotency/store"
)

// ErrAnswerLost is the error a body scripted with
// Indeterminate(activity.ReasonBodyFailed) returns in place of its
// result: it ran, and its answer was lost.
var ErrAnswerLost = errors.New("idempotencytest: the body ran and its answer was lost")

// Holder is the holder of the records the kit writes for a scripted
// outcome (another caller's, as far as the interceptor can tell).
const Holder = "idempotencytest"

type outcomeKind uint8

const (
	kindDeduplicated outcomeKind = iota + 1
	kindIndeterminate
	kindMismatch
)

// Outcome is how a scripted execution ends; see [Env.OnNext]. Make one
// with [Deduplicated] or [Indeterminate].
type Outcome struct {
	kind   outcomeKind
	reason activity.Reason
	result any
	probe  *activity.ProbeAnswer
}

// Deduplicated answers the execution from a record another call made,
// holding result (nil for an activity that returns only an error): the
// body does not run, and the call returns result as a duplicate would.
func Deduplicated(result any) Outcome { return Outcome{kind: kindDeduplicated, result: result} }

// ArgumentsMismatch answers the execution with a record another call made
// with other values of the declaration's checked arguments
// (activity.Policy.CheckArguments): the call fails with the non-retryable
// activity.ErrorTypeArgumentsMismatch error, and the body does not run.
// [Env.OnNext] panics on a declaration that checks no arguments.
func ArgumentsMismatch() Outcome { return Outcome{kind: kindMismatch} }

// Indeterminate ends the execution with an outcome nobody can state, for
// reason:
//
//   - activity.ReasonRecorded: an earlier call left the key indeterminate;
//     the body does not run.
//   - activity.ReasonHolderLost: the key's holder stopped answering, its
//     lease run out; the interceptor takes the key over (an IDEMPOTENT
//     activity then runs its body).
//   - activity.ReasonBodyFailed: the body runs — its effect is applied
//     and listed by [Env.Effects] — and its answer is lost
//     ([ErrAnswerLost]); an IDEMPOTENT activity is released and retried.
//   - activity.ReasonStoreUnavailable: the store cannot be reached when
//     the key is claimed (once). Nothing ran, so this is not an
//     indeterminate outcome: the call fails with the retryable
//     activity.ErrorTypeStoreUnavailable error (activity.NotRun), whatever
//     its kind, and its retry policy runs it again.
//   - activity.ReasonKeyNotDerivable: the store refuses the key (once).
//
// What follows is the interceptor's doing, as on a worker: for an
// EFFECTFUL activity, the probe (see [Outcome.ProbeAnswers]) or the
// indeterminate error, and a person's decision with
// Options.AwaitDecision. It panics on another reason.
func Indeterminate(reason activity.Reason) Outcome {
	switch reason {
	case activity.ReasonRecorded, activity.ReasonHolderLost, activity.ReasonBodyFailed,
		activity.ReasonStoreUnavailable, activity.ReasonKeyNotDerivable:
	default:
		panic(fmt.Sprintf("idempotencytest: no indeterminate outcome for reason %q", reason))
	}
	return Outcome{kind: kindIndeterminate, reason: reason}
}

// losesAnswer reports whether o is a lost answer, which the body that runs
// takes (Env.next).
func (o Outcome) losesAnswer() bool {
	return o.kind == kindIndeterminate && o.reason == activity.ReasonBodyFailed
}

// ProbeAnswers returns o with the declaration's probe answering ans when
// the interceptor asks it (a body that failed, a holder lost), in place of
// the probe's own answer. The declaration must have a probe.
func (o Outcome) ProbeAnswers(ans activity.ProbeAnswer) Outcome {
	o.probe = &ans
	return o
}

// scriptKey carries the slot of an execution's scripted outcome in its
// context, from the outer interceptor to the body's and to the probe. The
// outer interceptor fills it before the claim; the inner one fills it with
// a lost answer as the body starts (see Env.next).
type scriptKey struct{}

type slot struct{ o *Outcome }

func scripted(ctx context.Context) *Outcome {
	if s, _ := ctx.Value(scriptKey{}).(*slot); s != nil {
		return s.o
	}
	return nil
}

// probe wraps a declaration's own probe: a scripted answer first.
func (e *Env) probe(own activity.Probe) activity.Probe {
	return func(ctx context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
		if o := scripted(ctx); o != nil && o.probe != nil {
			return *o.probe, nil
		}
		return own(ctx, req)
	}
}

// outer runs before the interceptor: it takes an execution's scripted
// outcome and prepares the store for it.
type outer struct {
	sdkinterceptor.WorkerInterceptorBase
	e *Env
}

func (o *outer) InterceptActivity(_ context.Context, next sdkinterceptor.ActivityInboundInterceptor) sdkinterceptor.ActivityInboundInterceptor {
	a := &outerActivity{e: o.e}
	a.Next = next
	return a
}

type outerActivity struct {
	sdkinterceptor.ActivityInboundInterceptorBase
	e *Env
}

func (a *outerActivity) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput) (any, error) {
	info := sdkactivity.GetInfo(ctx)
	d, ok := a.e.decls[info.ActivityType.Name]
	if !ok {
		return a.Next.ExecuteActivity(ctx, in)
	}
	s := &slot{}
	ctx = context.WithValue(ctx, scriptKey{}, s)
	o, ok := a.e.next(d.Name(), false)
	if !ok {
		return a.Next.ExecuteActivity(ctx, in)
	}
	if err := a.e.prepare(ctx, d, info, in.Args, o); err != nil {
		return nil, fmt.Errorf("idempotencytest: preparing the outcome scripted for %s: %w", d.Name(), err)
	}
	s.o = &o
	return a.Next.ExecuteActivity(ctx, in)
}

// prepare writes what the key's record must say, as another caller would
// have left it, for the execution to end with o.
func (e *Env) prepare(ctx context.Context, d *activity.Declaration, info sdkactivity.Info, args []any, o Outcome) error {
	if !d.Kind().Deduplicated() {
		return nil
	}
	run := info.WorkflowExecution.RunID
	if e.scope == interceptor.ScopeWorkflow {
		run = info.WorkflowExecution.ID
	} else if p, ok := sdkinterceptor.Header(ctx)[wire.RunScopeHeader]; ok {
		// The run a reset keeps, as the dispatcher scopes it.
		if err := converter.GetDefaultDataConverter().FromPayload(p, &run); err != nil {
			return err
		}
	}
	key, err := d.Key(e.tenant, run, args)
	if err != nil {
		return err
	}
	check, err := d.Check(e.tenant, run, args)
	if err != nil {
		return err
	}
	claim := func(lease time.Duration) (int64, error) {
		res, err := e.mem.Claim(ctx, store.ClaimParams{Tenant: e.tenant, Key: string(key), Holder: Holder,
			Lease: lease, Check: string(check), Retention: d.Retention(),
			Origin: store.Origin{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, ActivityType: d.Name()}})
		if err != nil {
			return 0, err
		}
		if res.Status != store.StatusAcquired {
			return 0, fmt.Errorf("the key is %s already: the outcome cannot be scripted", res.Status)
		}
		return res.Record.Token, nil
	}
	switch {
	case o.kind == kindMismatch:
		// The digest of the same checked names over other values: the
		// values part of the call's own, changed.
		other := []byte(check)
		for i := len(other) - 8; i < len(other); i++ {
			if other[i] == '0' {
				other[i] = '1'
			} else {
				other[i] = '0'
			}
		}
		res, err := e.mem.Claim(ctx, store.ClaimParams{Tenant: e.tenant, Key: string(key), Holder: Holder,
			Lease: time.Minute, Check: string(other), Retention: d.Retention(),
			Origin: store.Origin{WorkflowID: "idempotencytest-other-call", ActivityType: d.Name()}})
		if err != nil {
			return err
		}
		if res.Status != store.StatusAcquired {
			return fmt.Errorf("the key is %s already: the outcome cannot be scripted", res.Status)
		}
		return e.mem.Complete(ctx, store.CompleteParams{Tenant: e.tenant, Key: string(key), Token: res.Record.Token})
	case o.kind == kindDeduplicated:
		outcome, err := interceptor.EncodeOutcome(nil, o.result)
		if err != nil {
			return err
		}
		tok, err := claim(time.Minute)
		if err != nil {
			return err
		}
		return e.mem.Complete(ctx, store.CompleteParams{Tenant: e.tenant, Key: string(key), Token: tok, Outcome: outcome})
	case o.reason == activity.ReasonRecorded:
		tok, err := claim(time.Minute)
		if err != nil {
			return err
		}
		return e.mem.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: e.tenant, Key: string(key), Token: tok,
			Reason: "recorded by idempotencytest"})
	case o.reason == activity.ReasonHolderLost:
		// A lease that has run out by the time the interceptor claims.
		_, err := claim(time.Nanosecond)
		return err
	case o.reason == activity.ReasonStoreUnavailable:
		e.st.failNext(string(key), store.Unavailable("idempotencytest: claim", errors.New("the store is down (scripted)")))
	case o.reason == activity.ReasonKeyNotDerivable:
		e.st.failNext(string(key), &store.InvalidError{Field: "Key", Reason: "refused (scripted by idempotencytest)"})
	}
	return nil
}

// inner runs around the body, after the interceptor: it lists the effects
// applied, and loses the answer of a body scripted to.
type inner struct {
	sdkinterceptor.WorkerInterceptorBase
	e *Env
}

func (i *inner) InterceptActivity(_ context.Context, next sdkinterceptor.ActivityInboundInterceptor) sdkinterceptor.ActivityInboundInterceptor {
	a := &innerActivity{e: i.e}
	a.Next = next
	return a
}

type innerActivity struct {
	sdkinterceptor.ActivityInboundInterceptorBase
	e *Env
}

func (a *innerActivity) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput) (any, error) {
	info := sdkactivity.GetInfo(ctx)
	if _, ok := a.e.decls[info.ActivityType.Name]; !ok {
		return a.Next.ExecuteActivity(ctx, in)
	}
	if s, _ := ctx.Value(scriptKey{}).(*slot); s != nil && s.o == nil {
		// The body runs: a lost answer scripted next is this execution's.
		if o, ok := a.e.next(info.ActivityType.Name, true); ok {
			s.o = &o
		}
	}
	res, err := a.Next.ExecuteActivity(ctx, in)
	if o := scripted(ctx); o != nil && o.losesAnswer() && err == nil {
		res, err = nil, ErrAnswerLost
	}
	key, _ := activity.Key(ctx)
	a.e.mu.Lock()
	a.e.effects = append(a.e.effects, Effect{Activity: info.ActivityType.Name, Key: string(key), Attempt: info.Attempt, Err: err})
	a.e.mu.Unlock()
	return res, err
}

// faultStore is the memory store, failing the next claim of a key when a
// script says so.
type faultStore struct {
	*store.Memory
	mu   sync.Mutex
	fail map[string]error
}

func (f *faultStore) failNext(key string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[key] = err
}

// Claim implements store.Store.
func (f *faultStore) Claim(ctx context.Context, p store.ClaimParams) (store.Result, error) {
	f.mu.Lock()
	err, ok := f.fail[p.Key]
	delete(f.fail, p.Key)
	f.mu.Unlock()
	if ok {
		return store.Result{}, err
	}
	return f.Memory.Claim(ctx, p)
}
