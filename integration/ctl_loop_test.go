package integration

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/activity"
)

// The operator's whole loop through the built command, as docs/OPERATING.md walks
// it: list shows what waits, show names the workflow, decide wakes it with
// the outcome, and list then shows nothing waiting.
func TestCtlOperatorLoop(t *testing.T) {
	t.Parallel()
	st, global := ctlStore(t)
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
	run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	r := ctl(t, nil, append(global, "list", "-tenant", o.Tenant)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 3, "header, the waiting record, count: %s", r.stdout)
	row := strings.Fields(lines[1])
	assert.Equal(t, []string{o.Tenant, o.Key, "indeterminate"}, row[:3])
	assert.Contains(t, lines[1], " Book ")
	assert.Contains(t, lines[1], run.GetID())

	r = ctl(t, nil, append(global, "show", "-tenant", o.Tenant, "-key", o.Key)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "workflow_id  "+run.GetID()+"\n")

	r = ctl(t, temporalEnv(), append(global, "decide", "-tenant", o.Tenant, "-key", o.Key,
		"-outcome", `"seat 9 on BA117, confirmed by phone"`, "-by", "ops@acme", "-reason", "the airline confirmed")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "answered: recorded;")
	var result string
	require.NoError(t, run.Get(ctx, &result))
	assert.Equal(t, "seat 9 on BA117, confirmed by phone", result)
	assert.Equal(t, 0, e.ledger.Effects("BA117"))

	r = ctl(t, nil, append(global, "list", "-tenant", o.Tenant)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Regexp(t, `^nothing waits for a person in tenant `+regexp.QuoteMeta(o.Tenant)+` of PostgreSQL table \S+\.idempotency_records at \S+: no indeterminate records and no stale pending ones\n$`, r.stdout)

	r = ctl(t, nil, append(global, "list", "-tenant", o.Tenant, "-state", "completed")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, o.Key)
	assert.Contains(t, r.stdout, "\n1 record\n")
	assert.Contains(t, r.stdout, "ops@acme", "the record names who decided")
	assert.Contains(t, r.stdout, "the airline confirmed")
}
