package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

func listCases() []testCase {
	return []testCase{
		{"Empty", func(t *testing.T, h *harness) {
			page, err := h.s.List(h.ctx, store.ListParams{Tenant: h.tenant})
			require.NoError(t, err)
			assert.Empty(t, page.Records)
			assert.Empty(t, page.Next)
			page, err = h.s.ListAcrossTenants(h.ctx, store.ListParams{})
			require.NoError(t, err)
			assert.Empty(t, page.Records)
			assert.Empty(t, page.Next)
		}},
		{"Ordering", func(t *testing.T, h *harness) {
			// Three moments, two keys claimed at the second: ties are
			// broken by key.
			h.acquire(t, "m")
			h.clock.Advance(time.Second)
			h.acquire(t, "z")
			h.acquire(t, "b")
			h.clock.Advance(time.Second)
			h.completed(t, "a", []byte("x"))
			assert.Equal(t, []string{"a", "z", "b", "m"}, keysOf(h.listAll(t, store.ListParams{Tenant: h.tenant}, 10)), "newest first")
			assert.Equal(t, []string{"m", "b", "z", "a"}, keysOf(h.listAll(t, store.ListParams{Tenant: h.tenant, Order: store.OldestFirst}, 10)), "oldest first")
			got := h.listAll(t, store.ListParams{Tenant: h.tenant, Order: store.OldestFirst}, 10)
			assertRecord(t, h.lookup(t, "m"), got[0])
			assertOutcome(t, []byte("x"), got[3].Outcome)
		}},
		{"Paging", func(t *testing.T, h *harness) {
			var want []string
			for i := range 7 {
				key := fmt.Sprintf("k%d", i)
				h.acquire(t, key)
				want = append(want, key)
				if i%3 == 0 {
					h.clock.Advance(time.Millisecond)
				}
			}
			for _, limit := range []int{1, 2, 3, 7, 8} {
				got := keysOf(h.listAll(t, store.ListParams{Tenant: h.tenant, Order: store.OldestFirst}, limit))
				assert.Equal(t, want, got, "limit %d", limit)
			}
			// A full last page still ends the listing in one more call at
			// most, and never repeats.
			page, err := h.s.List(h.ctx, store.ListParams{Tenant: h.tenant, Limit: 7})
			require.NoError(t, err)
			require.Len(t, page.Records, 7)
			if page.Next != "" {
				rest, err := h.s.List(h.ctx, store.ListParams{Tenant: h.tenant, Limit: 7, Cursor: page.Next})
				require.NoError(t, err)
				assert.Empty(t, rest.Records)
				assert.Empty(t, rest.Next)
			}
		}},
		{"ManyAtOneMoment", func(t *testing.T, h *harness) {
			// More records at one instant than a store may read in one
			// batch: the key alone orders them.
			var want []string
			for i := range 300 {
				key := fmt.Sprintf("k%03d", i)
				h.indeterminate(t, key, "r")
				want = append(want, key)
			}
			assert.Equal(t, want, keysOf(h.listAll(t, store.ListParams{Tenant: h.tenant, Order: store.OldestFirst}, 70)))
			slices.Reverse(want)
			assert.Equal(t, want, keysOf(h.listAll(t, store.ListParams{Tenant: h.tenant, States: []store.State{store.StateIndeterminate}}, 70)))
		}},
		{"PagingUnderConcurrentInserts", func(t *testing.T, h *harness) {
			for _, order := range []store.Order{store.NewestFirst, store.OldestFirst} {
				t.Run(order.String(), func(t *testing.T) {
					tenant := "paging-" + order.String()
					var original []string
					for i := range 12 {
						key := fmt.Sprintf("o%02d", i)
						h.acquireIn(t, tenant, key)
						original = append(original, key)
						if i%4 == 3 {
							h.clock.Advance(time.Millisecond)
						}
					}
					stop := make(chan struct{})
					var wg sync.WaitGroup
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range 20 {
							select {
							case <-stop:
								return
							default:
							}
							// Keys that sort before, between and after the
							// originals, at the newest moment.
							for _, prefix := range []string{"a", "o05x", "z"} {
								_, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: tenant, Key: fmt.Sprintf("%s%03d", prefix, i), Holder: "inserter", Lease: h.lease})
								if err != nil {
									return
								}
							}
						}
					}()
					seen := map[string]int{}
					p := store.ListParams{Tenant: tenant, Order: order, Limit: 2}
					for range 1000 {
						page, err := h.s.List(h.ctx, p)
						require.NoError(t, err)
						for _, r := range page.Records {
							seen[r.Key]++
						}
						if page.Next == "" {
							break
						}
						p.Cursor = page.Next
						h.clock.Advance(time.Microsecond)
					}
					close(stop)
					wg.Wait()
					for _, key := range original {
						assert.Equal(t, 1, seen[key], "original record %q listed once", key)
					}
					for key, n := range seen {
						assert.Equal(t, 1, n, "record %q listed once", key)
					}
				})
			}
		}},
		{"TenantIsolation", func(t *testing.T, h *harness) {
			h.acquireIn(t, "tenant-a", "k1")
			h.acquireIn(t, "tenant-b", "k1")
			h.clock.Advance(time.Second)
			h.indeterminateIn(t, "tenant-b", "k2", "r")
			h.acquireIn(t, "tenant-a\x01", "k3")
			a := h.listAll(t, store.ListParams{Tenant: "tenant-a"}, 10)
			require.Len(t, a, 1)
			assert.Equal(t, "tenant-a", a[0].Tenant)
			b := h.listAll(t, store.ListParams{Tenant: "tenant-b", Order: store.OldestFirst}, 1)
			assert.Equal(t, []string{"k1", "k2"}, keysOf(b))
			for _, r := range b {
				assert.Equal(t, "tenant-b", r.Tenant)
			}
			all := h.listAllAcross(t, store.ListParams{Order: store.OldestFirst}, 1)
			var got []string
			for _, r := range all {
				got = append(got, r.Tenant+"/"+r.Key)
			}
			assert.Equal(t, []string{"tenant-a/k1", "tenant-b/k1", "tenant-a\x01/k3", "tenant-b/k2"}, got)
			// A cursor of one tenant's listing is refused by another's and
			// across tenants.
			page, err := h.s.List(h.ctx, store.ListParams{Tenant: "tenant-b", Limit: 1})
			require.NoError(t, err)
			require.NotEmpty(t, page.Next)
			_, err = h.s.List(h.ctx, store.ListParams{Tenant: "tenant-a", Limit: 1, Cursor: page.Next})
			require.ErrorIs(t, err, store.ErrInvalid)
			_, err = h.s.ListAcrossTenants(h.ctx, store.ListParams{Limit: 1, Cursor: page.Next})
			require.ErrorIs(t, err, store.ErrInvalid)
		}},
		{"FilterStates", func(t *testing.T, h *harness) {
			h.acquire(t, "pending")
			h.completed(t, "completed", []byte("x"))
			h.indeterminate(t, "indeterminate", "r")
			for _, tc := range []struct {
				states []store.State
				want   []string
			}{
				{nil, []string{"completed", "indeterminate", "pending"}},
				{[]store.State{store.StatePending}, []string{"pending"}},
				{[]store.State{store.StateCompleted}, []string{"completed"}},
				{[]store.State{store.StateIndeterminate}, []string{"indeterminate"}},
				{[]store.State{store.StateIndeterminate, store.StatePending, store.StateIndeterminate}, []string{"indeterminate", "pending"}},
			} {
				got := h.listAll(t, store.ListParams{Tenant: h.tenant, States: tc.states, Order: store.OldestFirst}, 10)
				assert.ElementsMatch(t, tc.want, keysOf(got), "states %v", tc.states)
				for _, r := range got {
					assert.Equal(t, r.Key, r.State.String())
				}
			}
		}},
		{"FilterStale", func(t *testing.T, h *harness) {
			dead := h.acquire(t, "dead")
			h.indeterminate(t, "marked", "r")
			h.completed(t, "done", nil)
			h.clock.Advance(h.lease - time.Second)
			h.acquire(t, "alive")
			live := store.ListParams{Tenant: h.tenant, Stale: true}
			assert.Empty(t, h.listAll(t, live, 10), "no lease has run out yet")
			h.clock.Advance(time.Second)
			// The lease ends at LeaseUntil: stale from that instant.
			assert.Equal(t, []string{"dead"}, keysOf(h.listAll(t, live, 10)))
			waiting := store.ListParams{Tenant: h.tenant, Stale: true, States: []store.State{store.StateIndeterminate, store.StatePending}}
			assert.ElementsMatch(t, []string{"dead", "marked"}, keysOf(h.listAll(t, waiting, 10)))
			// A renewal makes it live again.
			_, err := h.s.Renew(h.ctx, store.RenewParams{Tenant: h.tenant, Key: "dead", Token: dead.Token, Lease: h.lease})
			require.NoError(t, err)
			assert.Empty(t, h.listAll(t, live, 10))
		}},
		{"FilterOlderThan", func(t *testing.T, h *harness) {
			h.indeterminate(t, "old", "r")
			h.clock.Advance(10 * time.Minute)
			h.indeterminate(t, "new", "r")
			h.clock.Advance(time.Minute)
			p := store.ListParams{Tenant: h.tenant, OlderThan: 10 * time.Minute}
			assert.Equal(t, []string{"old"}, keysOf(h.listAll(t, p, 10)))
			p.OlderThan = 11 * time.Minute // exactly as old: kept
			assert.Equal(t, []string{"old"}, keysOf(h.listAll(t, p, 10)))
			p.OlderThan = time.Minute
			assert.Equal(t, []string{"new", "old"}, keysOf(h.listAll(t, p, 10)))
			p.OlderThan = time.Hour
			assert.Empty(t, h.listAll(t, p, 10))
		}},
		{"OnlyLiveRecords", func(t *testing.T, h *harness) {
			rel := h.acquire(t, "released")
			require.NoError(t, h.s.Release(h.ctx, store.ReleaseParams{Tenant: h.tenant, Key: "released", Token: rel.Token}))
			h.indeterminate(t, "freed", "r")
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "freed", Decision: store.ActionFree}))
			h.completed(t, "expires", nil)
			h.clock.Advance(h.ttl / 2)
			h.completed(t, "stays", nil)
			h.clock.Advance(h.ttl/2 + time.Second)
			assert.Equal(t, []string{"stays"}, keysOf(h.listAll(t, store.ListParams{Tenant: h.tenant}, 1)))
			assert.Equal(t, []string{"stays"}, keysOf(h.listAllAcross(t, store.ListParams{}, 1)))
			// A key claimed again after its record expired is listed once,
			// at its new claim.
			h.acquire(t, "expires")
			assert.Equal(t, []string{"expires", "stays"}, keysOf(h.listAll(t, store.ListParams{Tenant: h.tenant}, 1)))
		}},
		{"FiltersMayChangeBetweenPages", func(t *testing.T, h *harness) {
			for i := range 4 {
				h.indeterminate(t, fmt.Sprintf("k%d", i), "r")
				h.clock.Advance(time.Millisecond)
			}
			page, err := h.s.List(h.ctx, store.ListParams{Tenant: h.tenant, Order: store.OldestFirst, Limit: 1})
			require.NoError(t, err)
			require.Equal(t, []string{"k0"}, keysOf(page.Records))
			rest := h.listAll(t, store.ListParams{Tenant: h.tenant, Order: store.OldestFirst, Cursor: page.Next, States: []store.State{store.StateIndeterminate}}, 2)
			assert.Equal(t, []string{"k1", "k2", "k3"}, keysOf(rest))
		}},
		{"Refused", func(t *testing.T, h *harness) {
			h.acquire(t, "k")
			h.acquire(t, "k2")
			page, err := h.s.List(h.ctx, store.ListParams{Tenant: h.tenant, Limit: 1})
			require.NoError(t, err)
			require.NotEmpty(t, page.Next)
			newest := page.Next
			for _, tc := range []struct {
				name string
				p    store.ListParams
			}{
				{"no tenant", store.ListParams{}},
				{"unknown state", store.ListParams{Tenant: h.tenant, States: []store.State{9}}},
				{"negative age", store.ListParams{Tenant: h.tenant, OlderThan: -time.Second}},
				{"unknown order", store.ListParams{Tenant: h.tenant, Order: 7}},
				{"negative limit", store.ListParams{Tenant: h.tenant, Limit: -1}},
				{"limit too large", store.ListParams{Tenant: h.tenant, Limit: store.MaxListLimit + 1}},
				{"garbage cursor", store.ListParams{Tenant: h.tenant, Cursor: "not-a-cursor"}},
				{"cursor of the other order", store.ListParams{Tenant: h.tenant, Order: store.OldestFirst, Cursor: newest}},
				{"tenant too long", store.ListParams{Tenant: strings.Repeat("t", store.MaxTenantLength+1)}},
			} {
				_, err := h.s.List(h.ctx, tc.p)
				require.ErrorIs(t, err, store.ErrInvalid, tc.name)
			}
			_, err = h.s.ListAcrossTenants(h.ctx, store.ListParams{Tenant: h.tenant})
			require.ErrorIs(t, err, store.ErrInvalid, "ListAcrossTenants with a tenant")
			_, err = h.s.ListAcrossTenants(h.ctx, store.ListParams{Limit: -1})
			require.ErrorIs(t, err, store.ErrInvalid, "ListAcrossTenants with a negative limit")
		}},
	}
}

// listAll pages through a listing with the given page size and returns
// every record, failing on a page larger than the size.
func (h *harness) listAll(t *testing.T, p store.ListParams, limit int) []store.Record {
	t.Helper()
	return h.pageAll(t, p, limit, h.s.List)
}

func (h *harness) listAllAcross(t *testing.T, p store.ListParams, limit int) []store.Record {
	t.Helper()
	return h.pageAll(t, p, limit, h.s.ListAcrossTenants)
}

func (h *harness) pageAll(t *testing.T, p store.ListParams, limit int, list func(ctx context.Context, p store.ListParams) (store.Page, error)) []store.Record {
	t.Helper()
	p.Limit = limit
	var out []store.Record
	for range 10000 {
		page, err := list(h.ctx, p)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Records), limit, "page size")
		out = append(out, page.Records...)
		if page.Next == "" {
			return out
		}
		p.Cursor = page.Next
	}
	t.Fatal("the listing never ended")
	return nil
}

func keysOf(recs []store.Record) []string {
	keys := []string{}
	for _, r := range recs {
		keys = append(keys, r.Key)
	}
	return keys
}

func backlogCases() []testCase {
	claim := func(t *testing.T, h *harness, tenant, key, activity string) store.Record {
		t.Helper()
		res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: tenant, Key: key, Holder: "h", Lease: h.lease,
			Origin: store.Origin{WorkflowID: "wf", ActivityType: activity}})
		require.NoError(t, err)
		require.Equal(t, store.StatusAcquired, res.Status)
		return res.Record
	}
	mark := func(t *testing.T, h *harness, tenant, key, activity string) {
		t.Helper()
		rec := claim(t, h, tenant, key, activity)
		require.NoError(t, h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: tenant, Key: key, Token: rec.Token, Reason: "r"}))
	}
	return []testCase{
		{"Empty", func(t *testing.T, h *harness) {
			counts, err := h.s.CountBacklog(h.ctx)
			require.NoError(t, err)
			assert.Empty(t, counts)
		}},
		{"PerActivityTypeAcrossTenants", func(t *testing.T, h *harness) {
			mark(t, h, "tenant-a", "k1", "Book")
			mark(t, h, "tenant-b", "k1", "Book")
			mark(t, h, "tenant-b", "k2", "Charge")
			claim(t, h, "tenant-a", "dead", "Book")
			mark(t, h, "tenant-a", "anonymous", "")
			done := claim(t, h, "tenant-a", "done", "Book")
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: "tenant-a", Key: "done", Token: done.Token}))
			counts, err := h.s.CountBacklog(h.ctx)
			require.NoError(t, err)
			assert.Equal(t, []store.BacklogCount{
				{ActivityType: "", Indeterminate: 1},
				{ActivityType: "Book", Indeterminate: 2},
				{ActivityType: "Charge", Indeterminate: 1},
			}, counts, "a pending record within its lease waits for nobody")

			h.clock.Advance(h.lease)
			claim(t, h, "tenant-c", "alive", "Refund")
			counts, err = h.s.CountBacklog(h.ctx)
			require.NoError(t, err)
			assert.Equal(t, []store.BacklogCount{
				{ActivityType: "", Indeterminate: 1},
				{ActivityType: "Book", Indeterminate: 2, Stale: 1},
				{ActivityType: "Charge", Indeterminate: 1},
			}, counts, "the lease ran out: stale")

			h.clock.Advance(h.ttl)
			counts, err = h.s.CountBacklog(h.ctx)
			require.NoError(t, err)
			assert.Equal(t, []store.BacklogCount{
				{ActivityType: "", Indeterminate: 1},
				{ActivityType: "Book", Indeterminate: 2},
				{ActivityType: "Charge", Indeterminate: 1},
			}, counts, "expired pending records wait for nobody; indeterminate ones keep until decided")
		}},
	}
}
