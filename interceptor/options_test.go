package interceptor_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/optdoc"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	secret := func(gen int, fill byte) *keyspace.Secret {
		s, err := keyspace.NewSecret(gen, bytes.Repeat([]byte{fill}, keyspace.MinSecretLength))
		require.NoError(t, err)
		return s
	}
	long := make([]byte, 257)
	for i := range long {
		long[i] = 'w'
	}
	tests := []struct {
		name  string
		opts  interceptor.Options
		field string
	}{
		{"NilStore", interceptor.Options{}, "Store"},
		{"UnknownScope", interceptor.Options{Store: mem, Scope: interceptor.ScopeFirstRun + 1}, "Scope"},
		{"NegativeLease", interceptor.Options{Store: mem, Lease: -time.Second}, "Lease"},
		{"NegativeWaitHeartbeat", interceptor.Options{Store: mem, WaitHeartbeat: -1}, "WaitHeartbeat"},
		{"NegativeRecordAttempts", interceptor.Options{Store: mem, RecordAttempts: -1}, "RecordAttempts"},
		{"NegativeRecordBackoff", interceptor.Options{Store: mem, RecordBackoff: -1}, "RecordBackoff"},
		{"NegativeStoreTimeout", interceptor.Options{Store: mem, StoreTimeout: -1}, "StoreTimeout"},
		{"TinyLease", interceptor.Options{Store: mem, Lease: 2}, "Lease"},
		{"LeaseBelowMinimum", interceptor.Options{Store: mem, Lease: interceptor.LeaseFloor - 1}, "Lease"},
		{"TinyWaitHeartbeat", interceptor.Options{Store: mem, WaitHeartbeat: 1}, "WaitHeartbeat"},
		{"TinyRecordBackoff", interceptor.Options{Store: mem, RecordBackoff: 1}, "RecordBackoff"},
		{"TinyStoreTimeout", interceptor.Options{Store: mem, StoreTimeout: 1}, "StoreTimeout"},
		{"NegativeDecisionTimeout", interceptor.Options{Store: mem, DecisionTimeout: -1}, "DecisionTimeout"},
		{"TinyDecisionTimeout", interceptor.Options{Store: mem, DecisionTimeout: time.Millisecond}, "DecisionTimeout"},
		{"LongIdentity", interceptor.Options{Store: mem, Identity: string(long)}, "Identity"},
		{"NilKeySecrets", interceptor.Options{Store: mem, KeySecrets: []*keyspace.Secret{secret(1, 1), nil}}, "KeySecrets[1]"},
		{"KeySecretGenerationTwice", interceptor.Options{Store: mem, KeySecret: secret(1, 1), KeySecrets: []*keyspace.Secret{secret(1, 2)}}, "KeySecrets[0]"},
		{"KeySecretsGenerationTwice", interceptor.Options{Store: mem, KeySecrets: []*keyspace.Secret{secret(3, 1), secret(3, 2)}}, "KeySecrets[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ic, err := interceptor.New(tt.opts)
			require.Error(t, err)
			assert.Nil(t, ic)
			assert.ErrorIs(t, err, interceptor.ErrInvalidOptions)
			var oe *interceptor.OptionsError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, "interceptor.Options."+tt.field, oe.Field)
			assert.Contains(t, err.Error(), tt.field, "the message names the field")
		})
	}
}

func TestNewDefaults(t *testing.T) {
	t.Parallel()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	ic, err := interceptor.New(interceptor.Options{Store: mem})
	require.NoError(t, err)
	assert.Same(t, mem, ic.Store())
	_, ok := ic.Declaration("Book")
	assert.False(t, ok)
}

func TestDeclare(t *testing.T) {
	t.Parallel()
	a := &acts{}
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	ic, err := interceptor.New(interceptor.Options{Store: mem})
	require.NoError(t, err)

	book := activity.Effectful(a.Book, "flight")
	require.NoError(t, ic.Declare(book))
	got, ok := ic.Declaration("Book")
	require.True(t, ok)
	assert.Same(t, book, got)

	tests := []struct {
		name  string
		decls []*activity.Declaration
		is    error
	}{
		{"AlreadyDeclared", []*activity.Declaration{activity.Idempotent(a.Book, "flight")}, interceptor.ErrAlreadyDeclared},
		{"TwiceInOneCall", []*activity.Declaration{activity.Idempotent(a.Reserve, "flight"), activity.Effectful(a.Reserve, "flight")}, interceptor.ErrAlreadyDeclared},
		{"Nil", []*activity.Declaration{activity.Idempotent(a.Notify, "flight"), nil}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ic.Declare(tt.decls...)
			require.Error(t, err)
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
			}
			for _, d := range tt.decls {
				if d == nil || d.Name() == "Book" {
					continue
				}
				_, ok := ic.Declaration(d.Name())
				assert.False(t, ok, "a refused call declares nothing (%s)", d.Name())
			}
		})
	}
	got, _ = ic.Declaration("Book")
	assert.Same(t, book, got, "the first declaration stands")
	assert.True(t, errors.Is(ic.Declare(book), interceptor.ErrAlreadyDeclared))
}

func TestEventKindString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind interceptor.EventKind
		want string
	}{
		{interceptor.EventClaimed, "claimed"},
		{interceptor.EventDeduplicated, "deduplicated"},
		{interceptor.EventWaiting, "waiting"},
		{interceptor.EventTakenOver, "taken_over"},
		{interceptor.EventCompleted, "completed"},
		{interceptor.EventReleased, "released"},
		{interceptor.EventIndeterminate, "indeterminate"},
		{interceptor.EventStoreError, "store_error"},
		{interceptor.EventOrphaned, "orphaned"},
		{interceptor.EventSuperseded, "superseded"},
		{0, "unknown"},
		{interceptor.EventDecided, "decided"},
		{interceptor.EventProbeLanded, "probe_landed"},
		{interceptor.EventProbeNotLanded, "probe_not_landed"},
		{interceptor.EventProbeUnsettled, "probe_unsettled"},
		{interceptor.EventProbeLate, "probe_late"},
		{interceptor.EventMisconfigured, "misconfigured"},
		{interceptor.EventArgumentsMismatch, "arguments_mismatch"},
		{interceptor.EventWaited, "waited"},
		{interceptor.EventLeaseLapsed, "lease_lapsed"},
		{interceptor.EventForeignRecord, "foreign_record"},
		{interceptor.EventNotRun, "not_run"},
		{interceptor.EventTenantIgnored, "tenant_ignored"},
		{interceptor.EventTenantIgnored + 1, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, tt.kind.String())
		})
	}
}

func TestScopeString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "run", interceptor.ScopeRun.String())
	assert.Equal(t, "workflow", interceptor.ScopeWorkflow.String())
	assert.Equal(t, "first-run", interceptor.ScopeFirstRun.String())
}

func TestScope(t *testing.T) {
	t.Parallel()
	req := BookRequest{Flight: "BA117"}
	keys := make(map[interceptor.Scope]string)
	for _, scope := range []interceptor.Scope{interceptor.ScopeRun, interceptor.ScopeWorkflow} {
		h := newHarness(t, func(o *interceptor.Options) { o.Scope = scope })
		env := h.activityEnv(t, "acme")
		runID, workflowID := h.runIDs(t, env)
		require.NotEqual(t, runID, workflowID)
		_, err := book(env, h.acts.Book, req)
		require.NoError(t, err)
		keys[scope] = h.rec.first(t, interceptor.EventClaimed).Key
		want := map[interceptor.Scope]string{interceptor.ScopeRun: runID, interceptor.ScopeWorkflow: workflowID}[scope]
		assert.Equal(t, h.key(t, "Book", "acme", want, req), keys[scope], "scope %s keys by %q", scope, want)
	}
	assert.NotEqual(t, keys[interceptor.ScopeRun], keys[interceptor.ScopeWorkflow])
}

// Every default Options states is the value New applies.
func TestOptionsDocStatesTheDefaults(t *testing.T) {
	n := optdoc.Check(t, "interceptor.go", map[string]any{
		"DefaultLease":          interceptor.DefaultLease,
		"DefaultWaitHeartbeat":  interceptor.DefaultWaitHeartbeat,
		"DefaultRecordAttempts": interceptor.DefaultRecordAttempts,
		"DefaultRecordBackoff":  interceptor.DefaultRecordBackoff,
		"DefaultClaimRetry":     interceptor.DefaultClaimRetry,
		"DefaultOrphanRetry":    interceptor.DefaultOrphanRetry,
		"DefaultStoreTimeout":   interceptor.DefaultStoreTimeout,
	})
	assert.Equal(t, 7, n, "every duration and count option states its default")
}
