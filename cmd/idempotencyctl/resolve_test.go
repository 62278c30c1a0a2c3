package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
)

// interleaved is a real store before each of whose writes a duplicate of
// the key claims it, as a retry arriving at that moment would, and notes
// what it saw. It injects nothing: every call reaches the store.
type interleaved struct {
	store.Store
	tenant, key string

	mu   sync.Mutex
	seen []store.Result
}

func (s *interleaved) duplicate(ctx context.Context) {
	res, err := s.Store.Claim(ctx, store.ClaimParams{Tenant: s.tenant, Key: s.key, Holder: "duplicate", Lease: time.Minute})
	if err != nil {
		res = store.Result{} // Status 0: reported below
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, res)
}

func (s *interleaved) Claim(ctx context.Context, p store.ClaimParams) (store.Result, error) {
	s.duplicate(ctx)
	return s.Store.Claim(ctx, p)
}

func (s *interleaved) MarkIndeterminate(ctx context.Context, p store.MarkIndeterminateParams) error {
	s.duplicate(ctx)
	return s.Store.MarkIndeterminate(ctx, p)
}

func (s *interleaved) Resolve(ctx context.Context, p store.ResolveParams) error {
	s.duplicate(ctx)
	return s.Store.Resolve(ctx, p)
}

func (s *interleaved) Release(ctx context.Context, p store.ReleaseParams) error {
	s.duplicate(ctx)
	return s.Store.Release(ctx, p)
}

// Resolving a stale pending record is one step: a duplicate that claims the
// key at any moment around the command's store calls finds the stale claim
// (held, its holder presumed gone) or the decision, never the key taken
// over by a live claim it would wait on while the decision is being made,
// never an indeterminate record it would route to a person again.
func TestResolveStaleIsOneStep(t *testing.T) {
	t.Parallel()
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			t.Parallel()
			f := fx.make(t)
			tenant := testenv.UniqueName("tenant")
			token := seedStale(t, f, tenant)
			dup := &interleaved{Store: f.st, tenant: tenant, key: testKey}
			b := *f.b
			b.Store = dup
			f.b = &b

			r := f.run(t, "resolve", "-tenant", tenant, "-key", testKey, "-outcome", `"12A"`, "-by", "ops@acme")
			require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
			dup.duplicate(context.Background()) // and one after it
			require.NotEmpty(t, dup.seen)
			for i, res := range dup.seen {
				switch {
				case res.Status == store.StatusHeld:
					assert.Equal(t, token, res.Record.Token, "duplicate %d saw the key held by another claim than the stale one", i)
					assert.True(t, res.LeaseExpired, "duplicate %d saw a live claim: it would wait on a decision already being made", i)
				case res.Status == store.StatusCompleted:
				default:
					assert.Failf(t, "a duplicate saw what it must not", "duplicate %d saw %v (%q)", i, res.Status, res.Record.Reason)
				}
			}
			assert.Equal(t, store.StatusCompleted, dup.seen[len(dup.seen)-1].Status, "after the command, the decision")
		})
	}
}
