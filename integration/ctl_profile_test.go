package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/store"
)

// writeTemporalConfig writes profiles as the temporal CLI keeps them (its
// TOML configuration file, written by the SDK's envconfig, which the CLI
// uses too) and returns the file's path.
func writeTemporalConfig(t *testing.T, profiles map[string]*envconfig.ClientConfigProfile) string {
	t.Helper()
	conf := envconfig.ClientConfig{Profiles: profiles}
	b, err := conf.ToTOML(envconfig.ClientConfigToTOMLOptions{})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "temporal.toml")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// decide reaches the workflow through a profile of the temporal CLI's
// configuration file, named by $TEMPORAL_PROFILE, with no address flag or
// variable: the default profile points nowhere, the one named points at
// the test server. A profile the file lacks is refused before anything is
// contacted, naming the profile and the file; the record stays as it was.
func TestCtlDecideThroughAProfile(t *testing.T) {
	t.Parallel()
	st, global := ctlStore(t)
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
	run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	path := writeTemporalConfig(t, map[string]*envconfig.ClientConfigProfile{
		"default": {Address: "127.0.0.1:1", Namespace: "nowhere"},
		"itest":   {Address: server.GetFrontendHostPort(), Namespace: server.GetDefaultNamespace()},
	})
	decide := append(append([]string{}, global...), "decide", "-tenant", o.Tenant, "-key", o.Key, "-by", "ops@acme", "-reason", "the airline confirmed")

	r := ctl(t, []string{"TEMPORAL_CONFIG_FILE=" + path, "TEMPORAL_PROFILE=staging"}, append(decide, "-outcome", `"seat 9 on BA117"`)...)
	assert.Equal(t, 2, r.code, "stdout: %s", r.stdout)
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	assert.Contains(t, r.stderr, `profile "staging" ($TEMPORAL_PROFILE) is not in the Temporal configuration file `+path+` ($TEMPORAL_CONFIG_FILE): it has "default", "itest"`)
	rec, err := st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
	require.NoError(t, err)
	assert.Equal(t, store.StateIndeterminate, rec.State, "nothing was decided")

	r = ctl(t, []string{"TEMPORAL_CONFIG_FILE=" + path, "TEMPORAL_PROFILE=itest"}, append(decide, "-outcome", `"seat 9 on BA117"`)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Empty(t, r.stderr)
	assert.Contains(t, r.stdout, "decided: workflow "+run.GetID()+" run "+run.GetRunID()+" answered: recorded;")

	var result string
	require.NoError(t, run.Get(ctx, &result))
	assert.Equal(t, "seat 9 on BA117", result)
	assert.Equal(t, 1, e.ledger.Calls("BA117"), "the airline was called once")
	assert.Equal(t, 0, e.ledger.Effects("BA117"), "and booked nothing after the decision")
	rec, err = st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)

	// The default profile applies when none is named, and a flag wins over
	// it: -address reaches the server the profile does not.
	r = ctl(t, []string{"TEMPORAL_CONFIG_FILE=" + path}, append(decide, "-retry", "-address", server.GetFrontendHostPort(), "-namespace", server.GetDefaultNamespace())...)
	assert.Equal(t, 1, r.code, "stdout: %s", r.stdout)
	assert.Contains(t, r.stderr, "has ended (completed): no workflow waits on the key", "it reached the server and found the workflow ended")
	r = ctl(t, []string{"TEMPORAL_CONFIG_FILE=" + path}, append([]string{"-timeout", "3s"}, append(decide, "-retry")...)...)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `cannot reach Temporal at 127.0.0.1:1 (namespace nowhere, profile "default" of `+path+`)`)
}
