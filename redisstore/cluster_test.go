package redisstore_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// clusterScript starts, fails and stops the test clusters; CI uses the same.
var clusterScript = filepath.Join("..", "scripts", "redis-cluster.sh")

// redisCluster is a private Redis Cluster (three masters, each with a
// replica) on loopback, started by scripts/redis-cluster.sh and stopped when
// the test ends; the script's watchdog stops it if the test process dies.
type redisCluster struct {
	t     *testing.T
	dir   string
	addrs []string
}

func startCluster(t *testing.T) *redisCluster {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Unreachable(t, "Redis Cluster ("+bin+")", err)
		}
	}
	dir := filepath.Join(t.TempDir(), "cluster")
	cmd := exec.Command(clusterScript, "start", dir, strconv.Itoa(os.Getpid()))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	// Stop whatever started, even after a failed start.
	t.Cleanup(func() { _ = exec.Command(clusterScript, "stop", dir).Run() })
	require.NoError(t, err, "scripts/redis-cluster.sh start")
	c := &redisCluster{t: t, dir: dir, addrs: strings.Split(strings.TrimSpace(string(out)), ",")}
	require.Len(t, c.addrs, 6)
	return c
}

// client returns a Cluster client of c, closed when the test ends.
func (c *redisCluster) client(opts *redis.ClusterOptions) *redis.ClusterClient {
	c.t.Helper()
	if opts == nil {
		opts = &redis.ClusterOptions{}
	}
	opts.Addrs = c.addrs
	client := redis.NewClusterClient(opts)
	c.t.Cleanup(func() { _ = client.Close() })
	return client
}

// script runs scripts/redis-cluster.sh with args after the command and dir.
func (c *redisCluster) script(command string, args ...string) {
	c.t.Helper()
	out, err := exec.Command(clusterScript, append([]string{command, c.dir}, args...)...).CombinedOutput()
	require.NoError(c.t, err, "redis-cluster.sh %s: %s", command, out)
}

func (c *redisCluster) kill(port string) { c.script("kill", port) }

// TestClusterConformance runs the store contract against a real Redis
// Cluster through redis.NewClusterClient: every script touches only keys of
// one hash slot (the tenant's), Sweep scans every master, and notifications
// cross nodes.
func TestClusterConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private Redis Cluster; skipped with -short")
	}
	t.Parallel()
	c := startCluster(t)
	client := c.client(nil)
	t.Run("TenantsSpreadOverMasters", func(t *testing.T) { tenantsSpreadOverMasters(t, client) })
	t.Run("MovedIsUnavailable", func(t *testing.T) { movedIsUnavailable(t, c) })
	t.Run("ShardedWake", func(t *testing.T) { shardedWake(t, client) })
	t.Run("IndexOnlyWhatWaitsReplicated", func(t *testing.T) { indexOnlyWhatWaitsReplicated(t, client) })
	t.Run("IndexOnlyWhatWaitsWalksEveryMaster", func(t *testing.T) { indexOnlyWhatWaitsWalksEveryMaster(t, client) })
	storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
		prefix := testenv.UniqueName("c")
		s, err := redisstore.New(client, redisstore.Options{Prefix: prefix, Clock: cfg.Clock, TTL: cfg.TTL, PollInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, s.Close()) })
		return s
	})
}

// tenantsSpreadOverMasters checks the premise of the conformance run: the
// tenants of one store land on all three masters, so a script touching keys
// of two slots would have failed there, and Forget and Sweep work on each.
func tenantsSpreadOverMasters(t *testing.T, client *redis.ClusterClient) {
	ctx := t.Context()
	s, err := redisstore.New(client, redisstore.Options{Prefix: "spread"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })

	masters := make(map[string]int)
	for i := range 30 {
		tenant := "tenant-" + strconv.Itoa(i)
		rec := claimOK(t, s, tenant, "k")
		require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: "k", Token: rec.Token, Outcome: []byte("ok")}))
		node, err := client.MasterForKey(ctx, redisstore.RecordKey(s, tenant, "k"))
		require.NoError(t, err)
		masters[node.Options().Addr]++
		n, err := s.Forget(ctx, store.ForgetParams{Tenant: tenant})
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	require.Len(t, masters, 3, "30 tenants should reach all three masters: %v", masters)
	n, err := s.Sweep(ctx, store.SweepParams{})
	require.NoError(t, err)
	require.Zero(t, n)
}

// movedIsUnavailable talks to one master with a single-node client, so the
// claims of tenants whose slot another master owns are answered MOVED and
// not followed: the store has to say "not now" (store.ErrUnavailable), as it
// does when a Cluster client runs out of redirections during a failover,
// not fail with an unknown error.
func movedIsUnavailable(t *testing.T, c *redisCluster) {
	client := redis.NewClient(&redis.Options{Addr: c.addrs[0]})
	t.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(client, redisstore.Options{Prefix: "moved"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	moved := 0
	for i := range 30 {
		_, err := s.Claim(t.Context(), store.ClaimParams{Tenant: "tenant-" + strconv.Itoa(i), Key: "k", Holder: "h", Lease: time.Minute})
		if err == nil {
			continue
		}
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.Contains(t, err.Error(), "MOVED")
		moved++
	}
	require.NotZero(t, moved, "30 tenants should reach other masters")
}

// clusterTimeout bounds a cluster operation in the tests; not a timing
// assertion.
const clusterTimeout = 30 * time.Second

func waitFor(t *testing.T, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), clusterTimeout)
	defer cancel()
	for !cond(ctx) {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// shardedWake checks that on a Cluster (Redis 7.0+) a Wait subscribes to
// its tenant's sharded channel on the master that owns the tenant's slot,
// nobody subscribes to the classic channel, and the settlement's SPUBLISH
// (from inside a script) wakes the Wait with polling off.
func shardedWake(t *testing.T, client *redis.ClusterClient) {
	ctx := t.Context()
	s, err := redisstore.New(client, redisstore.Options{Prefix: testenv.UniqueName("w")})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	redisstore.DisablePolling(s)
	for _, tenant := range []string{"a", "b", "c", "d"} {
		rec := claimOK(t, s, tenant, "k")
		done := make(chan store.Result, 1)
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		go func() {
			res, err := s.Wait(waitCtx, store.WaitParams{Tenant: tenant, Key: "k", Token: rec.Token})
			assert.NoError(t, err, "without polling, only a notification can end this Wait")
			done <- res
		}()
		channel := redisstore.TenantChannel(s, tenant)
		owner, err := client.MasterForKey(ctx, channel)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			n, err := owner.Do(ctx, "pubsub", "shardnumsub", channel).Slice()
			return err == nil && len(n) == 2 && n[1] == int64(1)
		}, 5*time.Second, 5*time.Millisecond, "the Wait subscribes on the slot's master")
		require.NoError(t, client.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			n, err := node.PubSubNumSub(ctx, redisstore.Channel(s)).Result()
			require.NoError(t, err)
			assert.Zero(t, n[redisstore.Channel(s)], "no classic subscription on %s", node.Options().Addr)
			return nil
		}))
		require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: "k", Token: rec.Token, Outcome: []byte("x")}))
		assert.Equal(t, store.StatusCompleted, (<-done).Status)
		cancel()
	}
}

// indexOnlyWhatWaitsReplicated claims with Options.IndexOnlyWhatWaits and
// ReplicaAcks on the Cluster: the one SET, then WAIT on the master that
// owns the key, acknowledged by its replica; a duplicate is answered; no
// claim adds an index entry; and Forget, which then scans every master for
// the tenant's records, leaves none.
func indexOnlyWhatWaitsReplicated(t *testing.T, client *redis.ClusterClient) {
	ctx := t.Context()
	s, err := redisstore.New(client, redisstore.Options{Prefix: testenv.UniqueName("sparse"), IndexOnlyWhatWaits: true, ReplicaAcks: 1})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	for i := range 12 {
		tenant := "tenant-" + strconv.Itoa(i)
		claimOK(t, s, tenant, "k")
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: tenant, Key: "k", Holder: "dup", Lease: time.Minute})
		require.NoError(t, err)
		assert.Equal(t, store.StatusHeld, res.Status)
		n, err := client.Exists(ctx, redisstore.AgeKey(s, tenant)).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "no claim indexed")
		forgot, err := s.Forget(ctx, store.ForgetParams{Tenant: tenant})
		require.NoError(t, err)
		assert.Equal(t, 1, forgot)
		_, err = s.Lookup(ctx, store.LookupParams{Tenant: tenant, Key: "k"})
		assert.ErrorIs(t, err, store.ErrNotFound)
	}
}

// indexOnlyWhatWaitsWalksEveryMaster: the claims of a store with
// IndexOnlyWhatWaits, on tenants spread over the three masters, are in no
// index; a store without the option (an operator's) lists them across
// tenants and per tenant, counts those that wait, and sweeps the expired
// ones, walking the record keys of every master.
func indexOnlyWhatWaitsWalksEveryMaster(t *testing.T, client *redis.ClusterClient) {
	ctx := t.Context()
	prefix := testenv.UniqueName("walk")
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	sparse, err := redisstore.New(client, redisstore.Options{Prefix: prefix, Clock: clock, TTL: time.Hour, IndexOnlyWhatWaits: true, ReplicaAcks: 1})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sparse.Close()) })
	operator, err := redisstore.New(client, redisstore.Options{Prefix: prefix, Clock: clock, TTL: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, operator.Close()) })
	const tenants = 12
	for i := range tenants {
		claimOK(t, sparse, "tenant-"+strconv.Itoa(i), "k")
	}
	clock.Advance(2 * time.Minute) // Every lease has run out: they wait.
	page, err := operator.ListAcrossTenants(ctx, store.ListParams{Stale: true, Limit: store.MaxListLimit})
	require.NoError(t, err)
	assert.Len(t, page.Records, tenants, "every master's claims")
	for i := range tenants {
		page, err := operator.List(ctx, store.ListParams{Tenant: "tenant-" + strconv.Itoa(i)})
		require.NoError(t, err)
		assert.Len(t, page.Records, 1, "tenant %d", i)
	}
	counts, err := operator.CountBacklog(ctx)
	require.NoError(t, err)
	assert.Equal(t, []store.BacklogCount{{Stale: tenants}}, counts)
	clock.Advance(2 * time.Hour)
	n, err := store.Sweep(ctx, operator, 5)
	require.NoError(t, err)
	assert.Equal(t, tenants, n, "every expired record, on every master")
}
