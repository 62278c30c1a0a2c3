package pgstore_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/netfault"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// ledger is a table of effects in the store's database, as an activity's
// body would write them.
type ledger struct {
	pool  *pgxpool.Pool
	table string // quoted
}

func newLedger(t *testing.T, pool *pgxpool.Pool, schema string) *ledger {
	t.Helper()
	l := &ledger{pool: pool, table: pgx.Identifier{schema, testenv.UniqueName("ledger")}.Sanitize()}
	_, err := pool.Exec(context.Background(), "CREATE TABLE "+l.table+" (tag text NOT NULL)")
	require.NoError(t, err)
	return l
}

// write makes one effect through the transaction ctx carries.
func (l *ledger) write(ctx context.Context, tag string) error {
	tx, err := pgstore.Tx(ctx)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "INSERT INTO "+l.table+" (tag) VALUES ($1)", tag)
	return err
}

func (l *ledger) effects(t *testing.T, tag string) int {
	t.Helper()
	var n int
	require.NoError(t, l.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+l.table+" WHERE tag = $1", tag).Scan(&n))
	return n
}

func TestTransactorConformance(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	l := newLedger(t, pool, schema)
	storetest.RunTransactor(t, func(t *testing.T, cfg storetest.Config) storetest.Transactional {
		s := newStore(t, pool, schema, pgstore.Options{
			TTL: cfg.TTL, Clock: cfg.Clock,
			PollInterval: 5 * time.Millisecond, MaxPollInterval: 20 * time.Millisecond,
		})
		return storetest.Transactional{Store: s, Write: l.write, Effects: l.effects}
	})
}

func TestCheckTransactionalRefusesAnotherPool(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{})
	require.NoError(t, s.CheckTransactional(pool))
	other := pgenv.PostgresPool(t, 1) // the same database, another pool
	err := s.CheckTransactional(other)
	require.ErrorIs(t, err, store.ErrNotTransactional)
	assert.Contains(t, err.Error(), "another *pgxpool.Pool")
	err = s.CheckTransactional(&pgx.Conn{})
	require.ErrorIs(t, err, store.ErrNotTransactional)
	assert.Contains(t, err.Error(), "*pgx.Conn")
}

func TestTxOutsideATransactionalBody(t *testing.T) {
	t.Parallel()
	tx, err := pgstore.Tx(context.Background())
	assert.Nil(t, tx)
	require.ErrorIs(t, err, pgstore.ErrNoTransaction)
}

// txFixture claims a key in a fresh store and begins its transaction.
func txFixture(t *testing.T) (*pgstore.Store, *ledger, store.Record, store.Transaction) {
	t.Helper()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{})
	l := newLedger(t, pool, schema)
	ctx := context.Background()
	res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status)
	txn, err := s.BeginTransaction(ctx, store.TransactionParams{Tenant: "t", Key: "k", Token: res.Record.Token})
	require.NoError(t, err)
	t.Cleanup(func() { _ = txn.Rollback(context.Background()) })
	return s, l, res.Record, txn
}

func TestBodyCannotEndItsTransaction(t *testing.T) {
	t.Parallel()
	s, l, rec, txn := txFixture(t)
	ctx := txn.Context(context.Background())
	require.NoError(t, l.write(ctx, "body"))
	tx, err := pgstore.Tx(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, tx.Commit(ctx), pgstore.ErrBodyEndsTransaction)
	require.ErrorIs(t, tx.Rollback(ctx), pgstore.ErrBodyEndsTransaction)
	assert.Zero(t, l.effects(t, "body"), "the body's Commit committed")
	// A savepoint is the body's to use.
	sp, err := tx.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, l.write(txn.Context(ctx), "in savepoint"))
	require.NoError(t, sp.Rollback(ctx))
	require.NoError(t, txn.Commit(context.Background(), []byte("o")))
	assert.Equal(t, 1, l.effects(t, "body"))
	got, err := s.Lookup(context.Background(), store.LookupParams{Tenant: "t", Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, got.State)
	assert.Equal(t, rec.Token, got.Token)
}

// A body that sends COMMIT itself — plain or AND CHAIN — is refused by the
// commit guard: its writes roll back, and the dispatcher is told, typed, that
// the body ended its transaction; nothing is marked completed. Before the
// guard a COMMIT AND CHAIN landed the body's writes and left a new
// transaction open, in which a key taken over meanwhile read as "not the
// holder", as if nothing had landed: the taker then ran the body again.
func TestBodyThatSendsCommitIsRefused(t *testing.T) {
	t.Parallel()
	for _, commit := range []string{"COMMIT", "COMMIT AND CHAIN", "END"} {
		t.Run(commit, func(t *testing.T) {
			t.Parallel()
			s, l, rec, txn := txFixture(t)
			ctx := txn.Context(context.Background())
			require.NoError(t, l.write(ctx, "body"))
			tx, err := pgstore.Tx(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, commit)
			require.Error(t, err, "the guard refuses the body's %s", commit)
			assert.Zero(t, l.effects(t, "body"), "the body's %s landed its writes", commit)

			// The claim is taken over before the dispatcher commits (the
			// body's lease ran out): the body's writes must not be there.
			taken, err := s.Claim(context.Background(), store.ClaimParams{Tenant: "t", Key: "k", Holder: "taker", Lease: time.Minute, Supersede: rec.Token})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, taken.Status)
			err = txn.Commit(context.Background(), []byte("o"))
			require.Error(t, err)
			assert.Zero(t, l.effects(t, "body"), "the body's writes landed beside a taker that will write them again")
		})
	}
}

// A body that ends its transaction with ROLLBACK AND CHAIN and writes on in
// the chained one: the completion runs in another transaction than the one
// that began, and refuses; nothing commits.
func TestBodyThatChainsARollbackIsCaught(t *testing.T) {
	t.Parallel()
	s, l, _, txn := txFixture(t)
	ctx := txn.Context(context.Background())
	require.NoError(t, l.write(ctx, "before"))
	tx, err := pgstore.Tx(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "ROLLBACK AND CHAIN")
	require.NoError(t, err)
	require.NoError(t, l.write(ctx, "after"))
	require.ErrorIs(t, txn.Commit(context.Background(), []byte("o")), store.ErrTransactionEnded)
	assert.Zero(t, l.effects(t, "before"))
	assert.Zero(t, l.effects(t, "after"), "the chained transaction committed with the record")
	got, err := s.Lookup(context.Background(), store.LookupParams{Tenant: "t", Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, store.StatePending, got.State)
}

// A body that rolls back to a savepoint it did not make, or releases one,
// fails its statement and leaves the transaction aborted: nothing lands.
func TestBodySavepointTricksLandNothing(t *testing.T) {
	t.Parallel()
	for _, stmt := range []string{"ROLLBACK TO SAVEPOINT nobody", "RELEASE SAVEPOINT nobody"} {
		t.Run(stmt, func(t *testing.T) {
			t.Parallel()
			_, l, _, txn := txFixture(t)
			ctx := txn.Context(context.Background())
			require.NoError(t, l.write(ctx, "body"))
			tx, err := pgstore.Tx(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, stmt)
			require.Error(t, err)
			require.Error(t, txn.Commit(context.Background(), []byte("o")))
			assert.Zero(t, l.effects(t, "body"))
		})
	}
}

// On a schema made before the guard existed (EnsureSchema not run since),
// transactions run without it, as before: a body's COMMIT lands, and is
// caught afterwards.
func TestWithoutTheGuardACommitIsCaught(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	table := testenv.UniqueName("r")
	s := newStore(t, pool, schema, pgstore.Options{Table: table})
	_, err := pool.Exec(context.Background(), "DROP TABLE "+pgx.Identifier{schema, table + "_txguard"}.Sanitize())
	require.NoError(t, err)
	l := newLedger(t, pool, schema)
	res, err := s.Claim(context.Background(), store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	txn, err := s.BeginTransaction(context.Background(), store.TransactionParams{Tenant: "t", Key: "k", Token: res.Record.Token})
	require.NoError(t, err)
	t.Cleanup(func() { _ = txn.Rollback(context.Background()) })
	ctx := txn.Context(context.Background())
	require.NoError(t, l.write(ctx, "body"))
	tx, err := pgstore.Tx(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "COMMIT")
	require.NoError(t, err)
	require.ErrorIs(t, txn.Commit(context.Background(), []byte("o")), store.ErrTransactionEnded)
	got, err := s.Lookup(context.Background(), store.LookupParams{Tenant: "t", Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, store.StatePending, got.State)
}

// A body that swallowed a failed statement left its transaction aborted:
// the commit says nothing landed, and nothing did.
func TestFailedTransactionDoesNotCommit(t *testing.T) {
	t.Parallel()
	s, l, rec, txn := txFixture(t)
	ctx := txn.Context(context.Background())
	require.NoError(t, l.write(ctx, "body"))
	tx, err := pgstore.Tx(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT 1/0")
	require.Error(t, err)
	err = txn.Commit(context.Background(), []byte("o"))
	require.Error(t, err)
	assert.NotErrorIs(t, err, store.ErrNotHolder)
	assert.Zero(t, l.effects(t, "body"))
	got, err := s.Lookup(context.Background(), store.LookupParams{Tenant: "t", Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, store.StatePending, got.State)
	assert.Equal(t, rec.Token, got.Token)
}

// proxied is a store whose pool reaches PostgreSQL through a netfault proxy,
// and a direct pool on the same database to read what landed.
func proxied(t *testing.T) (*netfault.Proxy, *pgstore.Store, *pgstore.Store, *ledger) {
	t.Helper()
	pool, schema := pgenv.Postgres(t)
	opts := pgstore.Options{Schema: schema, Table: testenv.UniqueName("r"),
		PollInterval: 5 * time.Millisecond, MaxPollInterval: 20 * time.Millisecond}
	direct := newStore(t, pool, schema, opts)
	l := newLedger(t, pool, schema)

	cfg, err := pgxpool.ParseConfig(pgenv.PostgresURL())
	require.NoError(t, err)
	proxy, err := netfault.Start(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	host, port, err := net.SplitHostPort(proxy.Addr())
	require.NoError(t, err)
	p, err := strconv.ParseUint(port, 10, 16)
	require.NoError(t, err)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.MaxConns, cfg.MinConns = 2, 0
	vpool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(vpool.Close)
	via, err := pgstore.New(vpool, opts)
	require.NoError(t, err)
	t.Cleanup(via.Close)
	return proxy, via, direct, ledgerOn(l, vpool)
}

func ledgerOn(l *ledger, pool *pgxpool.Pool) *ledger { return &ledger{pool: pool, table: l.table} }

// commitTest claims a key through the proxied store, makes an effect in its
// transaction and commits it with fault set on the COMMIT alone.
func commitTest(t *testing.T, fault func(*netfault.Proxy), budget time.Duration) (
	proxy *netfault.Proxy, direct *pgstore.Store, token int64, effects func() int, err error) {
	t.Helper()
	proxy, via, direct, l := proxied(t)
	ctx := context.Background()
	res, err := via.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	txn, err := via.BeginTransaction(ctx, store.TransactionParams{Tenant: "t", Key: "k", Token: res.Record.Token})
	require.NoError(t, err)
	t.Cleanup(func() { _ = txn.Rollback(context.Background()) })
	require.NoError(t, l.write(txn.Context(ctx), "effect"))
	cctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	err = pgstore.CommitWithHook(cctx, txn, []byte("outcome"), func() { fault(proxy) })
	read := &ledger{pool: pgenv.PostgresPool(t, 1), table: l.table}
	return proxy, direct, res.Record.Token, func() int { return read.effects(t, "effect") }, err
}

// The COMMIT's answer is lost (the connection is cut in the middle of the
// reply): the commit landed, and the record says so. The fenced release,
// the dispatcher's way of asking, is refused: the record is completed
// under the token, with the outcome.
func TestCommitAnswerLostLanded(t *testing.T) {
	t.Parallel()
	_, direct, token, effects, err := commitTest(t, func(p *netfault.Proxy) { p.CutNext(netfault.Down, 1) }, 10*time.Second)
	require.Error(t, err, "the commit's answer was cut, yet it reported success")
	require.ErrorIs(t, err, store.ErrUnavailable)
	ctx := context.Background()
	require.ErrorIs(t, direct.Release(ctx, store.ReleaseParams{Tenant: "t", Key: "k", Token: token}), store.ErrNotHolder)
	got, err := direct.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, got.State)
	assert.Equal(t, token, got.Token)
	assert.Equal(t, []byte("outcome"), got.Outcome)
	assert.Equal(t, 1, effects())
}

// The COMMIT is cut on its way (half of it reaches the server, then the
// connection closes): the transaction rolls back; the record is pending
// under the token, and the fenced release frees it.
func TestCommitCutOnTheWayDidNotLand(t *testing.T) {
	t.Parallel()
	_, direct, token, effects, err := commitTest(t, func(p *netfault.Proxy) { p.CutNext(netfault.Up, 1) }, 10*time.Second)
	require.Error(t, err)
	require.ErrorIs(t, err, store.ErrUnavailable)
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, direct.Release(rctx, store.ReleaseParams{Tenant: "t", Key: "k", Token: token}))
	_, err = direct.Lookup(rctx, store.LookupParams{Tenant: "t", Key: "k"})
	require.ErrorIs(t, err, store.ErrNotFound)
	assert.Zero(t, effects())
}

// The COMMIT is held on its way until the client has given up on it, then
// delivered: it lands late. A bare read while it is held shows the record
// pending — the answer the dispatcher must not act on — while the fenced
// release waits for the transaction to end and then finds it completed.
func TestCommitInFlightIsWaitedFor(t *testing.T) {
	t.Parallel()
	proxy, direct, token, effects, err := commitTest(t, func(p *netfault.Proxy) { p.Stall(netfault.Up) }, time.Second)
	require.Error(t, err)
	ctx := context.Background()
	got, lerr := direct.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "k"})
	require.NoError(t, lerr)
	require.Equal(t, store.StatePending, got.State, "a bare read while the COMMIT is in flight")

	released := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		released <- direct.Release(rctx, store.ReleaseParams{Tenant: "t", Key: "k", Token: token})
	}()
	proxy.Resume(netfault.Up)
	// The COMMIT lands when it arrives — unless the cancel pgx sent when
	// the commit's context ended is still pending in the server, which
	// then cancels the COMMIT at its first interrupt check (the commit
	// guard's trigger has one). Either way the release waited for it, and
	// the record and the effects agree: freed and nothing, or completed and
	// one.
	rerr := <-released
	if rerr == nil {
		_, err = direct.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "k"})
		require.ErrorIs(t, err, store.ErrNotFound)
		assert.Zero(t, effects(), "the release freed a key whose commit landed")
		return
	}
	require.ErrorIs(t, rerr, store.ErrNotHolder)
	got, err = direct.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, got.State)
	assert.Equal(t, token, got.Token)
	assert.Equal(t, 1, effects())
}
