package redisstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv/redisenv"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// needFullIndex names the conformance cases (area/case) that
// Options.IndexOnlyWhatWaits fails by design, and why: each lists, counts
// or sweeps records the option leaves out of the age index (completed
// records, and pending ones within their first lease that nobody
// renewed). TestIndexOnlyWhatWaitsListsWhatWaits proves instead what a
// listing with the option still sees. Every other case runs.
var needFullIndex = map[string]string{
	"List/Ordering":                        "lists pending and completed records",
	"List/Paging":                          "pages through pending records",
	"List/PagingUnderConcurrentInserts":    "pages through pending records",
	"List/TenantIsolation":                 "lists pending records",
	"List/FilterStates":                    "lists pending and completed records",
	"List/FilterStale":                     "lists a holder dead before its first renewal, and completed records",
	"List/OnlyLiveRecords":                 "lists completed records",
	"List/Refused":                         "needs pending records listed for a cursor",
	"Check/ListedWithIt":                   "lists a pending record",
	"Backlog/PerActivityTypeAcrossTenants": "counts a holder dead before its first renewal as stale",
	"Retention/SweepRemovesExpiredOnly":    "sweeps completed and pending records (Redis's PX expires them)",
	"Retention/SweepDefaultLimit":          "sweeps completed records (Redis's PX expires them)",
	"OwnRetention/LongerThanTheTTL":        "sweeps completed records (Redis's PX expires them)",
	"OwnRetention/ShorterThanTheTTL":       "sweeps completed records (Redis's PX expires them)",
}

// The whole conformance suite with Options.IndexOnlyWhatWaits, but for the
// cases needFullIndex names, which are skipped with their reason. A name
// there that no longer matches a case fails the test, so the list cannot
// silently outlive a renamed case.
func TestConformanceIndexOnlyWhatWaits(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		skipped = map[string]bool{}
	)
	t.Cleanup(func() { // After every case: Run's cases are parallel subtests.
		for name := range needFullIndex {
			assert.True(t, skipped[name], "needFullIndex names %q, which is no conformance case", name)
		}
	})
	parent := t.Name() + "/"
	storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
		name := strings.TrimPrefix(t.Name(), parent)
		if reason, ok := needFullIndex[name]; ok {
			mu.Lock()
			skipped[name] = true
			mu.Unlock()
			t.Skip("needs the full age index: " + reason)
		}
		return newStore(t, redisstore.Options{Clock: cfg.Clock, TTL: cfg.TTL, PollInterval: 20 * time.Millisecond, IndexOnlyWhatWaits: true})
	})
}

// With Options.IndexOnlyWhatWaits, a listing of what waits (stale or
// indeterminate) and CountBacklog still see every record that waits for a
// person: one marked indeterminate, a takeover left stale, a renewed claim
// left stale. A claim whose holder died before its first renewal, and that
// no retry took over, is not seen: the option's documented gap, asserted
// here so that a change of behaviour is noticed. A fresh claim, completed
// or not, adds no index entry.
func TestIndexOnlyWhatWaitsListsWhatWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	s, client := newStoreClient(t, redisstore.Options{Clock: clock, TTL: time.Hour, IndexOnlyWhatWaits: true})
	const tenant, lease = "t", time.Minute
	origin := store.Origin{WorkflowID: "wf", ActivityType: "Book"}
	claim := func(key string, supersede int64) store.Record {
		t.Helper()
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: tenant, Key: key, Holder: "h", Lease: lease, Origin: origin, Supersede: supersede})
		require.NoError(t, err)
		require.Equal(t, store.StatusAcquired, res.Status, "claim of %q", key)
		return res.Record
	}
	indexed := func(key string) bool {
		t.Helper()
		_, err := client.ZScore(ctx, redisstore.AgeKey(s, tenant), key).Result()
		if err == redis.Nil {
			return false
		}
		require.NoError(t, err)
		return true
	}

	marked := claim("marked", 0)
	require.False(t, indexed("marked"), "a claim of a free key adds no index entry")
	require.NoError(t, s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: tenant, Key: "marked", Token: marked.Token, Reason: "r"}))
	first := claim("taken-over", 0)
	claim("taken-over", first.Token) // A retry takes it over, then dies too.
	renewed := claim("renewed", 0)
	clock.Advance(lease / 2)
	_, err := s.Renew(ctx, store.RenewParams{Tenant: tenant, Key: "renewed", Token: renewed.Token, Lease: lease})
	require.NoError(t, err)
	claim("abandoned", 0) // Its holder dies before its first renewal.
	done := claim("done", 0)
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: "done", Token: done.Token, Outcome: []byte("o")}))
	assert.False(t, indexed("done"), "a completed record is not indexed")

	clock.Advance(lease + time.Second) // Every lease has run out.
	waiting := store.ListParams{Tenant: tenant, Stale: true, States: []store.State{store.StateIndeterminate, store.StatePending}}
	assert.ElementsMatch(t, []string{"marked", "taken-over", "renewed"}, keysOf(listAll(t, s.List, waiting)))
	waiting.Tenant = ""
	assert.ElementsMatch(t, []string{"marked", "taken-over", "renewed"}, keysOf(listAll(t, s.ListAcrossTenants, waiting)))
	counts, err := s.CountBacklog(ctx)
	require.NoError(t, err)
	assert.Equal(t, []store.BacklogCount{{ActivityType: "Book", Indeterminate: 1, Stale: 2}}, counts)

	// The documented gap: the abandoned claim waits as much as the others,
	// but nothing indexed it.
	rec, err := s.Lookup(ctx, store.LookupParams{Tenant: tenant, Key: "abandoned"})
	require.NoError(t, err)
	require.Equal(t, store.StatePending, rec.State)
	require.False(t, clock.Now().Before(rec.LeaseUntil), "its lease ran out: it waits")
	assert.False(t, indexed("abandoned"), "a claim abandoned before its first renewal is not indexed (the documented gap)")
	// The retry that comes for it takes it over through the claim script,
	// which lists it; its holder dying in turn leaves it listed.
	claim("abandoned", rec.Token)
	clock.Advance(lease + time.Second)
	assert.Contains(t, keysOf(listAll(t, s.List, store.ListParams{Tenant: tenant, Stale: true})), "abandoned")
}

// A renewal or a mark lists the record at its own claim time, even when
// the index holds an entry of an earlier record of the key (one Redis
// expired before a Sweep dropped its entry), which List would skip.
func TestIndexOnlyWhatWaitsMovesAnEarlierEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	s, client := newStoreClient(t, redisstore.Options{Clock: clock, TTL: time.Hour, IndexOnlyWhatWaits: true})
	age := redisstore.AgeKey(s, "t")
	for _, key := range []string{"renewed", "marked"} {
		require.NoError(t, client.ZAdd(ctx, age, redis.Z{Score: float64(clock.Now().Add(-time.Hour).UnixMicro()), Member: key}).Err())
	}
	clock.Advance(time.Second)
	renewed := claimOK(t, s, "t", "renewed")
	_, err := s.Renew(ctx, store.RenewParams{Tenant: "t", Key: "renewed", Token: renewed.Token, Lease: time.Minute})
	require.NoError(t, err)
	marked := claimOK(t, s, "t", "marked")
	require.NoError(t, s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: "t", Key: "marked", Token: marked.Token}))
	for _, r := range []store.Record{renewed, marked} {
		score, err := client.ZScore(ctx, age, r.Key).Result()
		require.NoError(t, err)
		assert.Equal(t, float64(r.CreatedAt.UnixMicro()), score, "%s: scored by its own claim", r.Key)
	}
	page, err := s.List(ctx, store.ListParams{Tenant: "t"})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"renewed", "marked"}, keysOf(page.Records))
}

// With Options.IndexOnlyWhatWaits, Forget still erases every record of the
// tenant, indexed or not (it scans the tenant's record keys once the index
// is empty): a SCAN of the tenant's hash tag finds nothing after it.
// Another tenant's keys are untouched.
func TestIndexOnlyWhatWaitsForgetLeavesNothing(t *testing.T) {
	t.Parallel()
	s, client := newStoreClient(t, redisstore.Options{IndexOnlyWhatWaits: true})
	ctx := context.Background()
	for _, tenant := range []string{"acme", "globex"} {
		recordEachState(t, s, tenant)
		renewed := claimOK(t, s, tenant, "renewed")
		_, err := s.Renew(ctx, store.RenewParams{Tenant: tenant, Key: "renewed", Token: renewed.Token, Lease: time.Minute})
		require.NoError(t, err)
	}
	scan := func(tenant string) []string { return tenantKeys(t, client, s, tenant) }
	n, err := client.ZCard(ctx, redisstore.AgeKey(s, "acme")).Result()
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "only the indeterminate and the renewed record are indexed: the test needs unindexed ones")
	require.Len(t, scan("acme"), 5, "four records and the age index")

	forgot, err := s.Forget(ctx, store.ForgetParams{Tenant: "acme"})
	require.NoError(t, err)
	assert.Equal(t, 4, forgot)
	assert.Empty(t, scan("acme"), "keys of the forgotten tenant left in Redis")
	assert.Len(t, scan("globex"), 5, "another tenant's keys")
}

// With Options.IndexOnlyWhatWaits, Sweep deletes the expired records it
// can see (the indexed ones) and ignores the others, which Redis expires
// by their PX: every record has a time to live. An expired unindexed
// record reads as gone and its key can be claimed again.
func TestIndexOnlyWhatWaitsSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	s, client := newStoreClient(t, redisstore.Options{Clock: clock, TTL: time.Hour, IndexOnlyWhatWaits: true})
	done := claimOK(t, s, "t", "completed")
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "completed", Token: done.Token}))
	claimOK(t, s, "t", "pending")
	renewed := claimOK(t, s, "t", "renewed")
	_, err := s.Renew(ctx, store.RenewParams{Tenant: "t", Key: "renewed", Token: renewed.Token, Lease: time.Minute})
	require.NoError(t, err)
	for _, key := range []string{"completed", "pending", "renewed"} {
		ttl, err := client.PTTL(ctx, redisstore.RecordKey(s, "t", key)).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, "%s: Redis expires it", key)
	}

	clock.Advance(2 * time.Hour)
	n, err := s.Sweep(ctx, store.SweepParams{})
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the indexed record is swept")
	for _, key := range []string{"completed", "pending", "renewed"} {
		_, err := s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: key})
		assert.ErrorIs(t, err, store.ErrNotFound, "%s: expired", key)
	}
	claimOK(t, s, "t", "pending") // An expired record still in Redis is free.
	n, err = s.Sweep(ctx, store.SweepParams{})
	require.NoError(t, err)
	assert.Zero(t, n)
}

// commandLog records the commands a client sends, one line per command
// (a pipeline's commands each on their own), by name.
type commandLog struct {
	mu   sync.Mutex
	cmds []string
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.add(cmd)
		return next(ctx, cmd)
	}
}

func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			l.add(c)
		}
		return next(ctx, cmds)
	}
}

func (l *commandLog) add(c redis.Cmder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cmds = append(l.cmds, strings.ToLower(c.Name()))
}

func (l *commandLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.cmds
	l.cmds = nil
	return c
}

// With Options.IndexOnlyWhatWaits a claim of a free key is one command,
// SET NX GET PX, and a duplicate's claim too; without it, a MULTI with the
// age index's ZADD.
func TestIndexOnlyWhatWaitsClaimIsOneCommand(t *testing.T) {
	t.Parallel()
	_, prefix := redisenv.Redis(t) // Cleans the prefix when the test ends.
	client := redis.NewClient(&redis.Options{Addr: redisenv.RedisAddr()})
	t.Cleanup(func() { _ = client.Close() })
	log := &commandLog{}
	client.AddHook(log)
	ctx := context.Background()
	for _, tt := range []struct {
		sparse bool
		want   []string
	}{
		{true, []string{"set"}},
		{false, []string{"multi", "set", "zadd", "exec"}},
	} {
		s, err := redisstore.New(client, redisstore.Options{Prefix: prefix, IndexOnlyWhatWaits: tt.sparse})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, s.Close()) })
		key := "k-" + map[bool]string{true: "sparse", false: "full"}[tt.sparse]
		claimOK(t, s, "t", "warm-"+key) // The server clock's first sync, the index's first PEXPIREs.
		log.take()
		claimOK(t, s, "t", key)
		assert.Equal(t, tt.want, log.take(), "sparse %v: a claim of a free key", tt.sparse)
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: key, Holder: "dup", Lease: time.Minute})
		require.NoError(t, err)
		require.Equal(t, store.StatusHeld, res.Status)
		assert.Equal(t, tt.want, log.take(), "sparse %v: a duplicate's claim", tt.sparse)
	}
}

// listAll pages through a listing with list, the records of every page.
func listAll(t *testing.T, list func(context.Context, store.ListParams) (store.Page, error), p store.ListParams) []store.Record {
	t.Helper()
	var out []store.Record
	for {
		page, err := list(context.Background(), p)
		require.NoError(t, err)
		out = append(out, page.Records...)
		if page.Next == "" {
			return out
		}
		p.Cursor = page.Next
	}
}

// keysOf returns the keys of recs, in order.
func keysOf(recs []store.Record) []string {
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	return keys
}
