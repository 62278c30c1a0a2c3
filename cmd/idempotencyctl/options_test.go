package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/internal/testenv/redisenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

// deployment is a store as the workers of one deployment open it, with
// their store options, and the store flags its operator passes.
type deployment struct {
	// flags reach the store, as an operator reaches it: the command
	// opens it itself, knowing nothing of the workers' options.
	flags []string
	// worker opens a worker's store on the records, reading time from
	// clock (nil: the store's own).
	worker func(t *testing.T, clock store.Clock) store.Store
}

// run runs the command as an operator does, through the store flags, in an
// environment of env alone (no developer's temporal.toml).
func (d deployment) run(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	return invoke(t, env, openBackend, append(append([]string{}, d.flags...), args...)...)
}

// deployments are the store options that change a path of the store: each
// operator command must find, under each, every record it guards.
var deployments = []struct {
	name  string
	start func(t *testing.T) deployment
}{
	{"postgres", postgresDeployment(pgstore.Options{}, false)},
	{"postgres/Batch", postgresDeployment(pgstore.Options{Batch: true}, false)},
	{"postgres/portable", postgresDeployment(pgstore.Options{Capabilities: &pgstore.Capabilities{}}, true)},
	{"postgres/portable+Batch", postgresDeployment(pgstore.Options{Capabilities: &pgstore.Capabilities{}, Batch: true}, true)},
	{"redis", redisDeployment(redisstore.Options{}, false)},
	{"redis/IndexOnlyWhatWaits", redisDeployment(redisstore.Options{IndexOnlyWhatWaits: true}, false)},
	{"redis/ReplicaAcks", redisDeployment(redisstore.Options{ReplicaAcks: 1}, true)},
	{"redis/IndexOnlyWhatWaits+ReplicaAcks", redisDeployment(redisstore.Options{IndexOnlyWhatWaits: true, ReplicaAcks: 1}, true)},
}

// postgresDeployment is a table of its own whose workers use opts; its
// operator passes -portable when portable.
func postgresDeployment(opts pgstore.Options, portable bool) func(t *testing.T) deployment {
	return func(t *testing.T) deployment {
		pool, schema := pgenv.Postgres(t)
		d := deployment{
			flags: []string{"-store", "postgres", "-postgres-url", pgenv.PostgresURL(), "-schema", schema},
			worker: func(t *testing.T, clock store.Clock) store.Store {
				o := opts
				o.Schema, o.Clock = schema, clock
				st, err := pgstore.New(pool, o)
				require.NoError(t, err)
				t.Cleanup(st.Close)
				return st
			},
		}
		if portable {
			d.flags = append(d.flags, "-portable")
		}
		require.NoError(t, d.worker(t, nil).(*pgstore.Store).EnsureSchema(context.Background()))
		return d
	}
}

// redisDeployment is a prefix of its own whose workers use opts: on the
// test Redis, or, when replicated, on a private Redis with a replica (for
// ReplicaAcks).
func redisDeployment(opts redisstore.Options, replicated bool) func(t *testing.T) deployment {
	return func(t *testing.T) deployment {
		var (
			client redis.UniversalClient
			addr   = redisenv.RedisAddr()
			prefix string
		)
		if replicated {
			addr, prefix = replicatedRedis(t), "ops"
			c := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { _ = c.Close() })
			client = c
		} else {
			client, prefix = redisenv.Redis(t)
		}
		return deployment{
			flags: []string{"-store", "redis", "-redis-addr", addr, "-prefix", prefix},
			worker: func(t *testing.T, clock store.Clock) store.Store {
				o := opts
				o.Prefix, o.Clock = prefix, clock
				st, err := redisstore.New(client, o)
				require.NoError(t, err)
				t.Cleanup(func() { _ = st.Close() })
				return st
			},
		}
	}
}

// replicatedRedis starts a private Redis and a replica of it on loopback,
// stopped when the test ends, and returns the master's address once the
// replica is online.
func replicatedRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unreachable(t, "redis-server, for a Redis with a replica", err)
	}
	start := func(args ...string) string {
		port := strconv.Itoa(testenv.FreePort(t))
		// --dir: a full resynchronisation writes an RDB file there.
		cmd := exec.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", t.TempDir()}, args...)...)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return port
	}
	master := start()
	start("--replicaof", "127.0.0.1", master)
	addr := "127.0.0.1:" + master
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = client.Close() }()
	require.Eventually(t, func() bool {
		info, err := client.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "state=online")
	}, 30*time.Second, 20*time.Millisecond, "the replica never came online")
	return addr
}

// Keys of the records the tests seed, as the dispatcher derives them.
const (
	heldKey  = "v1:1111111111111111111111111111111111111111111111111111111111111111"
	staleKey = "v1:2222222222222222222222222222222222222222222222222222222222222222"
	markKey  = "v1:3333333333333333333333333333333333333333333333333333333333333333"
	doneKey  = "v1:4444444444444444444444444444444444444444444444444444444444444444"
	goneKey  = "v1:5555555555555555555555555555555555555555555555555555555555555555"
)

// Issue 43: forget without -force must refuse while a record of the
// tenant is held, whatever the workers' store options. A worker claims a
// key and runs its effect (the ledger counts it); while its body runs, in
// its first lease, the operator runs forget; then a duplicate of the call
// claims the key. With redisstore's IndexOnlyWhatWaits the claim was in no
// age index, forget's guard (a listing) found nothing held, the running
// claim was erased and the duplicate acquired the key and ran the effect
// again: two effects. Under every option the guard sees the claim and
// refuses, and the duplicate finds the key held: one effect.
func TestForgetRefusesAClaimInItsFirstLease(t *testing.T) {
	t.Parallel()
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			dep := d.start(t)
			worker := dep.worker(t, nil)
			tenant := testenv.UniqueName("tenant")
			ledger := 0
			call := func(holder string) store.Status {
				t.Helper()
				res, err := worker.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: heldKey, Holder: holder, Lease: time.Minute, Origin: testOrigin})
				require.NoError(t, err)
				if res.Status == store.StatusAcquired {
					ledger++ // The body runs the effect (and is still running).
				}
				return res.Status
			}
			require.Equal(t, store.StatusAcquired, call("worker-1"))

			r := dep.run(t, nil, "forget", "-tenant", tenant, "-yes")
			again := call("worker-2") // A duplicate, or the activity's retry.

			assert.Equal(t, 1, ledger, "effects run for the key (forget: exit %d, %s%s)", r.code, r.stdout, r.stderr)
			assert.Equal(t, store.StatusHeld, again, "the running claim must still hold the key")
			assert.Equal(t, exitFailed, r.code, "stdout: %s", r.stdout)
			requireOneErrorLine(t, r, "refusing to erase tenant "+tenant+": 1 record is held or waiting for a decision")
			assert.Contains(t, r.stderr, heldKey+" (pending)")
		})
	}
}

// forget's guard trusts no index: on Redis it walks the tenant's record
// keys, so a held claim that no index lists is found even when nothing
// says so: an age index entry lost, or the mark of a prefix with
// IndexOnlyWhatWaits claims gone (deleted by hand, or lost with a master
// that failed before its replica had it), which makes List read the index
// alone.
func TestForgetGuardTrustsNoIndex(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts redisstore.Options
		lose func(t *testing.T, client redis.UniversalClient, prefix, tenant string)
	}{
		{"an index entry lost", redisstore.Options{}, func(t *testing.T, client redis.UniversalClient, prefix, tenant string) {
			// The age index's key, as redisstore's layout names it.
			age := prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte(tenant)) + "}:age"
			require.NoError(t, client.Del(context.Background(), age).Err())
		}},
		{"the mark of IndexOnlyWhatWaits lost", redisstore.Options{IndexOnlyWhatWaits: true}, func(t *testing.T, client redis.UniversalClient, prefix, _ string) {
			require.NoError(t, client.Del(context.Background(), prefix+":unindexed").Err())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, prefix := redisenv.Redis(t)
			o := tc.opts
			o.Prefix = prefix
			st, err := redisstore.New(client, o)
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			tenant := testenv.UniqueName("tenant")
			claim(t, st, tenant, heldKey)
			tc.lose(t, client, prefix, tenant)
			flags := []string{"-store", "redis", "-redis-addr", redisenv.RedisAddr(), "-prefix", prefix}
			r := invoke(t, nil, openBackend, append(flags, "list", "-tenant", tenant, "-state", "pending", "-keys")...)
			require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
			require.Empty(t, r.stdout, "the test needs a held record the listing misses")

			r = invoke(t, nil, openBackend, append(flags, "forget", "-tenant", tenant, "-yes")...)
			assert.Equal(t, exitFailed, r.code, "stdout: %s", r.stdout)
			requireOneErrorLine(t, r, "refusing to erase tenant "+tenant+": 1 record is held or waiting for a decision")
			state, err := lookupState(t, st, tenant, heldKey)
			require.NoError(t, err, "the held claim was erased")
			assert.Equal(t, store.StatePending, state)
		})
	}
}

// Each operator command (list, show, decide, resolve, forget, sweep), run
// as an operator runs it (its own store, from the flags), finds every
// record it guards under each store option of the workers: a claim in its
// first lease, a claim whose holder died before its first renewal (stale),
// an indeterminate record, a completed one, and an expired one to sweep.
func TestOperatorCommandsUnderStoreOptions(t *testing.T) {
	t.Parallel()
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			operatorCommandsFindEveryRecord(t, d.start(t))
		})
	}
}

func operatorCommandsFindEveryRecord(t *testing.T, dep deployment) {
	ctx := context.Background()
	tenant := testenv.UniqueName("tenant")
	now := dep.worker(t, nil)
	claimWith := func(st store.Store, key string) int64 {
		t.Helper()
		res, err := st.Claim(ctx, store.ClaimParams{Tenant: tenant, Key: key, Holder: "worker", Lease: time.Minute, Origin: testOrigin})
		require.NoError(t, err)
		require.Equal(t, store.StatusAcquired, res.Status, "claim of %s", key)
		return res.Record.Token
	}
	held := claimWith(now, heldKey)                                            // its body runs
	claimWith(dep.worker(t, fixedClock(time.Now().Add(-time.Hour))), staleKey) // its worker died an hour ago
	gone := dep.worker(t, fixedClock(time.Now().Add(-2*store.DefaultTTL)))     // two retention windows ago
	require.NoError(t, gone.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: goneKey, Token: claimWith(gone, goneKey)}))
	require.NoError(t, now.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: tenant, Key: markKey, Token: claimWith(now, markKey), Reason: "charge timed out"}))
	require.NoError(t, now.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: doneKey, Token: claimWith(now, doneKey), Outcome: encode(t, "12A")}))

	ok := func(args ...string) result {
		t.Helper()
		r := dep.run(t, nil, args...)
		require.Equal(t, exitOK, r.code, "%v: stderr: %s", args, r.stderr)
		return r
	}
	keys := func(args ...string) []string {
		t.Helper()
		return strings.Fields(ok(append(args, "-keys")...).stdout)
	}

	// list: what waits for a person, the held records, every live one.
	assert.Equal(t, []string{markKey, staleKey}, keys("list", "-tenant", tenant), "list: what waits, newest first")
	assert.Equal(t, []string{staleKey}, keys("list", "-tenant", tenant, "-stale"))
	assert.ElementsMatch(t, []string{heldKey, staleKey}, keys("list", "-tenant", tenant, "-state", "pending"))
	assert.ElementsMatch(t, []string{heldKey, staleKey, markKey, doneKey}, keys("list", "-tenant", tenant, "-state", "all"))
	assert.ElementsMatch(t, []string{heldKey, staleKey, markKey, doneKey}, keys("list", "-all-tenants", "-state", "all"))
	var page listJSON
	require.NoError(t, json.Unmarshal([]byte(ok("list", "-tenant", tenant, "-state", "all", "-oldest", "-limit", "1", "-json").stdout), &page))
	require.Len(t, page.Records, 1)
	assert.Equal(t, staleKey, page.Records[0].Key, "oldest first")
	assert.NotEmpty(t, page.Next, "three more")

	// show: every live record; the expired one is gone.
	for key, state := range map[string]string{heldKey: "pending", staleKey: "pending", markKey: "indeterminate", doneKey: "completed"} {
		assert.Contains(t, ok("show", "-tenant", tenant, "-key", key).stdout, "state        "+state+"\n", key)
	}
	r := dep.run(t, nil, "show", "-tenant", tenant, "-key", goneKey)
	assert.Equal(t, exitFailed, r.code)
	requireOneErrorLine(t, r, "no record")

	// decide: finds the indeterminate record and goes for its workflow (no
	// Temporal here); refuses the held one.
	temporal := []string{"-timeout", "3s", "decide", "-tenant", tenant, "-free", "-yes", "-by", "ops", "-address", "127.0.0.1:1"}
	r = dep.run(t, nil, append(temporal, "-key", markKey)...)
	assert.Equal(t, exitFailed, r.code)
	assert.Contains(t, r.stdout, "record: tenant "+tenant+" key "+markKey+" is indeterminate (reason: charge timed out)\n")
	requireOneErrorLine(t, r, "cannot reach Temporal at 127.0.0.1:1")
	r = dep.run(t, nil, append(temporal, "-key", heldKey)...)
	assert.Equal(t, exitFailed, r.code)
	requireOneErrorLine(t, r, "the record is pending: its holder may still be running")

	// resolve: the held record within its lease is refused; the stale one
	// is shown for settling.
	r = dep.run(t, nil, "resolve", "-tenant", tenant, "-key", heldKey, "-free", "-yes", "-force")
	assert.Equal(t, exitFailed, r.code)
	requireOneErrorLine(t, r, "the record is pending and its holder worker holds a lease until")
	assert.Contains(t, ok("resolve", "-tenant", tenant, "-key", staleKey, "-free", "-dry-run", "-force").stdout,
		"dry run: would settle the stale claim and free the key; nothing changed\n")

	// sweep: the expired record, and nothing live.
	assert.Contains(t, ok("sweep", "-limit", "2").stdout, "swept 1 expired record from ")
	assert.ElementsMatch(t, []string{heldKey, staleKey, markKey, doneKey}, keys("list", "-tenant", tenant, "-state", "all"), "sweep left every live record")

	// forget: refuses while anything is held or waits, naming it all.
	r = dep.run(t, nil, "forget", "-tenant", tenant, "-yes")
	assert.Equal(t, exitFailed, r.code)
	requireOneErrorLine(t, r, "refusing to erase tenant "+tenant+": 3 records are held or waiting for a decision")
	for _, k := range []string{heldKey + " (pending)", staleKey + " (pending)", markKey + " (indeterminate)"} {
		assert.Contains(t, r.stderr, k)
	}
	ok("resolve", "-tenant", tenant, "-key", staleKey, "-free", "-yes", "-by", "ops", "-force")
	ok("resolve", "-tenant", tenant, "-key", markKey, "-outcome", `"12A"`, "-by", "ops", "-force")
	r = dep.run(t, nil, "forget", "-tenant", tenant, "-yes")
	assert.Equal(t, exitFailed, r.code)
	requireOneErrorLine(t, r, "refusing to erase tenant "+tenant+": 1 record is held or waiting for a decision, whose calls would run their effects again: "+heldKey+" (pending);")

	// The body returns; nothing is held any more.
	require.NoError(t, now.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: heldKey, Token: held, Outcome: encode(t, "14C")}))
	assert.Equal(t, "erased 3 records of tenant "+tenant+"\n", ok("forget", "-tenant", tenant, "-yes").stdout)
	assert.Empty(t, keys("list", "-tenant", tenant, "-state", "all"))
}
