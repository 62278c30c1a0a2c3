package interceptor

import (
	"context"
	"errors"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/internal/wire"
	"github.com/tesserix/idempotency/store"
)

// Step 1 of a call (see activity_call.go): prepare derives who the call
// is in the store, or ends it before any claim. The key secret it is
// derived under is keysecret.go's; the tenant's resolution, tenant.go's.

// prepare derives the call's identity: its tenant, the run its key is
// scoped by, its key and check (one derivation of the declaration) and
// this attempt's holder name; or it returns the error the call ends with.
// An end reported on the way names what is known of the identity by then.
func (x *execution) prepare(ctx context.Context, args []any) (identity, error) {
	var id identity
	known := func() { x.identity, x.rep.event.Tenant, x.rep.event.Key = id, id.tenant, id.key }
	tenant, err := x.resolveTenant(ctx)
	if err != nil {
		return id, err
	}
	id.tenant = tenant
	known()
	run, resetRun, err := x.scopeRun(ctx)
	if err != nil {
		return id, err
	}
	// The secret the workflow's keys are derived under, if any: see
	// wire.KeySecretChangeID.
	secret, err := x.keySecret(ctx)
	if err != nil {
		return id, err
	}
	key, check, err := x.decl.Identity(secret, tenant, run, args)
	if err != nil {
		return id, x.notDeduplicable(ctx, activity.ReasonKeyNotDerivable, err)
	}
	id.key = string(key)
	known()
	if secret != nil {
		// The generation names these bytes in this tenant's store, or
		// the call claims nothing derived from them.
		if err := x.bindSecret(ctx, tenant, secret); err != nil {
			return id, err
		}
	}
	if (x.nexus != nil || (resetRun || x.opts.Scope == ScopeWorkflow) && !standalone(x.info)) && len(x.root.secrets) > 0 {
		k, c, err := x.keyOfAnEarlierRun(ctx, tenant, run, args, key, check, secret)
		if err != nil {
			// Nothing ran: the store could not say which derivation
			// holds the earlier run's record, if any does.
			return id, x.storeFailed(ctx, err)
		}
		key, check = k, c
	}
	id.key, id.check = string(key), check
	id.holder = holderName(x.info, x.opts.Identity)
	known()
	return id, nil
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
		run = x.nexus.scope(x.info.Namespace)
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
