package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

func originCases() []testCase {
	first := store.Origin{WorkflowID: "wf-1", RunID: "run-1", ActivityType: "Book", ActivityID: "5", Attempt: 1}
	return []testCase{
		{"KeptThroughTheRecordsLife", func(t *testing.T, h *harness) {
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "worker-1", Lease: h.lease, Origin: first})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			assert.Equal(t, first, res.Record.Origin, "the claim's answer")
			assert.Equal(t, first, h.lookup(t, "k").Origin, "the stored record")
			held := h.claim(t, "k", "worker-2")
			assert.Equal(t, first, held.Record.Origin, "a duplicate sees who holds the key")
			_, err = h.s.Renew(h.ctx, store.RenewParams{Tenant: h.tenant, Key: "k", Token: res.Record.Token, Lease: h.lease})
			require.NoError(t, err)
			require.NoError(t, h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: h.tenant, Key: "k", Token: res.Record.Token, Reason: "r"}))
			assert.Equal(t, first, h.lookup(t, "k").Origin, "an indeterminate record names the execution a person must look at")
		}},
		{"ReplacedByATakeover", func(t *testing.T, h *harness) {
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "worker-1", Lease: h.lease, Origin: first})
			require.NoError(t, err)
			h.clock.Advance(h.lease + time.Second)
			second := store.Origin{WorkflowID: "wf-1", RunID: "run-1", ActivityType: "Book", ActivityID: "5", Attempt: 2}
			taken, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "worker-2", Lease: h.lease, Origin: second, Supersede: res.Record.Token})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, taken.Status)
			assert.Equal(t, second, h.lookup(t, "k").Origin)
		}},
		{"Optional", func(t *testing.T, h *harness) {
			assert.Equal(t, store.Origin{}, h.acquire(t, "k").Origin)
		}},
		{"Refused", func(t *testing.T, h *harness) {
			for _, o := range []store.Origin{
				{WorkflowID: strings.Repeat("w", store.MaxOriginLength+1)},
				{ActivityID: "a\x00b"},
				{RunID: "\xff"},
				{Attempt: -1},
			} {
				_, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "h", Lease: h.lease, Origin: o})
				require.ErrorIs(t, err, store.ErrInvalid, "%+v", o)
			}
			h.requireMissing(t, h.tenant, "k")
		}},
	}
}
