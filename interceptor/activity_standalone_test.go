package interceptor_test

import (
	"context"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/wire"
	"github.com/tesserix/idempotency/store"
)

// namespaceOf returns the namespace the activity runs in.
func namespaceOf(ctx context.Context) (string, error) { return sdkactivity.GetInfo(ctx).Namespace, nil }

// standaloneEnv is h.activityEnv running activities as the client's
// ExecuteActivity starts them: outside any workflow.
func (h *harness) standaloneEnv(t *testing.T, tenant string) *testsuite.TestActivityEnvironment {
	t.Helper()
	env := h.activityEnv(t, tenant)
	env.SetExecuteActivitiesInWorkflow(false)
	env.RegisterActivity(namespaceOf)
	return env
}

func namespaceIn(t *testing.T, env *testsuite.TestActivityEnvironment) string {
	t.Helper()
	v, err := env.ExecuteActivity(namespaceOf)
	require.NoError(t, err)
	var ns string
	require.NoError(t, v.Get(&ns))
	return ns
}

// A standalone activity is claimed under the key StandaloneRun scopes by
// its namespace and activity ID, and its record names the activity and no
// workflow. Before standalone activities were handled, it failed at once
// as key_not_derivable ("the execution belongs to no workflow run").
func TestStandaloneActivityIsClaimed(t *testing.T) {
	t.Parallel()
	for _, kc := range dedupKinds {
		t.Run(kc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			env := h.standaloneEnv(t, "acme")
			req := BookRequest{Flight: "BA117", RequestID: "a"}
			got, err := book(env, kc.fn(h), req)
			require.NoError(t, err)
			assert.Equal(t, 1, got.Call)

			claimed := h.rec.first(t, interceptor.EventClaimed)
			require.NotEmpty(t, claimed.ActivityID)
			assert.Empty(t, claimed.WorkflowID)
			assert.Empty(t, claimed.RunID)
			want := h.key(t, kc.act, "acme", wire.StandaloneRun(namespaceIn(t, env), claimed.ActivityID), req)
			assert.Equal(t, want, got.Key, "the body's key")
			rec, err := h.lookup(t, "acme", want)
			require.NoError(t, err)
			assert.Equal(t, store.StateCompleted, rec.State)
			assert.Equal(t, store.Origin{ActivityType: kc.act, ActivityID: claimed.ActivityID, Attempt: 1}, rec.Origin)
		})
	}
}

// Another run of the same standalone activity ID (the server runs one again
// once the first has closed) finds the first run's record: its body does
// not run again. The Scope option does not change that.
func TestStandaloneActivityIDRunsOnce(t *testing.T) {
	t.Parallel()
	for _, scope := range []interceptor.Scope{interceptor.ScopeRun, interceptor.ScopeWorkflow} {
		t.Run(scope.String(), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *interceptor.Options) { o.Scope = scope })
			// Each test environment numbers its activity IDs from the
			// same start, and its activity run IDs apart from them: the
			// first call in each is one activity ID, run twice.
			first, err := book(h.standaloneEnv(t, "acme"), h.acts.Book, BookRequest{Flight: "BA117", RequestID: "a"})
			require.NoError(t, err)
			second, err := book(h.standaloneEnv(t, "acme"), h.acts.Book, BookRequest{Flight: "BA117", RequestID: "b"})
			require.NoError(t, err)

			events := h.rec.all()
			require.Len(t, events, 3, "claimed, completed, deduplicated: %v", h.rec.kinds())
			require.Equal(t, events[0].ActivityID, events[2].ActivityID, "one activity ID")
			assert.Equal(t, interceptor.EventDeduplicated, events[2].Kind)
			assert.Equal(t, first, second)
			assert.Equal(t, 1, h.acts.ledger.count("Book"))
		})
	}
}

// A standalone activity started without the tenant header runs under
// Options.DefaultTenant; with none, nothing runs and the call fails at once
// with the non-retryable no-tenant error, which says how to give a
// standalone activity one (the memo is a workflow's: it is not named). An
// activity of a workflow gets its default from the workflow side, never
// here.
func TestStandaloneActivityTenant(t *testing.T) {
	t.Parallel()
	t.Run("Default", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(o *interceptor.Options) { o.DefaultTenant = "solo" })
		got, err := book(h.standaloneEnv(t, ""), h.acts.Book, BookRequest{Flight: "BA117"})
		require.NoError(t, err)
		assert.Equal(t, "solo", h.rec.first(t, interceptor.EventClaimed).Tenant)
		_, err = h.lookup(t, "solo", got.Key)
		require.NoError(t, err)
	})
	t.Run("HeaderWins", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(o *interceptor.Options) { o.DefaultTenant = "solo" })
		_, err := book(h.standaloneEnv(t, "acme"), h.acts.Book, BookRequest{Flight: "BA117"})
		require.NoError(t, err)
		assert.Equal(t, "acme", h.rec.first(t, interceptor.EventClaimed).Tenant)
	})
	t.Run("None", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		_, err := book(h.standaloneEnv(t, ""), h.acts.Book, BookRequest{Flight: "BA117"})
		appErr := requireApplicationError(t, err, decision.ErrorTypeNoTenant)
		assert.True(t, appErr.NonRetryable())
		assert.Contains(t, err.Error(), "the standalone activity carries no tenant")
		assert.Contains(t, err.Error(), "interceptor.WithTenant")
		assert.Contains(t, err.Error(), "Options.DefaultTenant")
		assert.NotContains(t, err.Error(), "--memo")
		assert.Zero(t, h.acts.ledger.total())
		assert.Equal(t, 1, h.rec.count(interceptor.EventMisconfigured))
	})
	t.Run("WorkflowActivityGetsNoDefaultHere", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(o *interceptor.Options) { o.DefaultTenant = "solo" })
		_, err := book(h.activityEnv(t, ""), h.acts.Book, BookRequest{Flight: "BA117"})
		requireApplicationError(t, err, decision.ErrorTypeNoTenant)
		assert.Zero(t, h.acts.ledger.total())
	})
}

// A standalone activity's run component never equals a workflow's, so its
// key never equals the key of a workflow's activity, whichever Scope and
// whatever the workflow's IDs; and no two namespace/activity ID pairs
// share one.
func TestStandaloneRunNeverCollides(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	req := BookRequest{Flight: "BA117"}
	pairs := [][2]string{
		{"default", "book-1"}, {"default", "book-2"}, {"prod", "book-1"},
		{"a", "b:c"}, {"a:b", "c"}, {"", "x"}, {"x", ""}, {"1:a", "b"}, {"1", "a:b"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		run := wire.StandaloneRun(p[0], p[1])
		assert.False(t, utf8.ValidString(run), "%q is valid UTF-8, as a workflow ID or run ID is", run)
		if other, ok := seen[run]; ok {
			t.Errorf("%v and %v share the run %q", p, other, run)
		}
		seen[run] = p
		for _, wf := range []string{p[1], p[0], p[0] + p[1], "activity:" + p[1]} {
			if wf == "" {
				continue // no workflow has an empty ID
			}
			assert.NotEqual(t, h.key(t, "Book", "acme", wf, req), h.key(t, "Book", "acme", run, req))
		}
	}
}

// The run component of a standalone key is a compatibility promise, like
// the key encoding: records written under it must keep matching.
func TestStandaloneRunIsPinned(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "\xffactivity:7:default:book-ada-ba117", wire.StandaloneRun("default", "book-ada-ba117"))
	assert.Equal(t, "\xffactivity:0::x", wire.StandaloneRun("", "x"))
	d := activity.Effectful((&acts{}).Book, "flight")
	key, err := d.Key("acme", wire.StandaloneRun("default", "book-ada-ba117"), []any{BookRequest{Flight: "BA117", RequestID: "a"}})
	require.NoError(t, err)
	assert.Equal(t, pinnedStandaloneKey, string(key))
}

// pinnedStandaloneKey is keyspace.Derive's key for tenant "acme", the
// standalone run of activity ID "book-ada-ba117" in namespace "default",
// activity "Book" and flight "BA117", computed once and frozen.
const pinnedStandaloneKey = "v1:5d71d4f3b9a7f8c73d34d4cbbbf9f3e6b831b28e008984f4247bc39311deb03c"
