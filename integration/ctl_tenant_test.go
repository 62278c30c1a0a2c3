package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/store"
)

// Tenant isolation through the command: an operator acting for tenant
// globex, holding the very key string of a record of tenant acme, can
// neither see, decide, free nor forget acme's record, and acme's workflow
// keeps waiting for acme's decision.
func TestCtlTenantIsolation(t *testing.T) {
	t.Parallel()
	st, global := ctlStore(t)
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
	run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	require.Equal(t, "acme", o.Tenant)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// globex has a record under the same key string.
	markGlobex := func() {
		res, err := st.Claim(ctx, store.ClaimParams{Tenant: "globex", Key: o.Key, Holder: "globex-worker", Lease: time.Minute})
		require.NoError(t, err)
		require.Equal(t, store.StatusAcquired, res.Status, "tenants do not share keys")
		require.NoError(t, st.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: "globex", Key: o.Key, Token: res.Record.Token, Reason: "r"}))
	}
	markGlobex()
	acmeStillWaits := func(what string) {
		t.Helper()
		rec, err := st.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: o.Key})
		require.NoError(t, err, what)
		assert.Equal(t, store.StateIndeterminate, rec.State, "%s: acme's record is untouched", what)
		v, err := e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), decision.QueryName)
		require.NoError(t, err)
		var pending []decision.PendingDecision
		require.NoError(t, v.Get(&pending))
		assert.Len(t, pending, 1, "%s: acme's workflow still waits", what)
	}

	r := ctl(t, temporalEnv(), append(global, "decide", "-tenant", "globex", "-key", o.Key, "-free", "-yes", "-by", "globex-ops")...)
	assert.Equal(t, 1, r.code, "globex's record has no workflow of acme's to decide: %s", r.stdout)
	acmeStillWaits("decide as globex")

	r = ctl(t, temporalEnv(), append(global, "resolve", "-tenant", "globex", "-key", o.Key, "-free", "-yes", "-by", "globex-ops")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	acmeStillWaits("resolve as globex")

	r = ctl(t, temporalEnv(), append(global, "list", "-tenant", "globex")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.NotContains(t, r.stdout, o.Key, "globex's listing never shows acme's record")
	r = ctl(t, temporalEnv(), append(global, "list", "-tenant", "acme")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, o.Key)

	markGlobex()
	// globex's record is indeterminate: forget refuses it without -force.
	r = ctl(t, temporalEnv(), append(global, "forget", "-tenant", "globex", "-yes")...)
	require.Equal(t, 1, r.code, "stdout: %s", r.stdout)
	acmeStillWaits("a refused forget of globex")
	r = ctl(t, temporalEnv(), append(global, "forget", "-tenant", "globex", "-yes", "-force")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	_, err := st.Lookup(ctx, store.LookupParams{Tenant: "globex", Key: o.Key})
	require.ErrorIs(t, err, store.ErrNotFound, "forget removed globex's record")
	acmeStillWaits("forget globex")

	// acme's own operator ends it.
	r = ctl(t, temporalEnv(), append(global, "decide", "-tenant", "acme", "-key", o.Key, "-fail", "-by", "acme-ops")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	_, ok := activity.AsIndeterminate(run.Get(ctx, nil))
	assert.True(t, ok, "acme's decision reached acme's workflow")
	assert.Equal(t, 1, e.ledger.Calls("BA117"))
}
