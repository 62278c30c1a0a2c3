package interceptor

import (
	"context"

	"go.temporal.io/sdk/converter"

	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/store"
)

// SetOrphanRetryLimit lowers the maxOrphanRetries bound of i, so a test can
// reach it.
func SetOrphanRetryLimit(i *Interceptor, n int) {
	i.bgMu.Lock()
	defer i.bgMu.Unlock()
	i.bgLimit = n
}

// WaitBackground waits until the background work of i — the attempts to
// settle orphaned claims (Options.OrphanRetry) — has ended, without
// stopping it: a test that runs one execution at a time calls it between
// two.
func WaitBackground(i *Interceptor) { i.bg.Wait() }

// LeaseFloor is the smallest non-zero Options.Lease New accepts.
const LeaseFloor = minLease

// ResolveActivityIn is the Resolve activity on st and dc, its requests bound
// to the tenant in the activity's TenantHeader header, reporting nothing.
func ResolveActivityIn(st store.Store, dc converter.DataConverter) func(context.Context, decision.ResolveRequest) error {
	return resolveActivity(st, dc, TenantFromHeader, nil)
}
