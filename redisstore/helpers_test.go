package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// claimOK claims key and requires it acquired.
func claimOK(t testing.TB, s store.Store, tenant, key string) store.Record {
	t.Helper()
	res, err := s.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: key, Holder: "test", Lease: time.Minute})
	require.NoError(t, err, "Claim(%q, %q)", tenant, key)
	require.Equal(t, store.StatusAcquired, res.Status, "Claim(%q, %q)", tenant, key)
	return res.Record
}

// recordEachState writes one record of tenant in each state, under keys
// named for it: "pending", "completed" and "indeterminate".
func recordEachState(t testing.TB, s store.Store, tenant string) {
	t.Helper()
	ctx := context.Background()
	claimOK(t, s, tenant, "pending")
	done := claimOK(t, s, tenant, "completed")
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: "completed", Token: done.Token, Outcome: []byte("o")}))
	lost := claimOK(t, s, tenant, "indeterminate")
	require.NoError(t, s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: tenant, Key: "indeterminate", Token: lost.Token, Reason: "r"}))
}

// op is one store method called on (tenant, key) with fixed other arguments.
type op struct {
	name string
	call func(ctx context.Context, s store.Store, tenant, key string) error
}

// allOps returns every Store method; the fenced ones use token.
func allOps(token int64) []op {
	return []op{
		{"Claim", func(ctx context.Context, s store.Store, tenant, key string) error {
			_, err := s.Claim(ctx, store.ClaimParams{Tenant: tenant, Key: "fresh", Holder: "h", Lease: time.Minute})
			return err
		}},
		{"Renew", func(ctx context.Context, s store.Store, tenant, key string) error {
			_, err := s.Renew(ctx, store.RenewParams{Tenant: tenant, Key: key, Token: token, Lease: time.Minute})
			return err
		}},
		{"Complete", func(ctx context.Context, s store.Store, tenant, key string) error {
			return s.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: key, Token: token, Outcome: []byte("x")})
		}},
		{"Release", func(ctx context.Context, s store.Store, tenant, key string) error {
			return s.Release(ctx, store.ReleaseParams{Tenant: tenant, Key: key, Token: token})
		}},
		{"MarkIndeterminate", func(ctx context.Context, s store.Store, tenant, key string) error {
			return s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: tenant, Key: key, Token: token, Reason: "r"})
		}},
		{"Lookup", func(ctx context.Context, s store.Store, tenant, key string) error {
			_, err := s.Lookup(ctx, store.LookupParams{Tenant: tenant, Key: key})
			return err
		}},
		{"Wait", func(ctx context.Context, s store.Store, tenant, key string) error {
			_, err := s.Wait(ctx, store.WaitParams{Tenant: tenant, Key: key, Token: token})
			return err
		}},
		{"Resolve", func(ctx context.Context, s store.Store, tenant, key string) error {
			return s.Resolve(ctx, store.ResolveParams{Tenant: tenant, Key: key, Decision: store.ActionFree})
		}},
		{"Forget", func(ctx context.Context, s store.Store, tenant, key string) error {
			_, err := s.Forget(ctx, store.ForgetParams{Tenant: tenant})
			return err
		}},
		{"Sweep", func(ctx context.Context, s store.Store, tenant, key string) error {
			_, err := s.Sweep(ctx, store.SweepParams{})
			return err
		}},
	}
}

// group runs functions in goroutines and keeps the first error.
type group struct {
	wg   sync.WaitGroup
	once sync.Once
	err  error
}

func (g *group) Go(f func() error) {
	g.wg.Go(func() {
		if err := f(); err != nil {
			g.once.Do(func() { g.err = err })
		}
	})
}

func (g *group) Wait() error {
	g.wg.Wait()
	return g.err
}
