package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/netfault"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/internal/testenv/redisenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// ReserveSeatActivity is the transactional activity's name.
const ReserveSeatActivity = "ReserveSeat"

// SeatRequest is ReserveSeat's argument; Seat is its key argument.
type SeatRequest struct {
	Seat      string `json:"seat"`
	RequestID string `json:"request_id"`
}

// seatLedger is the effect's table, in the store's own database: one row
// per seat reserved. It has no unique constraint, so a second effect shows
// as a second row instead of an error.
type seatLedger struct {
	pool  *pgxpool.Pool
	table string // quoted
}

func newSeatLedger(t *testing.T, pool *pgxpool.Pool, schema string) *seatLedger {
	t.Helper()
	l := &seatLedger{pool: pool, table: pgx.Identifier{schema, "seats"}.Sanitize()}
	_, err := pool.Exec(context.Background(), "CREATE TABLE "+l.table+" (seat text NOT NULL, effect text NOT NULL)")
	require.NoError(t, err)
	return l
}

// effects lists the committed effects of seat.
func (l *seatLedger) effects(t *testing.T, seat string) []string {
	t.Helper()
	rows, err := l.pool.Query(context.Background(), "SELECT effect FROM "+l.table+" WHERE seat = $1 ORDER BY effect", seat)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// seats holds the transactional activity. hook, when set, runs in the body
// after its write, inside the transaction.
type seats struct {
	table string
	calls atomic.Int32
	hook  func(ctx context.Context, attempt int32) error
}

// Reserve writes the seat's row through the store's transaction and answers
// with the effect's name: the seat, the attempt and the process.
func (s *seats) Reserve(ctx context.Context, req SeatRequest) (string, error) {
	s.calls.Add(1)
	tx, err := pgstore.Tx(ctx)
	if err != nil {
		return "", err
	}
	attempt := sdkactivity.GetInfo(ctx).Attempt
	effect := fmt.Sprintf("%s/attempt-%d/pid-%d", req.Seat, attempt, os.Getpid())
	if _, err := tx.Exec(ctx, "INSERT INTO "+s.table+" (seat, effect) VALUES ($1, $2)", req.Seat, effect); err != nil {
		return "", err
	}
	if s.hook != nil {
		if err := s.hook(ctx, attempt); err != nil {
			return "", err
		}
	}
	return effect, nil
}

func (s *seats) declaration() *activity.Declaration {
	return activity.MustDeclare(s.Reserve, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"seat"},
		Transactional: true, Name: ReserveSeatActivity})
}

// SeatCalls makes n identical ReserveSeat calls at once and returns their
// answers in order.
func SeatCalls(ctx workflow.Context, seat string, n int, startToClose time.Duration) ([]string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: startToClose,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    100 * time.Millisecond,
			BackoffCoefficient: 1,
			MaximumAttempts:    10,
		},
	})
	fs := make([]workflow.Future, n)
	for i := range fs {
		fs[i] = workflow.ExecuteActivity(ctx, ReserveSeatActivity, SeatRequest{Seat: seat, RequestID: strconv.Itoa(i)})
	}
	out := make([]string, n)
	for i, f := range fs {
		if err := f.Get(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// txEnv is a worker whose store is a pgstore, with the seat ledger in its
// database and the transactional activity registered.
type txEnv struct {
	*env
	seats  *seats
	ledger *seatLedger
}

func newTxEnv(t *testing.T, pool *pgxpool.Pool, schema string, st store.Store, opts interceptor.Options) *txEnv {
	t.Helper()
	e := &txEnv{env: newEnv(t, st, opts), ledger: newSeatLedger(t, pool, schema)}
	e.seats = &seats{table: e.ledger.table}
	require.NoError(t, e.worker.Register(e.seats.declaration()))
	e.worker.RegisterWorkflow(SeatCalls)
	return e
}

func txStore(t *testing.T, pool *pgxpool.Pool, schema string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(pool, pgstore.Options{Schema: schema, PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, s.EnsureSchema(context.Background()))
	t.Cleanup(s.Close)
	return s
}

// The body fails twice after writing its row: each time the transaction
// rolls back, the key is freed and the retry policy runs it again. One
// effect in the end, nobody asked.
func TestTransactionalBodyFails(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	e := newTxEnv(t, pool, schema, txStore(t, pool, schema), interceptor.Options{})
	e.seats.hook = func(_ context.Context, attempt int32) error {
		if attempt < 3 {
			return fmt.Errorf("downstream refused attempt %d", attempt)
		}
		return nil
	}
	e.start()
	var got []string
	require.NoError(t, e.execute("acme", SeatCalls, &got, "12A", 1, 10*time.Second))
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "attempt-3")
	assert.Equal(t, got, e.ledger.effects(t, "12A"), "the failed attempts' rows rolled back; the third one's landed")
	assert.EqualValues(t, 3, e.seats.calls.Load())
	assert.Equal(t, 2, e.events.count(interceptor.EventReleased), "each failed attempt freed the key")
	assert.Zero(t, e.events.count(interceptor.EventIndeterminate))
}

// Two identical calls at once: the second waits for the first's commit and
// answers with it. One row.
func TestTransactionalDuplicateWaits(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	e := newTxEnv(t, pool, schema, txStore(t, pool, schema), interceptor.Options{})
	e.seats.hook = func(ctx context.Context, _ int32) error {
		// Hold the transaction open until the duplicate waits on it.
		for e.events.count(interceptor.EventWaiting) == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
		return nil
	}
	e.start()
	var got []string
	require.NoError(t, e.execute("acme", SeatCalls, &got, "12A", 2, 20*time.Second))
	require.Len(t, got, 2)
	assert.Equal(t, got[0], got[1], "the duplicate got the committed answer")
	assert.Equal(t, got[:1], e.ledger.effects(t, "12A"))
	assert.EqualValues(t, 1, e.seats.calls.Load(), "the duplicate never entered the body")
	assert.Equal(t, 1, e.events.count(interceptor.EventDeduplicated))
	assert.Zero(t, e.events.count(interceptor.EventIndeterminate))
}

// failingRenewals is the store with its renewals failing while set: a
// holder that cannot renew loses its lease while its body still runs.
type failingRenewals struct {
	*pgstore.Store
	fail atomic.Bool
}

func (s *failingRenewals) Renew(ctx context.Context, p store.RenewParams) (time.Time, error) {
	if s.fail.Load() {
		return time.Time{}, store.Unavailable("test: renew", errors.New("renewals are failing"))
	}
	return s.Store.Renew(ctx, p)
}

// The first attempt's body outlives its start-to-close timeout and its
// lease (its renewals fail): the retry takes the key over — no person
// asked, for a transactional holder that is gone left nothing behind — and
// runs the body. The first body, a zombie now, returns while the new
// holder's transaction is open: its commit fails the fence and its row
// rolls back; the new holder's lands.
func TestTransactionalZombieCommitFenced(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	st := &failingRenewals{Store: txStore(t, pool, schema)}
	e := newTxEnv(t, pool, schema, st, interceptor.Options{Lease: time.Second})
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	e.seats.hook = func(ctx context.Context, attempt int32) error {
		if attempt == 1 {
			st.fail.Store(true)
			<-release // ignores its context: a zombie
			return nil
		}
		st.fail.Store(false)
		free()
		// Keep the new holder's transaction open until the zombie's commit
		// has been refused.
		for e.events.count(interceptor.EventSuperseded) == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
		return nil
	}
	e.start()
	var got []string
	require.NoError(t, e.execute("acme", SeatCalls, &got, "12A", 1, 2*time.Second))
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "attempt-2")
	assert.Equal(t, got, e.ledger.effects(t, "12A"), "the zombie's row rolled back, the new holder's landed")
	assert.EqualValues(t, 2, e.seats.calls.Load())
	assert.Equal(t, 1, e.events.count(interceptor.EventTakenOver))
	assert.Equal(t, 1, e.events.count(interceptor.EventSuperseded), "the zombie's commit was refused")
	assert.Zero(t, e.events.count(interceptor.EventIndeterminate))
}

// armedTracer sets a fault on the proxy when the transactional completion
// statement ends, so the fault falls on the COMMIT that follows it.
type armedTracer struct {
	armed atomic.Bool
	fault func()
}

func (a *armedTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (a *armedTracer) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if d.Err == nil && strings.HasPrefix(d.CommandTag.String(), "SELECT") && a.armed.Load() {
		// The completion is a SELECT over the fenced UPDATE; the only
		// statements of the body are INSERTs.
		a.armed.Store(false)
		a.fault()
	}
}

// proxiedPool is a pool on the test database through a netfault proxy,
// with the tracer installed.
func proxiedPool(t *testing.T, tracer pgx.QueryTracer) (*netfault.Proxy, *pgxpool.Pool) {
	t.Helper()
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
	cfg.ConnConfig.Tracer = tracer
	cfg.MaxConns, cfg.MinConns = 4, 0
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return proxy, pool
}

// The connection drops at COMMIT. The record decides: when the COMMIT's
// answer was lost after it landed, the call answers with it; when the
// COMMIT never arrived whole, nothing landed, the key is freed and the
// retry runs the body again. Never twice.
func TestTransactionalConnectionDropsAtCommit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		dir    netfault.Direction
		landed bool
	}{
		{"AnswerLostAfterItLanded", netfault.Down, true},
		{"CommitCutOnItsWay", netfault.Up, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pool, schema := pgenv.Postgres(t)
			tracer := &armedTracer{}
			proxy, via := proxiedPool(t, tracer)
			tracer.fault = func() { proxy.CutNext(c.dir, 1) }
			s, err := pgstore.New(via, pgstore.Options{Schema: schema, Clock: store.SystemClock{},
				PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond})
			require.NoError(t, err)
			require.NoError(t, s.EnsureSchema(context.Background()))
			t.Cleanup(s.Close)
			e := newTxEnv(t, pool, schema, s, interceptor.Options{})
			e.seats.hook = func(context.Context, int32) error {
				if e.seats.calls.Load() == 1 {
					tracer.armed.Store(true)
				}
				return nil
			}
			e.start()
			var got []string
			require.NoError(t, e.execute("acme", SeatCalls, &got, "12A", 1, 10*time.Second))
			require.Len(t, got, 1)
			assert.Equal(t, 1, proxy.Stats().Cut, "the COMMIT's connection was cut")
			assert.Equal(t, got, e.ledger.effects(t, "12A"), "one effect, the one answered")
			assert.Zero(t, e.events.count(interceptor.EventIndeterminate))
			if c.landed {
				assert.Contains(t, got[0], "attempt-1")
				assert.EqualValues(t, 1, e.seats.calls.Load(), "a commit that landed ran again")
				assert.Equal(t, 1, e.events.count(interceptor.EventCompleted))
			} else {
				assert.Contains(t, got[0], "attempt-2")
				assert.EqualValues(t, 2, e.seats.calls.Load())
				assert.Equal(t, 1, e.events.count(interceptor.EventReleased), "the key was freed for the retry")
			}
		})
	}
}

// The environment of a transactional worker process (see
// txWorkerProcess): the test binary, started again with these set.
const (
	txWorkerEnv       = "IDEMPOTENCY_TX_WORKER"
	txWorkerFrontend  = "IDEMPOTENCY_TX_FRONTEND"
	txWorkerNamespace = "IDEMPOTENCY_TX_NAMESPACE"
	txWorkerQueue     = "IDEMPOTENCY_TX_QUEUE"
	txWorkerSchema    = "IDEMPOTENCY_TX_SCHEMA"
	txWorkerMarker    = "IDEMPOTENCY_TX_MARKER"
	// txWorkerMode picks the process's part (txModeMidBody when unset).
	txWorkerMode = "IDEMPOTENCY_TX_MODE"
)

// The parts a worker process plays.
const (
	// txModeMidBody: the transactional body writes its row, then is killed.
	txModeMidBody = ""
	// txModePlain: a worker of the rollout before the declaration became
	// Transactional: ReserveSeat is a plain EFFECTFUL activity whose body
	// writes its row outside any transaction (it lands at once), then is
	// killed.
	txModePlain = "plain"
	// txModeDiesBeforeMark: a transactional worker whose store calls to
	// mark a key indeterminate never return: it is killed there, after
	// taking a key over, before its mark lands.
	txModeDiesBeforeMark = "dies-before-mark"
)

// hangingMarks is a store whose MarkIndeterminate announces itself through
// the marker file and never returns.
type hangingMarks struct {
	*pgstore.Store
	marker string
}

func (s *hangingMarks) MarkIndeterminate(context.Context, store.MarkIndeterminateParams) error {
	_ = os.WriteFile(s.marker, []byte(strconv.Itoa(os.Getpid())), 0o644)
	select {} // killed here
}

// txWorkerProcess is a worker process that plays the part txWorkerMode
// names; the test kills it where that part says.
func txWorkerProcess() error {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgenv.PostgresURL())
	if err != nil {
		return err
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	schema, marker := os.Getenv(txWorkerSchema), os.Getenv(txWorkerMarker)
	s, err := pgstore.New(pool, pgstore.Options{Schema: schema})
	if err != nil {
		return err
	}
	defer s.Close()
	var st store.Store = s
	if os.Getenv(txWorkerMode) == txModeDiesBeforeMark {
		st = &hangingMarks{Store: s, marker: marker}
	}
	c, err := worker.Dial(client.Options{HostPort: os.Getenv(txWorkerFrontend), Namespace: os.Getenv(txWorkerNamespace)}, zap.NewNop())
	if err != nil {
		return err
	}
	defer c.Close()
	w, err := worker.New(c, os.Getenv(txWorkerQueue), worker.Options{Idempotency: interceptor.Options{Store: st, Lease: 2 * time.Second}})
	if err != nil {
		return err
	}
	table := pgx.Identifier{schema, "seats"}.Sanitize()
	killedHere := func(context.Context, int32) error {
		if err := os.WriteFile(marker, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return err
		}
		select {} // killed here
	}
	acts := &seats{table: table, hook: killedHere}
	decl := acts.declaration()
	switch os.Getenv(txWorkerMode) {
	case txModePlain:
		plain := func(ctx context.Context, req SeatRequest) (string, error) {
			effect := fmt.Sprintf("%s/attempt-%d/pid-%d", req.Seat, sdkactivity.GetInfo(ctx).Attempt, os.Getpid())
			if _, err := pool.Exec(ctx, "INSERT INTO "+table+" (seat, effect) VALUES ($1, $2)", req.Seat, effect); err != nil {
				return "", err
			}
			return "", killedHere(ctx, 0)
		}
		decl = activity.MustDeclare(plain, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"seat"},
			Name: ReserveSeatActivity})
	case txModeDiesBeforeMark:
		acts.hook = nil
	}
	if err := w.Register(decl); err != nil {
		return err
	}
	w.RegisterWorkflow(SeatCalls)
	return w.Run(nil)
}

// txProcess is a worker process a test started.
type txProcess struct {
	cmd    *exec.Cmd
	out    *strings.Builder
	marker string
	waited chan error
}

// startTxProcess starts a worker process playing mode on queue.
func startTxProcess(t *testing.T, mode, queue, schema string) *txProcess {
	t.Helper()
	p := &txProcess{out: &strings.Builder{}, marker: filepath.Join(t.TempDir(), "marker"), waited: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), txWorkerEnv+"=1", txWorkerMode+"="+mode,
		txWorkerFrontend+"="+server.GetFrontendHostPort(), txWorkerNamespace+"="+server.GetDefaultNamespace(),
		txWorkerQueue+"="+queue, txWorkerSchema+"="+schema, txWorkerMarker+"="+p.marker)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(t, p.cmd.Start())
	go func() { p.waited <- p.cmd.Wait() }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	return p
}

// killAtMarker waits until the process has reached the point its part
// marks, then SIGKILLs it.
func (p *txProcess) killAtMarker(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(p.marker)
		return err == nil && len(b) > 0
	}, 60*time.Second, 20*time.Millisecond, "the worker process never reached its mark: %s", p.out)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.waited
}

// Rolling ReserveSeat out from plain EFFECTFUL to Transactional, with a
// kill at each step. Attempt 1 runs on a worker of the earlier rollout: its
// row lands outside any transaction and the worker is killed before it
// records anything. Attempt 2 runs on a transactional worker, takes the key
// over to mark it indeterminate and is killed before its mark lands.
// Attempt 3, on a healthy transactional worker, finds attempt 2's claim
// gone: the key may hold attempt 1's effect, so it is marked, not run again.
// One row.
func TestTransactionalRolloutWithKills(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := txStore(t, pool, schema)
	ledger := newSeatLedger(t, pool, schema)
	queue := testenv.UniqueName("tq")

	old := startTxProcess(t, txModePlain, queue, schema)
	c := newClient(server, worker.ClientOptions(client.Options{}, zap.NewNop()))
	ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), 120*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: queue},
		SeatCalls, "12A", 1, 4*time.Second)
	require.NoError(t, err)
	old.killAtMarker(t)
	require.Len(t, ledger.effects(t, "12A"), 1, "attempt 1's row landed outside any transaction")

	taker := startTxProcess(t, txModeDiesBeforeMark, queue, schema)
	taker.killAtMarker(t)

	events := &eventLog{}
	w, err := worker.New(c, queue, worker.Options{Worker: workerOptions,
		Idempotency: interceptor.Options{Store: s, Lease: 2 * time.Second, Observer: events}})
	require.NoError(t, err)
	acts := &seats{table: ledger.table}
	require.NoError(t, w.Register(acts.declaration()))
	w.RegisterWorkflow(SeatCalls)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	var got []string
	err = run.Get(ctx, &got)
	assert.Len(t, ledger.effects(t, "12A"), 1, "the seat was reserved twice")
	assert.Zero(t, acts.calls.Load(), "the body ran over a key that may hold attempt 1's effect")
	requireIndeterminate(t, err, activity.ReasonHolderLost)
}

// The worker process is SIGKILLed mid-body, its transaction open with the
// row written: its server rolls the transaction back. The retry, on another
// worker, finds the claim held by a holder whose lease ran out, takes it
// over without asking anybody and runs the body once.
func TestTransactionalWorkerKilledMidBody(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := txStore(t, pool, schema)
	ledger := newSeatLedger(t, pool, schema)
	queue := testenv.UniqueName("tq")
	p := startTxProcess(t, txModeMidBody, queue, schema)

	c := newClient(server, worker.ClientOptions(client.Options{}, zap.NewNop()))
	ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), 90*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: queue},
		SeatCalls, "12A", 1, 4*time.Second)
	require.NoError(t, err)
	p.killAtMarker(t)
	pid, err := os.ReadFile(p.marker)
	require.NoError(t, err)

	// The retry runs on a worker of this process, on the same store.
	events := &eventLog{}
	w, err := worker.New(c, queue, worker.Options{Worker: workerOptions,
		Idempotency: interceptor.Options{Store: s, Lease: 2 * time.Second, Observer: events}})
	require.NoError(t, err)
	acts := &seats{table: ledger.table}
	require.NoError(t, w.Register(acts.declaration()))
	w.RegisterWorkflow(SeatCalls)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	var got []string
	require.NoError(t, run.Get(ctx, &got))
	require.Len(t, got, 1)
	assert.NotContains(t, got[0], "pid-"+string(pid), "the killed worker's effect")
	assert.Equal(t, got, ledger.effects(t, "12A"), "the killed body's row rolled back; the retry's landed")
	assert.EqualValues(t, 1, acts.calls.Load())
	assert.Equal(t, 1, events.count(interceptor.EventTakenOver), "the retry took the dead holder's claim over")
	assert.Zero(t, events.count(interceptor.EventIndeterminate), "nobody is asked")
}

// A transactional declaration is refused at registration, saying why, on a
// store that keeps its records outside any database the body can write to,
// and on a pgstore whose pool is not the one the declaration names.
func TestTransactionalRefusedAtRegistration(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	rc, prefix := redisenv.Redis(t)
	rs, err := redisstore.New(rc, redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rs.Close() })
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	pg := txStore(t, pool, schema)
	other := pgenv.PostgresPool(t, 1) // the same database, another pool
	acts := &seats{}
	named := func(db any) *activity.Declaration {
		d, err := activity.Declare(acts.Reserve, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"seat"},
			Transactional: true, TransactionalDB: db, Name: ReserveSeatActivity})
		require.NoError(t, err)
		return d
	}
	for _, c := range []struct {
		name     string
		store    store.Store
		decl     *activity.Declaration
		mentions []string
	}{
		{"Redis", rs, named(nil), []string{"*redisstore.Store", "cannot commit together"}},
		{"Memory", mem, named(nil), []string{"*store.Memory", "cannot commit together"}},
		{"ForeignPool", pg, named(other), []string{"*pgstore.Store", "another *pgxpool.Pool"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.store, interceptor.Options{})
			err := e.worker.Register(c.decl)
			require.ErrorIs(t, err, worker.ErrRegistration)
			require.ErrorIs(t, err, store.ErrNotTransactional)
			for _, m := range c.mentions {
				assert.Contains(t, err.Error(), m)
			}
			_, ok := e.worker.Interceptor().Declaration(ReserveSeatActivity)
			assert.False(t, ok, "a refused declaration was applied")
		})
	}
	// The store's own pool is accepted.
	e := newEnv(t, pg, interceptor.Options{})
	require.NoError(t, e.worker.Register(named(pool)))
}

// SeatAfterTimeout reserves seat with startToClose and at most attempts
// attempts; if that call fails, it reports how (timeout or indeterminate),
// waits a while and makes the call again with room to finish. It returns
// how the first call failed and the second call's answer.
func SeatAfterTimeout(ctx workflow.Context, seat string, startToClose time.Duration, attempts int32) ([]string, error) {
	call := func(startToClose time.Duration, attempts int32) (string, error) {
		ctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: startToClose,
			RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: attempts},
		})
		var r string
		err := workflow.ExecuteActivity(ctx, ReserveSeatActivity, SeatRequest{Seat: seat, RequestID: "once"}).Get(ctx, &r)
		return r, err
	}
	_, err := call(startToClose, attempts)
	var te *temporal.TimeoutError
	first := "ok"
	if _, ok := activity.AsIndeterminate(err); ok {
		first = "indeterminate"
	} else if errors.As(err, &te) {
		first = "timeout"
	} else if err != nil {
		first = err.Error()
	}
	if err := workflow.Sleep(ctx, 3*time.Second); err != nil {
		return nil, err
	}
	r, err := call(10*time.Second, 2)
	return []string{first, r}, err
}

// A transactional call whose attempts Temporal timed out is never
// indeterminate: its outcome is in the record (the commit and the outcome
// are one), so it reaches the workflow as Temporal's own timeout, and a
// call made again answers from the record. (An EFFECTFUL call's timeout is
// typed indeterminate, timed_out; the transactional fault round found
// transactional calls typed so too, 33 per 100 workflows.)
func TestTransactionalTimeoutIsNotIndeterminate(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	e := newTxEnv(t, pool, schema, txStore(t, pool, schema), interceptor.Options{Lease: time.Second})
	e.worker.RegisterWorkflow(SeatAfterTimeout)
	e.seats.hook = func(ctx context.Context, attempt int32) error {
		if attempt == 1 {
			time.Sleep(5 * time.Second) // outlives its attempts by seconds (a loaded machine starts an attempt late); commits late
		}
		return nil
	}
	e.start()
	var got []string
	require.NoError(t, e.execute("acme", SeatAfterTimeout, &got, "14C", time.Second, int32(2)))
	require.Len(t, got, 2)
	assert.Equal(t, "timeout", got[0], "a transactional call is never indeterminate")
	assert.Equal(t, []string{got[1]}, e.ledger.effects(t, "14C"), "the late commit is the one effect, and the call again answers with it")
}
