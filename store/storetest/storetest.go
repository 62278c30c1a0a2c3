package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// Config is what [Run] hands the store constructor for each case. The store
// must read time only from Clock and keep records for TTL.
type Config struct {
	// Clock is the case's own fake clock, starting at a wall time near the
	// moment the case began, truncated to a millisecond. The store must use
	// it for every timestamp and every expiry decision.
	Clock *Clock
	// TTL is the retention window the store must apply.
	TTL time.Duration
}

// DefaultTestTTL is the retention window [Run] gives every store.
const DefaultTestTTL = time.Hour

// DefaultTestLease is the lease the cases claim keys with.
const DefaultTestLease = time.Minute

// timeTolerance is how far a store's timestamps may be from the expected
// ones: durable stores keep milliseconds or microseconds.
const timeTolerance = time.Millisecond

// waitBound only keeps a broken store from hanging the suite; it is not a
// timing assertion.
const waitBound = 5 * time.Second

// Run proves that a store keeps the [store.Store] contract. It calls newStore
// once per case, each with its own [Clock] and the TTL in [Config], and runs
// the cases in parallel. newStore must return a store that shares no records
// with any other store it returned (its own schema, table or key prefix),
// and should register its own cleanup with t.Cleanup.
//
// The cases are grouped by area: Claim, Fence, Wait, Resolve, Trail, ResolveGone, StaleResolve, List, Backlog, Tenant,
// Retention, OwnRetention, Check, Outcome, Validation and Undo.
func Run(t *testing.T, newStore func(t *testing.T, cfg Config) store.Store) {
	t.Helper()
	for _, a := range areas() {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range a.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, newHarness(t, newStore))
				})
			}
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, h *harness)
}

type area struct {
	name  string
	cases []testCase
}

func areas() []area {
	return []area{
		{"Claim", claimCases()},
		{"Origin", originCases()},
		{"Fence", fenceCases()},
		{"Wait", waitCases()},
		{"Resolve", resolveCases()},
		{"Trail", trailCases()},
		{"ResolveGone", goneCases()},
		{"StaleResolve", staleCases()},
		{"List", listCases()},
		{"Backlog", backlogCases()},
		{"Tenant", tenantCases()},
		{"Retention", retentionCases()},
		{"OwnRetention", ownRetentionCases()},
		{"Check", checkCases()},
		{"Outcome", outcomeCases()},
		{"Validation", validationCases()},
		{"Undo", undoCases()},
	}
}

// harness is one case's store, clock and defaults.
type harness struct {
	s      store.Store
	clock  *Clock
	ttl    time.Duration
	lease  time.Duration
	tenant string
	ctx    context.Context
}

func newHarness(t *testing.T, newStore func(t *testing.T, cfg Config) store.Store) *harness {
	t.Helper()
	clock := NewClock(time.Now().UTC().Truncate(time.Millisecond))
	s := newStore(t, Config{Clock: clock, TTL: DefaultTestTTL})
	require.NotNil(t, s, "newStore returned a nil store")
	return &harness{
		s:      s,
		clock:  clock,
		ttl:    DefaultTestTTL,
		lease:  DefaultTestLease,
		tenant: "tenant-a",
		ctx:    t.Context(),
	}
}
