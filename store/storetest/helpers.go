package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// claim claims key under the harness tenant and returns the result without
// judging it.
func (h *harness) claim(t *testing.T, key, holder string) store.Result {
	t.Helper()
	return h.claimIn(t, h.tenant, key, holder)
}

func (h *harness) claimIn(t *testing.T, tenant, key, holder string) store.Result {
	t.Helper()
	res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: tenant, Key: key, Holder: holder, Lease: h.lease})
	require.NoError(t, err, "Claim(%q, %q)", tenant, key)
	return res
}

// acquire claims key under the harness tenant and requires StatusAcquired.
func (h *harness) acquire(t *testing.T, key string) store.Record {
	t.Helper()
	return h.acquireIn(t, h.tenant, key)
}

func (h *harness) acquireIn(t *testing.T, tenant, key string) store.Record {
	t.Helper()
	res := h.claimIn(t, tenant, key, "holder-"+key)
	require.Equal(t, store.StatusAcquired, res.Status, "Claim(%q, %q) on a free key", tenant, key)
	require.Positive(t, res.Record.Token, "a fresh claim's token")
	return res.Record
}

// complete acquires key and records outcome under it.
func (h *harness) completed(t *testing.T, key string, outcome []byte) store.Record {
	t.Helper()
	return h.completedIn(t, h.tenant, key, outcome)
}

func (h *harness) completedIn(t *testing.T, tenant, key string, outcome []byte) store.Record {
	t.Helper()
	rec := h.acquireIn(t, tenant, key)
	require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: tenant, Key: key, Token: rec.Token, Outcome: outcome}))
	return rec
}

// indeterminate acquires key and marks it indeterminate with reason.
func (h *harness) indeterminate(t *testing.T, key, reason string) store.Record {
	t.Helper()
	return h.indeterminateIn(t, h.tenant, key, reason)
}

func (h *harness) indeterminateIn(t *testing.T, tenant, key, reason string) store.Record {
	t.Helper()
	rec := h.acquireIn(t, tenant, key)
	require.NoError(t, h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: tenant, Key: key, Token: rec.Token, Reason: reason}))
	return rec
}

// lookup returns the live record of key under the harness tenant.
func (h *harness) lookup(t *testing.T, key string) store.Record {
	t.Helper()
	return h.lookupIn(t, h.tenant, key)
}

func (h *harness) lookupIn(t *testing.T, tenant, key string) store.Record {
	t.Helper()
	rec, err := h.s.Lookup(h.ctx, store.LookupParams{Tenant: tenant, Key: key})
	require.NoError(t, err, "Lookup(%q, %q)", tenant, key)
	return rec
}

// requireMissing requires that key has no live record under tenant.
func (h *harness) requireMissing(t *testing.T, tenant, key string) {
	t.Helper()
	_, err := h.s.Lookup(h.ctx, store.LookupParams{Tenant: tenant, Key: key})
	require.ErrorIs(t, err, store.ErrNotFound, "Lookup(%q, %q) should find no live record", tenant, key)
}

// wait runs Wait with the suite's bound, so that a store that never wakes
// fails the case instead of hanging it.
func (h *harness) wait(t *testing.T, params store.WaitParams) (store.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, waitBound)
	defer cancel()
	res, err := h.s.Wait(ctx, params)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait(%q, %q, %d) did not return within %v", params.Tenant, params.Key, params.Token, waitBound)
	}
	return res, err
}

// waitAsync starts Wait in a goroutine and returns a function that collects
// its answer.
func (h *harness) waitAsync(t *testing.T, params store.WaitParams) func() (store.Result, error) {
	t.Helper()
	type answer struct {
		res store.Result
		err error
	}
	ch := make(chan answer, 1)
	ctx, cancel := context.WithTimeout(h.ctx, waitBound)
	t.Cleanup(cancel)
	go func() {
		res, err := h.s.Wait(ctx, params)
		ch <- answer{res, err}
	}()
	return func() (store.Result, error) {
		t.Helper()
		defer cancel()
		a := <-ch
		if errors.Is(a.err, context.DeadlineExceeded) {
			t.Fatalf("Wait(%q, %q, %d) did not return within %v", params.Tenant, params.Key, params.Token, waitBound)
		}
		return a.res, a.err
	}
}

// assertTime reports whether got is want within the tolerance durable stores
// need.
func assertTime(t *testing.T, want, got time.Time, field string) bool {
	t.Helper()
	return assert.WithinDuration(t, want, got, timeTolerance, "%s: want %v, got %v", field, want, got)
}

// assertRecord compares two records field by field, times within the
// tolerance, outcomes as bytes (nil and empty alike).
func assertRecord(t *testing.T, want, got store.Record) {
	t.Helper()
	assert.Equal(t, want.Tenant, got.Tenant, "Tenant")
	assert.Equal(t, want.Key, got.Key, "Key")
	assert.Equal(t, want.State, got.State, "State")
	assert.Equal(t, want.Holder, got.Holder, "Holder")
	assert.Equal(t, want.Token, got.Token, "Token")
	assertTime(t, want.LeaseUntil, got.LeaseUntil, "LeaseUntil")
	assertTime(t, want.ExpiresAt, got.ExpiresAt, "ExpiresAt")
	assertTime(t, want.CreatedAt, got.CreatedAt, "CreatedAt")
	assertTime(t, want.UpdatedAt, got.UpdatedAt, "UpdatedAt")
	assertOutcome(t, want.Outcome, got.Outcome)
	assert.Equal(t, want.Reason, got.Reason, "Reason")
	assert.Equal(t, want.Check, got.Check, "Check")
	assert.Equal(t, want.Retention, got.Retention, "Retention")
}

// assertOutcome compares outcomes as bytes; nil and empty are the same.
func assertOutcome(t *testing.T, want, got []byte) bool {
	t.Helper()
	if bytes.Equal(want, got) {
		return true
	}
	if len(want) > 64 || len(got) > 64 {
		return assert.Fail(t, "outcome differs", "want %d bytes, got %d bytes; first difference at byte %d", len(want), len(got), firstDiff(want, got))
	}
	return assert.Equal(t, want, got, "Outcome")
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
