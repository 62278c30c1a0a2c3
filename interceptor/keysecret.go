package interceptor

import (
	"context"
	"errors"
	"fmt"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"strconv"

	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/internal/wire"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// secretsByGeneration indexes the configured secrets by generation,
// refusing a nil one and two of one generation.
func secretsByGeneration(current *keyspace.Secret, others []*keyspace.Secret) (map[int]*keyspace.Secret, error) {
	m := make(map[int]*keyspace.Secret, len(others)+1)
	if current != nil {
		m[current.Generation()] = current
	}
	for i, s := range others {
		field := "KeySecrets[" + strconv.Itoa(i) + "]"
		if s == nil {
			return nil, optionsError(field, "is nil")
		}
		if prev, ok := m[s.Generation()]; ok && prev != s {
			return nil, optionsError(field, fmt.Sprintf("generation %d is held by another secret already (KeySecret or an earlier KeySecrets entry); number every secret apart", s.Generation()))
		}
		m[s.Generation()] = s
	}
	return m, nil
}

// markKeySecret writes, into the header of a call the workflow schedules,
// the generation of the secret its key is derived under, asking the
// history once which one this workflow was keyed under.
func (o *workflowOutbound) markKeySecret(ctx workflow.Context) {
	if !o.secretKnown {
		o.secretKnown = true
		switch cur := o.root.opts.KeySecret; {
		case o.Next.IsReplaying(ctx):
			// The history says, whatever this worker's KeySecret: a
			// marker of any generation (a later one included, written
			// by a worker a rotation reached first), or none. Replay
			// writes no command, so the bound is only GetVersion's
			// check.
			if v := o.Next.GetVersion(ctx, wire.KeySecretChangeID, workflow.DefaultVersion, keyspace.MaxSecretGeneration); v >= 1 {
				o.secretGen = int(v)
			}
		case cur != nil:
			o.secretGen = int(o.Next.GetVersion(ctx, wire.KeySecretChangeID, workflow.DefaultVersion, workflow.Version(cur.Generation())))
		}
	}
	if o.secretGen < 1 {
		return
	}
	h := sdkinterceptor.WorkflowHeader(ctx)
	if h == nil {
		return
	}
	if p, err := converter.GetDefaultDataConverter().ToPayload(o.secretGen); err == nil {
		h[wire.KeySecretHeader] = p
	}
}

// keySecret returns the secret the [wire.KeySecretHeader] header of an
// activity's context asks its key to be derived under: nil when it has
// none. A generation this worker does not hold fails the call, retryably:
// a worker that holds it (or this one, once deployed with it) runs it.
func (x *execution) keySecret(ctx context.Context) (*keyspace.Secret, error) {
	if x.nexus != nil {
		// No history pins a Nexus request's generation, and its header
		// is the caller's: the worker's own secret (see NexusOperation).
		return x.opts.KeySecret, nil
	}
	p, ok := sdkinterceptor.Header(ctx)[wire.KeySecretHeader]
	if !ok {
		return nil, nil
	}
	var gen int
	if err := converter.GetDefaultDataConverter().FromPayload(p, &gen); err != nil || gen < 1 {
		return nil, x.notDeduplicable(ctx, activity.ReasonKeyNotDerivable, fmt.Errorf("idempotency: the %s header does not hold a secret's generation (%v)", wire.KeySecretHeader, err))
	}
	if s := x.root.secrets[gen]; s != nil {
		return s, nil
	}
	cause := fmt.Errorf("idempotency: the workflow's keys are derived under the secret of generation %d, which this worker does not hold: "+
		"give it in interceptor.Options.KeySecrets (or KeySecret) of every worker of the task queue", gen)
	x.rep.endEvent(ctx, EventMisconfigured, metricname.Misconfigured, cause)
	return nil, temporal.NewApplicationError(fmt.Sprintf("idempotency: activity %q was not run: %v", x.decl.Name(), cause),
		decision.ErrorTypeUnknownKeySecret)
}

// keyOfAnEarlierRun returns the key, and the check derived with it under
// the same secret, that a call finds the record of an earlier run under, when its key is
// scoped by another run than its own: a run made by a reset (scoped by the
// run it was reset from), any run under ScopeWorkflow (scoped by the
// workflow ID its earlier runs share), or a Nexus request (whose key no
// history pins to a generation, derived under whichever KeySecret the
// worker that takes it has). Each run records the generation in
// force when it first calls (wire.KeySecretChangeID) — a reset to before the
// first call drops the earlier run's marker, and a continue-as-new or a
// retry starts a history of its own — so after a switch or a rotation the
// two runs' keys would differ and the effect would run again. So when no
// record stands under key, the other derivations this worker holds are
// looked up, unkeyed and each other secret, and the first under which a
// record stands is the call's. A run scoped by itself pays nothing; the
// others, on a keyed worker, one lookup per derivation it holds while no
// record stands.
//
// Only [store.ErrNotFound] means no record stands: a lookup the store does
// not answer is retried as a claim is (Options.ClaimRetry), then ends the
// call not run (the error returned), never read as "not found" — the
// record it could not see may be the earlier run's effect.
func (x *execution) keyOfAnEarlierRun(ctx context.Context, tenant, run string, args []any, key keyspace.Key, check keyspace.Check, secret *keyspace.Secret) (keyspace.Key, keyspace.Check, error) {
	retry := x.storeRetry(ctx)
	for {
		k, c, err := x.findEarlierRun(ctx, tenant, run, args, key, check, secret)
		if err == nil {
			return k, c, nil
		}
		if !retry.again(ctx, err) {
			return "", "", err
		}
	}
}

// findEarlierRun is one pass of keyOfAnEarlierRun's lookups: the key and
// check of the derivation under which a record stands (key and check, the
// call's own under secret, when none does), or the first error that is
// not [store.ErrNotFound].
func (x *execution) findEarlierRun(ctx context.Context, tenant, run string, args []any, key keyspace.Key, check keyspace.Check, secret *keyspace.Secret) (keyspace.Key, keyspace.Check, error) {
	found := func(k keyspace.Key) (bool, error) {
		lctx, cancel := context.WithTimeout(ctx, x.opts.StoreTimeout)
		defer cancel()
		_, err := x.opts.Store.Lookup(lctx, store.LookupParams{Tenant: tenant, Key: string(k)})
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, store.ErrNotFound):
			return false, nil
		}
		return false, err
	}
	if ok, err := found(key); ok || err != nil {
		return key, check, err
	}
	others := []*keyspace.Secret{nil}
	for _, s := range x.root.secrets {
		if s != secret {
			others = append(others, s)
		}
	}
	if secret == nil {
		others = others[1:]
	}
	// Map order is no matter here: at most one derivation holds a record.
	for _, s := range others {
		k, c, err := x.decl.Identity(s, tenant, run, args)
		if err != nil {
			continue // this call's arguments have no key under s
		}
		if ok, err := found(k); ok || err != nil {
			return k, c, err
		}
	}
	return key, check, nil
}
