package interceptor_test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/internal/testenv/redisenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// TestFaultAtEveryStoreCallPostgres runs the fault points on pgstore: as
// it runs on PostgreSQL, with Options.Batch, and in the portable mode; the
// transactional kind runs only here.
func TestFaultAtEveryStoreCallPostgres(t *testing.T) {
	t.Parallel()
	_, schema := pgenv.Postgres(t)
	// A pool of its own, larger than the default: the points run side by
	// side, each holding a transaction or a listener.
	pool := pgenv.PostgresPool(t, 48)
	effects := pgx.Identifier{schema, "fp_effects"}.Sanitize()
	_, err := pool.Exec(context.Background(), "CREATE TABLE "+effects+" (tenant text NOT NULL, flight text NOT NULL, call int NOT NULL)")
	require.NoError(t, err)
	tx := &fpTx{
		write: func(ctx context.Context, tenant, flight string, call int) error {
			tx, err := pgstore.Tx(ctx)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, "INSERT INTO "+effects+" (tenant, flight, call) VALUES ($1, $2, $3)", tenant, flight, call)
			return err
		},
		committed: func(ctx context.Context, tenant, flight string) ([]int, error) {
			rows, err := pool.Query(ctx, "SELECT call FROM "+effects+" WHERE tenant = $1 AND flight = $2 ORDER BY call", tenant, flight)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, pgx.RowTo[int])
		},
	}
	portable := pgstore.Capabilities{}
	var targets []fpTarget
	for _, mode := range []struct {
		name string
		opts pgstore.Options
	}{
		{"PostgreSQL", pgstore.Options{}},
		{"Batch", pgstore.Options{Batch: true}},
		{"Portable", pgstore.Options{Capabilities: &portable}},
	} {
		opts := mode.opts
		opts.Schema = schema
		opts.Table = testenv.UniqueName("r")
		opts.PollInterval = 5 * time.Millisecond
		opts.MaxPollInterval = 20 * time.Millisecond
		s, err := pgstore.New(pool, opts)
		require.NoError(t, err)
		require.NoError(t, s.EnsureSchema(context.Background()))
		s.Close()
		targets = append(targets, fpTarget{
			name: "pgstore " + mode.name,
			open: func(clock *storetest.Clock) (store.Store, func(), error) {
				o := opts
				o.Clock = clock
				s, err := pgstore.New(pool, o)
				if err != nil {
					return nil, nil, err
				}
				return s, s.Close, nil
			},
			tx:    tx,
			modes: fpStoreModes,
		})
	}
	runFaultPoints(t, targets, fpKinds, fpStoreOptions)
}

// fpStoreModes are the ways the real stores' calls fail: hangAfter, which
// differs from lostReply only in the time it takes and the error it ends
// with, runs on the memory store.
var fpStoreModes = []faultMode{errBefore, lostReply, hang}

// fpStoreOptions are the options the real stores run under: the key
// options' scenarios differ from one another only in the interceptor (the
// run a key is scoped by, the order of the lookups), which the memory
// store runs in full, so one of them runs here.
var fpStoreOptions = func() []fpOption {
	var out []fpOption
	for _, o := range fpOptions {
		switch o.name {
		case "KeySecret", "KeySecretResetRun", "ScopeWorkflow", "ResetRun":
			continue
		}
		out = append(out, o)
	}
	return out
}()

// TestFaultAtEveryStoreCallRedis runs the fault points on redisstore: as
// it is, with IndexOnlyWhatWaits, and with ReplicaAcks on a private master
// and replica (the shared Redis has no replica to acknowledge).
func TestFaultAtEveryStoreCallRedis(t *testing.T) {
	t.Parallel()
	shared, prefix := redisenv.Redis(t)
	open := func(client redis.UniversalClient, opts redisstore.Options) func(clock *storetest.Clock) (store.Store, func(), error) {
		return func(clock *storetest.Clock) (store.Store, func(), error) {
			opts := opts // each scenario its own copy: they run in parallel
			opts.Clock = clock
			opts.PollInterval = 5 * time.Millisecond
			s, err := redisstore.New(client, opts)
			if err != nil {
				return nil, nil, err
			}
			return s, func() { _ = s.Close() }, nil
		}
	}
	targets := []fpTarget{
		{name: "redisstore", open: open(shared, redisstore.Options{Prefix: prefix + "a"}), modes: fpStoreModes},
		{name: "redisstore IndexOnlyWhatWaits", open: open(shared, redisstore.Options{Prefix: prefix + "b", IndexOnlyWhatWaits: true}),
			modes: fpStoreModes},
	}
	if testing.Short() {
		t.Log("ReplicaAcks not run: it starts a private redis-server and its replica; skipped with -short")
	} else {
		master := fpRedisServer(t)
		_, port, _ := strings.Cut(master, ":")
		replica := fpRedisServer(t, "--replicaof", "127.0.0.1", port)
		client := redis.NewClient(&redis.Options{Addr: master})
		t.Cleanup(func() { _ = client.Close() })
		waitReplicaLink(t, replica)
		targets = append(targets, fpTarget{name: "redisstore ReplicaAcks",
			open: open(client, redisstore.Options{ReplicaAcks: 1, ReplicaAckTimeout: time.Second}), modes: fpStoreModes})
	}
	runFaultPoints(t, targets, fpKinds, fpStoreOptions)
}

// fpRedisServer starts a private redis-server without persistence, killed
// when the test ends, and returns its address.
func fpRedisServer(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server to start a private master and replica")
	}
	p := testenv.FreePort(t)
	cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(p), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--logfile", "", "--dir", t.TempDir()}, args...)...)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(p)
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer func() { _ = client.Close() }()
	require.Eventually(t, func() bool { return client.Ping(context.Background()).Err() == nil },
		10*time.Second, 10*time.Millisecond, "private redis-server on %s did not answer", addr)
	return addr
}

// waitReplicaLink waits until the replica at addr has synced with its
// master.
func waitReplicaLink(t *testing.T, addr string) {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = client.Close() }()
	require.Eventually(t, func() bool {
		info, err := client.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, 20*time.Second, 20*time.Millisecond, "the replica on %s did not sync", addr)
}
