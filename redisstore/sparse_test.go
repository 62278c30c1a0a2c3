package redisstore_test

import (
	"context"
	"strconv"
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

// The whole conformance suite with Options.IndexOnlyWhatWaits, every case
// included: the listings, counts and sweeps of a prefix whose claims are
// not all indexed walk the record keys (the store marks the prefix before
// its first such claim), so they see every record, as the contract says.
func TestConformanceIndexOnlyWhatWaits(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
		return newStore(t, redisstore.Options{Clock: cfg.Clock, TTL: cfg.TTL, PollInterval: 20 * time.Millisecond, IndexOnlyWhatWaits: true})
	})
}

// With Options.IndexOnlyWhatWaits, a listing of what waits (stale or
// indeterminate) and CountBacklog see every record that waits for a
// person: one marked indeterminate, a takeover left stale, a renewed claim
// left stale, and a claim whose holder died before its first renewal,
// which no index lists (issue 43: it used to be the option's gap). A store
// opened without the option on the same prefix, as idempotencyctl opens
// it, sees the same. A fresh claim, completed or not, still adds no index
// entry.
func TestIndexOnlyWhatWaitsListsWhatWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	s, client := newStoreClient(t, redisstore.Options{Clock: clock, TTL: time.Hour, IndexOnlyWhatWaits: true})
	operator, err := redisstore.New(client, redisstore.Options{Prefix: redisstore.Prefix(s), Clock: clock, TTL: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, operator.Close()) })
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
	_, err = s.Renew(ctx, store.RenewParams{Tenant: tenant, Key: "renewed", Token: renewed.Token, Lease: lease})
	require.NoError(t, err)
	claim("abandoned", 0) // Its holder dies before its first renewal.
	done := claim("done", 0)
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: "done", Token: done.Token, Outcome: []byte("o")}))
	assert.False(t, indexed("done"), "a completed record is not indexed")
	assert.False(t, indexed("abandoned"), "a claim abandoned before its first renewal is not indexed")

	clock.Advance(lease + time.Second) // Every lease has run out.
	waiting := []string{"marked", "taken-over", "renewed", "abandoned"}
	for name, st := range map[string]*redisstore.Store{"with the option": s, "without it": operator} {
		p := store.ListParams{Tenant: tenant, Stale: true, States: []store.State{store.StateIndeterminate, store.StatePending}}
		assert.ElementsMatch(t, waiting, keysOf(listAll(t, st.List, p)), "%s: List", name)
		p.Tenant = ""
		assert.ElementsMatch(t, waiting, keysOf(listAll(t, st.ListAcrossTenants, p)), "%s: ListAcrossTenants", name)
		counts, err := st.CountBacklog(ctx)
		require.NoError(t, err)
		assert.Equal(t, []store.BacklogCount{{ActivityType: "Book", Indeterminate: 1, Stale: 3}}, counts, "%s: CountBacklog", name)
		all := listAll(t, st.List, store.ListParams{Tenant: tenant, Order: store.OldestFirst})
		assert.Equal(t, []string{"marked", "renewed", "taken-over", "abandoned", "done"}, keysOf(all), "%s: every live record, oldest first", name)
	}
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

// With Options.IndexOnlyWhatWaits, Sweep deletes every expired record,
// indexed or not (it walks the record keys once the prefix is marked), and
// nothing live; Redis's own expiry (PX) would reclaim the unindexed ones
// anyway. An expired record reads as gone and its key can be claimed
// again. A store without the option on the same prefix sweeps the same.
func TestIndexOnlyWhatWaitsSweep(t *testing.T) {
	t.Parallel()
	for _, sweeper := range []string{"with the option", "without it"} {
		t.Run(sweeper, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clock := storetest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
			s, client := newStoreClient(t, redisstore.Options{Clock: clock, TTL: time.Hour, IndexOnlyWhatWaits: true})
			sweep := s
			if sweeper == "without it" {
				var err error
				sweep, err = redisstore.New(client, redisstore.Options{Prefix: redisstore.Prefix(s), Clock: clock, TTL: time.Hour})
				require.NoError(t, err)
				t.Cleanup(func() { assert.NoError(t, sweep.Close()) })
			}
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
			claimOK(t, s, "t", "live") // Claimed after the others expired: stays.
			n, err := sweep.Sweep(ctx, store.SweepParams{Limit: 2})
			require.NoError(t, err)
			assert.Equal(t, 2, n, "the limit holds across the index and the walk")
			n, err = sweep.Sweep(ctx, store.SweepParams{})
			require.NoError(t, err)
			assert.Equal(t, 1, n, "every expired record is swept, indexed or not")
			for _, key := range []string{"completed", "pending", "renewed"} {
				_, err := s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: key})
				assert.ErrorIs(t, err, store.ErrNotFound, "%s: expired", key)
				n, err := client.Exists(ctx, redisstore.RecordKey(s, "t", key)).Result()
				require.NoError(t, err)
				assert.Zero(t, n, "%s: deleted", key)
			}
			_, err = s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "live"})
			require.NoError(t, err, "a live record is not swept")
			n, err = sweep.Sweep(ctx, store.SweepParams{})
			require.NoError(t, err)
			assert.Zero(t, n)
		})
	}
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

// The prefix is marked (P:unindexed) before the first claim that no index
// lists, by a store with Options.IndexOnlyWhatWaits only; a claim of a
// store without it leaves no mark. While the mark stands, a store without
// the option lists from the record keys and sees the unindexed claim;
// without it, from the index (so the mark is what makes the operator's
// listing see what the option leaves out).
func TestIndexOnlyWhatWaitsMarksThePrefix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	plain, client := newStoreClient(t, redisstore.Options{})
	sparse, err := redisstore.New(client, redisstore.Options{Prefix: redisstore.Prefix(plain), IndexOnlyWhatWaits: true})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sparse.Close()) })
	mark := redisstore.Prefix(plain) + ":unindexed"
	marked := func() bool {
		t.Helper()
		n, err := client.Exists(ctx, mark).Result()
		require.NoError(t, err)
		return n == 1
	}

	claimOK(t, plain, "t", "indexed")
	require.False(t, marked(), "a claim of a store without the option marks nothing")
	claimOK(t, sparse, "t", "unindexed")
	require.True(t, marked(), "a claim of a store with the option marks the prefix")
	ttl, err := client.PTTL(ctx, mark).Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), ttl, "the mark never expires")
	held := store.ListParams{Tenant: "t", States: []store.State{store.StatePending}}
	assert.ElementsMatch(t, []string{"indexed", "unindexed"}, keysOf(listAll(t, plain.List, held)))

	require.NoError(t, client.Del(ctx, mark).Err())
	assert.Equal(t, []string{"indexed"}, keysOf(listAll(t, plain.List, held)), "without the mark: the index alone")
	page, err := plain.ListByScan(ctx, held)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"indexed", "unindexed"}, keysOf(page.Records), "ListByScan trusts no index")
}

// ListByScan finds every live record of the tenant whatever the indexes
// hold, in the listing's order and pages: here records whose index entry
// was lost, a record hash of the previous layout no index lists, and none
// of another tenant's (whose tenant's encoding shares a beginning).
func TestListByScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	s, client := newStoreClient(t, redisstore.Options{Clock: clock})
	var want []string
	for i := range 7 {
		key := "k" + strconv.Itoa(i)
		claimOK(t, s, "acme", key)
		claimOK(t, s, "acme2", key)
		want = append(want, key)
		if i%3 == 0 {
			clock.Advance(time.Millisecond)
		}
	}
	require.NoError(t, client.ZRem(ctx, redisstore.AgeKey(s, "acme"), "k1", "k4").Err(), "index entries lost")
	now := clock.Now().UnixMicro()
	old := redisstore.RecordKey(s, "acme", "old")
	require.NoError(t, client.HSet(ctx, old, "state", "indeterminate", "holder", "h", "token", "7", "lease", now,
		"exp", store.NeverExpires.UnixMicro(), "created", now, "updated", now).Err())
	want = append(want, "old")

	index := listAll(t, s.List, store.ListParams{Tenant: "acme", Order: store.OldestFirst})
	assert.Len(t, index, 5, "List reads the age index: the test needs records it misses")
	for _, limit := range []int{1, 3, 8, 100} {
		var got []store.Record
		p := store.ListParams{Tenant: "acme", Order: store.OldestFirst, Limit: limit}
		for {
			page, err := s.ListByScan(ctx, p)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page.Records), limit)
			got = append(got, page.Records...)
			if page.Next == "" {
				break
			}
			p.Cursor = page.Next
		}
		assert.Equal(t, want, keysOf(got), "limit %d", limit)
		for _, r := range got {
			assert.Equal(t, "acme", r.Tenant)
		}
	}
	page, err := s.ListByScan(ctx, store.ListParams{Tenant: "acme", States: []store.State{store.StateIndeterminate}})
	require.NoError(t, err)
	assert.Equal(t, []string{"old"}, keysOf(page.Records), "filters apply")
	_, err = s.ListByScan(ctx, store.ListParams{})
	assert.ErrorIs(t, err, store.ErrInvalid)
}

// With ReplicaAcks, the mark waits for the replicas as a claim does; a
// Redis without replicas acknowledges neither, and the claim, listed as
// without the option so that no record misses both the index and the
// mark, fails as every claim there does (ErrNotReplicated). A claim that
// finds the key held still answers.
func TestIndexOnlyWhatWaitsMarkNotReplicated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	plain, client := newStoreClient(t, redisstore.Options{})
	acked, err := redisstore.New(client, redisstore.Options{Prefix: redisstore.Prefix(plain), IndexOnlyWhatWaits: true,
		ReplicaAcks: 1, ReplicaAckTimeout: 5 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, acked.Close()) })
	log := &commandLog{}
	client.AddHook(log)

	_, err = acked.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.ErrorIs(t, err, redisstore.ErrNotReplicated)
	assert.Contains(t, log.take(), "zadd", "the claim fell back to the indexed path")
	_, err = plain.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "k"})
	require.ErrorIs(t, err, store.ErrNotFound, "the unacknowledged claim was taken back")
	claimOK(t, plain, "t", "k")
	res, err := acked.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "dup", Lease: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, store.StatusHeld, res.Status)
}
