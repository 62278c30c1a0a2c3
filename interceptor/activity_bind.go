package interceptor

import (
	"context"
	"errors"
	"fmt"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/store"
)

// errForeignRecord is the cause of a refused request of the library's own
// activities.
var errForeignRecord = errors.New("idempotency: the request names a record the scheduling execution may not touch")

// bindRequest refuses a request of the library's own activities (Resolve,
// Probe) for tenant and key that the execution running it may not make:
//
//   - tenant is not the tenant the execution runs under, resolved as the
//     dispatcher resolves a declared call's (tenantOf: the header, the
//     namespace, or Options.Tenant) — a workflow of one tenant reaching
//     another's records;
//   - the record under the key names, as the workflow that made it,
//     another workflow than the one that scheduled the request — a
//     workflow freeing, completing or reading another's call;
//   - the record was made outside any workflow: its origin names an
//     execution (a Nexus request's ID, a standalone activity's ID) and no
//     workflow — a workflow of the tenant reaching a record no workflow
//     made. Nothing on a workflow's side waits on such a record; a
//     person settles it in the store (idempotencyctl resolve).
//
// Called as a plain function (no activity context), it binds nothing: its
// caller holds the store. The decision path schedules these activities only for keys its workflow
// itself waits on, which its own calls made, so it passes both checks; a
// key with no record stands (settled, swept, expired) is left to the
// request's own fencing. It returns nil, or the non-retryable
// [decision.ErrorTypeForeignRecord] error, reported to observe.
func bindRequest(ctx context.Context, st store.Store, tenantOf TenantFunc, observe func(Event), activityName, tenant, key string) error {
	if !sdkactivity.IsActivity(ctx) {
		// Called as a function, not scheduled: by Go code that holds the
		// store itself, and could call it as well.
		return nil
	}
	info := sdkactivity.GetInfo(ctx)
	refuse := func(why string) error {
		cause := fmt.Errorf("%w: %s", errForeignRecord, why)
		if observe != nil {
			observe(Event{Kind: EventForeignRecord, Activity: activityName, Tenant: tenant, Key: key,
				WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, ActivityID: info.ActivityID,
				Attempt: info.Attempt, Err: cause})
		}
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("idempotency: %s refused: %s", activityName, why), decision.ErrorTypeForeignRecord, nil)
	}
	own, ok := tenantOf(ctx, info)
	switch {
	case !ok:
		return refuse(fmt.Sprintf("the execution runs under no tenant, and the request names tenant %q", tenant))
	case own != tenant:
		return refuse(fmt.Sprintf("the request names tenant %q, and the execution runs under tenant %q", tenant, own))
	}
	rec, err := st.Lookup(ctx, store.LookupParams{Tenant: tenant, Key: key})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		// The store cannot say whose the record is: the retry asks again.
		return fmt.Errorf("idempotency: reading the record %s names: %w", activityName, err)
	case rec.Origin.WorkflowID != "" && info.WorkflowExecution.ID != "" && rec.Origin.WorkflowID != info.WorkflowExecution.ID:
		return refuse(fmt.Sprintf("the record under key %s was made by another workflow than the one that scheduled the request", key))
	case rec.Origin.WorkflowID == "" && rec.Origin.ActivityID != "" && info.WorkflowExecution.ID != "":
		return refuse(fmt.Sprintf("the record under key %s was made outside any workflow (by %q, a Nexus operation or a standalone activity): no workflow may touch it", key, rec.Origin.ActivityType))
	}
	return nil
}
