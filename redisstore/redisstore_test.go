package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tesserix/idempotency/internal/optdoc"
	"github.com/tesserix/idempotency/internal/testenv/redisenv"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newStore returns a Store on its own client and prefix, closed when t ends.
func newStore(t testing.TB, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	s, _ := newStoreClient(t, opts)
	return s
}

// newStoreClient is newStore that also returns the store's client.
func newStoreClient(t testing.TB, opts redisstore.Options) (*redisstore.Store, redis.UniversalClient) {
	t.Helper()
	client, prefix := redisenv.Redis(t)
	if opts.Prefix == "" {
		opts.Prefix = prefix
	}
	s, err := redisstore.New(client, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, client
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
		return newStore(t, redisstore.Options{Clock: cfg.Clock, TTL: cfg.TTL, PollInterval: 20 * time.Millisecond})
	})
}

func TestNewValidatesOptions(t *testing.T) {
	t.Parallel()
	client, _ := redisenv.Redis(t)
	tests := []struct {
		name  string
		opts  redisstore.Options
		field string // empty: valid
	}{
		{"ZeroValue", redisstore.Options{}, ""},
		{"Full", redisstore.Options{Prefix: "app:idem", TTL: time.Minute, Clock: store.SystemClock{}, PollInterval: time.Second}, ""},
		{"PrefixOpenBrace", redisstore.Options{Prefix: "a{b"}, "Prefix"},
		{"PrefixCloseBrace", redisstore.Options{Prefix: "a}b"}, "Prefix"},
		{"PrefixGlob", redisstore.Options{Prefix: "a*"}, "Prefix"},
		{"PrefixInvalidUTF8", redisstore.Options{Prefix: "a\xff"}, "Prefix"},
		{"PrefixTooLong", redisstore.Options{Prefix: strings.Repeat("p", redisstore.MaxPrefixLength+1)}, "Prefix"},
		{"NegativeTTL", redisstore.Options{TTL: -time.Second}, "TTL"},
		{"SubMillisecondTTL", redisstore.Options{TTL: time.Microsecond}, "TTL"},
		{"NegativePollInterval", redisstore.Options{PollInterval: -time.Second}, "PollInterval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := redisstore.New(client, tt.opts)
			if tt.field == "" {
				require.NoError(t, err)
				require.NoError(t, s.Close())
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "redisstore.Options."+tt.field)
			var ie *store.InvalidError
			require.ErrorAs(t, err, &ie, "a typed error")
			assert.Equal(t, "redisstore.Options."+tt.field, ie.Field)
			assert.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, s)
		})
	}
	_, err := redisstore.New(nil, redisstore.Options{})
	assert.ErrorIs(t, err, store.ErrInvalid, "a nil client")
}

// hashTag returns the Cluster hash tag of a Redis key: what lies between the
// first '{' and the first '}' after it.
func hashTag(t *testing.T, key string) string {
	t.Helper()
	open := strings.IndexByte(key, '{')
	require.GreaterOrEqual(t, open, 0, "key %q has no hash tag", key)
	closing := strings.IndexByte(key[open+1:], '}')
	require.Greater(t, closing, 0, "key %q has no non-empty hash tag", key)
	return key[open+1 : open+1+closing]
}

func TestAwkwardTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t, redisstore.Options{}), t.Context()
	tenants := []string{"{", "}", "{}", "}{", "a}b", "{a}", "{a", "a}", ":", "::", "a:b", "a:}:b", "🔑", "{🔑}", "🔑:{x}", "r:k", "idx", "{x}:idx"}
	tags := make(map[string]string)
	for _, tenant := range tenants {
		acquired := claimOK(t, s, tenant, "k")
		require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: "k", Token: acquired.Token, Outcome: []byte(tenant)}))
		// A key that looks like the layout's own separators.
		claimOK(t, s, tenant, "}:idx")
		claimOK(t, s, tenant, "}:age")

		tag := hashTag(t, redisstore.RecordKey(s, tenant, "k"))
		assert.Equal(t, tag, hashTag(t, redisstore.RecordKey(s, tenant, "}:idx")), "one tenant, one slot")
		assert.Equal(t, tag, hashTag(t, redisstore.AgeKey(s, tenant)), "the age index shares the tenant's slot")
		assert.Equal(t, tag, hashTag(t, redisstore.TenantChannel(s, tenant)), "so does the sharded channel")
		other, dup := tags[tag]
		require.False(t, dup, "tenants %q and %q share hash tag %q", other, tenant, tag)
		tags[tag] = tenant
	}
	for _, tenant := range tenants {
		rec, err := s.Lookup(ctx, store.LookupParams{Tenant: tenant, Key: "k"})
		require.NoError(t, err, "tenant %q", tenant)
		assert.Equal(t, []byte(tenant), rec.Outcome, "tenant %q sees its own outcome", tenant)
	}

	n, err := s.Forget(ctx, store.ForgetParams{Tenant: "{a}"})
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	for _, tenant := range tenants {
		_, err := s.Lookup(ctx, store.LookupParams{Tenant: tenant, Key: "k"})
		if tenant == "{a}" {
			assert.ErrorIs(t, err, store.ErrNotFound)
		} else {
			assert.NoError(t, err, "forgetting {a} left tenant %q alone", tenant)
		}
	}
}

func TestRandomTenantsNeverCollide(t *testing.T) {
	t.Parallel()
	s := newStore(t, redisstore.Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("{}:ab🔑é\x1f*?[]\\/")
	seen := make(map[string]bool)
	for len(seen) < 300 {
		n := 1 + rng.IntN(6)
		rs := make([]rune, n)
		for i := range rs {
			rs[i] = alphabet[rng.IntN(len(alphabet))]
		}
		tenant := string(rs)
		if seen[tenant] {
			continue
		}
		seen[tenant] = true
		// Every distinct tenant finds the key free: no other tenant's
		// record sits under the same Redis key.
		claimOK(t, s, tenant, "k")
	}
}

func TestClosedClientIsUnavailable(t *testing.T) {
	t.Parallel()
	_, prefix := redisenv.Redis(t) // Its client cleans up after the one closed here.
	client := redis.NewClient(&redis.Options{Addr: redisenv.RedisAddr()})
	s, err := redisstore.New(client, redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	held := claimOK(t, s, "tenant", "held")
	require.NoError(t, client.Close())

	for _, op := range allOps(held.Token) {
		t.Run(op.name, func(t *testing.T) {
			err := op.call(t.Context(), s, "tenant", "held")
			require.ErrorIs(t, err, store.ErrUnavailable)
			assert.ErrorIs(t, err, redis.ErrClosed, "the cause stays visible")
		})
	}
}

func TestCancelledContextReturnsContextError(t *testing.T) {
	t.Parallel()
	s := newStore(t, redisstore.Options{})
	held := claimOK(t, s, "tenant", "held")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, op := range allOps(held.Token) {
		t.Run(op.name, func(t *testing.T) {
			err := op.call(ctx, s, "tenant", "held")
			require.ErrorIs(t, err, context.Canceled)
			assert.NotErrorIs(t, err, store.ErrUnavailable, "the caller's cancel is not an outage")
		})
	}
	_, err := s.Lookup(t.Context(), store.LookupParams{Tenant: "tenant", Key: "fresh"})
	assert.ErrorIs(t, err, store.ErrNotFound, "a cancelled Claim left no claim behind")
}

// The scripts publish a change only when a Wait registered on the record:
// the hot path, a claim and complete nobody waits on, publishes nothing.
// Every unwatched change below runs first; the first message the channel
// carries must be the watched key's.
func TestScriptsPublishOnlyWhenWaited(t *testing.T) {
	t.Parallel()
	client, prefix := redisenv.Redis(t)
	s, err := redisstore.New(client, redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	redisstore.DisablePolling(s)
	ctx := t.Context()

	ps := client.Subscribe(ctx, redisstore.Channel(s))
	t.Cleanup(func() { _ = ps.Close() })
	_, err = ps.Receive(ctx) // The subscription's confirmation.
	require.NoError(t, err)

	// Unwatched: every change a script makes, none of them published.
	rec := claimOK(t, s, "tenant", "completed")
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "tenant", Key: "completed", Token: rec.Token, Outcome: []byte("x")}))
	rec = claimOK(t, s, "tenant", "released")
	require.NoError(t, s.Release(ctx, store.ReleaseParams{Tenant: "tenant", Key: "released", Token: rec.Token}))
	rec = claimOK(t, s, "tenant", "resolved")
	require.NoError(t, s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: "tenant", Key: "resolved", Token: rec.Token, Reason: "lost"}))
	require.NoError(t, s.Resolve(ctx, store.ResolveParams{Tenant: "tenant", Key: "resolved", Decision: store.ActionFree}))
	rec = claimOK(t, s, "tenant", "superseded")
	res, err := s.Claim(ctx, store.ClaimParams{Tenant: "tenant", Key: "superseded", Holder: "h", Lease: time.Minute, Supersede: rec.Token})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status)
	_, err = s.Renew(ctx, store.RenewParams{Tenant: "tenant", Key: "superseded", Token: res.Record.Token, Lease: time.Minute})
	require.NoError(t, err)

	// Watched: the Wait registers on the record, and its Complete publishes.
	rec = claimOK(t, s, "tenant", "watched")
	done := make(chan store.Result, 1)
	go func() {
		res, err := s.Wait(ctx, store.WaitParams{Tenant: "tenant", Key: "watched", Token: rec.Token})
		assert.NoError(t, err)
		done <- res
	}()
	rk := redisstore.RecordKey(s, "tenant", "watched")
	require.Eventually(t, func() bool {
		m, err := redisstore.Unpack(client.Get(ctx, rk).Val())
		return err == nil && m["w"] == "1"
	}, 5*time.Second, time.Millisecond, "the Wait registers on the record")
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "tenant", Key: "watched", Token: rec.Token, Outcome: []byte("x")}))
	recvCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msg, err := ps.ReceiveMessage(recvCtx)
	require.NoError(t, err)
	assert.Equal(t, rk, msg.Payload, "the first change published is the watched one")
	assert.Equal(t, store.StatusCompleted, (<-done).Status)
}

func TestWaitWakesOnNotification(t *testing.T) {
	t.Parallel()
	s, client := newStoreClient(t, redisstore.Options{})
	redisstore.DisablePolling(s)
	ctx := t.Context()
	tests := []struct {
		name   string
		finish func(rec store.Record) error
		want   store.Status
	}{
		{"Complete", func(rec store.Record) error {
			return s.Complete(ctx, store.CompleteParams{Tenant: rec.Tenant, Key: rec.Key, Token: rec.Token, Outcome: []byte("done")})
		}, store.StatusCompleted},
		{"Release", func(rec store.Record) error {
			return s.Release(ctx, store.ReleaseParams{Tenant: rec.Tenant, Key: rec.Key, Token: rec.Token})
		}, store.StatusFree},
		{"MarkIndeterminate", func(rec store.Record) error {
			return s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: rec.Tenant, Key: rec.Key, Token: rec.Token, Reason: "lost"})
		}, store.StatusIndeterminate},
		{"Forget", func(rec store.Record) error {
			_, err := s.Forget(ctx, store.ForgetParams{Tenant: rec.Tenant})
			return err
		}, store.StatusFree},
	}
	for _, tt := range tests {
		// Sequential: the subscriber count below is the store's, shared.
		t.Run(tt.name, func(t *testing.T) {
			rec := claimOK(t, s, "tenant-"+tt.name, "k")
			done := make(chan store.Result, 1)
			waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			go func() {
				res, err := s.Wait(waitCtx, store.WaitParams{Tenant: rec.Tenant, Key: rec.Key, Token: rec.Token})
				assert.NoError(t, err, "without polling, only a notification can end this Wait")
				done <- res
			}()
			require.Eventually(t, func() bool {
				n, err := client.PubSubNumSub(ctx, redisstore.Channel(s)).Result()
				return err == nil && n[redisstore.Channel(s)] >= 1
			}, 5*time.Second, 5*time.Millisecond, "the store subscribes on the first Wait")
			require.NoError(t, tt.finish(rec))
			assert.Equal(t, tt.want, (<-done).Status)
		})
	}
}

func TestSweepDropsIndexEntriesOfVanishedRecords(t *testing.T) {
	t.Parallel()
	client, prefix := redisenv.Redis(t)
	s, err := redisstore.New(client, redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	ctx := t.Context()
	claimOK(t, s, "tenant", "gone")
	claimOK(t, s, "tenant", "live")
	// As if Redis had expired the record physically.
	require.NoError(t, client.Del(ctx, redisstore.RecordKey(s, "tenant", "gone")).Err())

	n, err := s.Sweep(ctx, store.SweepParams{})
	require.NoError(t, err)
	assert.Zero(t, n, "a vanished record is not counted as swept")
	members, err := client.ZRange(ctx, redisstore.AgeKey(s, "tenant"), 0, -1).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"live"}, members)
}

func TestRecordsHavePhysicalExpiry(t *testing.T) {
	t.Parallel()
	client, prefix := redisenv.Redis(t)
	s, err := redisstore.New(client, redisstore.Options{Prefix: prefix, TTL: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	ctx := t.Context()
	rec := claimOK(t, s, "tenant", "k")
	pttl := func(key string) time.Duration {
		ttl, err := client.PTTL(ctx, key).Result()
		require.NoError(t, err)
		return ttl
	}
	rk, idx := redisstore.RecordKey(s, "tenant", "k"), redisstore.AgeKey(s, "tenant")
	assert.Greater(t, pttl(rk), time.Hour, "the record expires after the retention window")
	assert.LessOrEqual(t, pttl(rk), time.Hour+2*time.Minute, "the record expires soon after the retention window")
	// The index outlives the claim by a window, so that the Complete, which
	// restarts the record's window without touching the index, leaves no
	// record behind the index's expiry.
	assert.Greater(t, pttl(idx), 2*time.Hour, "the index expires a window after the claim's record")
	assert.LessOrEqual(t, pttl(idx), 2*time.Hour+3*time.Minute, "the index expires soon after that")
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "tenant", Key: "k", Token: rec.Token, Outcome: []byte("x")}))
	assert.Greater(t, pttl(idx), pttl(rk)+50*time.Minute, "the completed record expires well before its index")
}

func TestForgetManyRecords(t *testing.T) {
	t.Parallel()
	s, client := newStoreClient(t, redisstore.Options{})
	ctx := t.Context()
	const n = 5000
	var g group
	for w := range 16 {
		g.Go(func() error {
			for i := w; i < n; i += 16 {
				res, err := s.Claim(ctx, store.ClaimParams{Tenant: "big", Key: fmt.Sprintf("k%05d", i), Holder: "h", Lease: time.Minute})
				if err != nil {
					return err
				}
				if res.Status != store.StatusAcquired {
					return fmt.Errorf("key %d: %v", i, res.Status)
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	for _, tenant := range []string{"small", "bigger", "bi", "{big}"} {
		claimOK(t, s, tenant, "k00001")
	}

	erased, err := s.Forget(ctx, store.ForgetParams{Tenant: "big"})
	require.NoError(t, err)
	assert.Equal(t, n, erased)
	for _, i := range []int{0, 1, n / 2, n - 1} {
		_, err := s.Lookup(ctx, store.LookupParams{Tenant: "big", Key: fmt.Sprintf("k%05d", i)})
		assert.ErrorIs(t, err, store.ErrNotFound, "key %d", i)
	}
	exists, err := client.Exists(ctx, redisstore.AgeKey(s, "big")).Result()
	require.NoError(t, err)
	assert.Zero(t, exists, "the index is gone too")
	for _, tenant := range []string{"small", "bigger", "bi", "{big}"} {
		_, err := s.Lookup(ctx, store.LookupParams{Tenant: tenant, Key: "k00001"})
		assert.NoError(t, err, "tenant %q untouched", tenant)
	}
	again, err := s.Forget(ctx, store.ForgetParams{Tenant: "big"})
	require.NoError(t, err)
	assert.Zero(t, again)
}

// Leases and expiries are judged by Redis's clock, not the workers'.
func TestClockSkew(t *testing.T) {
	t.Parallel()
	client, prefix := redisenv.Redis(t)
	storetest.RunClockSkew(t, func(t *testing.T, local store.Clock, ttl time.Duration) store.Store {
		s, err := redisstore.NewWithLocalClock(client, redisstore.Options{Prefix: prefix, TTL: ttl}, local)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	})
}

// Every default Options states is the value New applies.
func TestOptionsDocStatesTheDefaults(t *testing.T) {
	n := optdoc.Check(t, "options.go", map[string]any{
		"DefaultPrefix": redisstore.DefaultPrefix, "store.DefaultTTL": store.DefaultTTL,
		"DefaultPollInterval": redisstore.DefaultPollInterval, "DefaultReplicaAckTimeout": redisstore.DefaultReplicaAckTimeout,
	})
	assert.Equal(t, 4, n)
}
