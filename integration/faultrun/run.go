package faultrun

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/netfault"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/worker"
)

// Store kinds a round runs against.
const (
	StorePostgres = "postgres"
	StoreRedis    = "redis"
	// StoreRedisVolatile is the control round: Redis without persistence,
	// so a restart loses every record, which is outside the promise. The
	// run must find duplicates there.
	StoreRedisVolatile = "redis-volatile"
	// StorePostgresFailover is PostgreSQL with an asynchronous standby,
	// whose replication link is slowed by Config.FailoverDelay: the
	// round's store restarts are failovers (the primary killed, the
	// standby promoted; the workers reach it through a multi-host URL
	// with target_session_attrs=read-write). It measures what a failover
	// loses: duplicates are expected.
	StorePostgresFailover = "postgres-failover"
	// StorePostgresSyncFailover is StorePostgresFailover with a
	// synchronous standby (synchronous_standby_names='*',
	// synchronous_commit=on): a failover loses nothing acknowledged.
	StorePostgresSyncFailover = "postgres-sync-failover"
	// StoreCitusWorker is PostgreSQL on a running Citus cluster
	// (Config.CitusURL), the store in the portable mode DetectCapabilities
	// answers there, on a table of the round's own distributed by tenant:
	// the round's store restarts stop the worker node that holds the
	// round's tenant (pg_ctl stop -m immediate) and start it again after
	// StoreDown.
	StoreCitusWorker = "citus"
	// StoreCitusCoordinator is StoreCitusWorker with the coordinator
	// stopped and started instead.
	StoreCitusCoordinator = "citus-coordinator"
)

// Config is one round.
type Config struct {
	// Frontend is the Temporal frontend's host:port. Required.
	Frontend string
	// Namespace defaults to "default".
	Namespace string
	// Store is StorePostgres, StoreRedis, StoreRedisVolatile,
	// StorePostgresFailover, StorePostgresSyncFailover, StoreCitusWorker or
	// StoreCitusCoordinator.
	Store string
	// CitusURL is the coordinator of a running Citus cluster (a
	// PostgreSQL URL) for StoreCitusWorker and StoreCitusCoordinator; its
	// nodes run on this machine (the round stops and starts them with
	// pg_ctl). scripts/citus-cluster.sh starts one.
	CitusURL string
	// FailoverDelay is how long the replication link of a failover round
	// (StorePostgresFailover, StorePostgresSyncFailover) holds what the
	// primary sends. Defaults to 200 milliseconds ([DefaultFailoverDelay]).
	FailoverDelay time.Duration
	// Probe declares the EFFECTFUL activity with a probe that asks the
	// ledger whether the effect under a key landed.
	Probe bool
	// Transactional declares the EFFECTFUL activity transactional
	// (activity.Policy.Transactional; StorePostgres only, without Probe):
	// its effect is a row of LedgerTable, in the store's database, written
	// in the transaction that records its outcome. Such a round must also
	// end with no indeterminate outcome.
	Transactional bool
	// AwaitDecision turns the workers' Options.AwaitDecision on and plays
	// the person: every waiting key is decided from the ledger through the
	// idempotency.decide Update (see Summary.Person).
	AwaitDecision bool
	// WaitAfterProbeRerun turns the workers' Options.WaitAfterProbeRerun
	// on (with AwaitDecision): a call the probe's answer ran again that
	// fails again waits once more. Not for a mixed fleet: the previous
	// release's worker has no such flag.
	WaitAfterProbeRerun bool
	// PersonDelay is how long a wait stands before the person decides it
	// (they are paged, not instant). Defaults to 10s.
	PersonDelay time.Duration
	// WorkerCommand is the argv prefix that starts a worker process; the
	// worker's flags are appended. WorkerEnv is added to its environment.
	WorkerCommand []string
	WorkerEnv     []string
	// PreviousWorkerCommand, when set, makes the fleet mixed: every other
	// worker process the run starts (and every replacement of a killed
	// one, in turn) runs it instead, a worker of the previous release,
	// with PreviousWorkerEnv — the fleet of a rolling deploy or a rollback,
	// old and new workers on one task queue and one store.
	PreviousWorkerCommand []string
	PreviousWorkerEnv     []string
	// Workers is how many worker processes run at once (at least 3).
	Workers int
	// Workflows is how many workflows the round starts; Concurrency bounds
	// how many run at once.
	Workflows   int
	Concurrency int
	// KillEvery is how often a random worker is SIGKILLed and replaced;
	// zero kills none. MaxKills bounds the kills (zero: no bound).
	KillEvery time.Duration
	MaxKills  int
	// Restarts is how many times the store is stopped hard and started
	// again, spread over the round; StoreDown is how long it stays down.
	Restarts  int
	StoreDown time.Duration
	// Bound is how long a workflow may take before it counts as hung.
	Bound time.Duration
	// Lease is the dispatcher's claim lease in the workers.
	Lease time.Duration
	// StartToClose is the activities' start-to-close timeout; slow bodies
	// take 1.5 times as long.
	StartToClose time.Duration
	// Pause separates a workflow's pair of calls from its third.
	Pause time.Duration
	// StartEvery paces the workflow starts, so that at any moment some
	// workflows are in each phase (the pair, the pause, the third call).
	StartEvery time.Duration
	// StoreTimeout is the dispatcher's Options.StoreTimeout in the workers:
	// the budget of the store calls made after a body returned. Zero leaves
	// the library's default (interceptor.DefaultStoreTimeout, 10s).
	StoreTimeout time.Duration
	// Network puts a TCP proxy (loopback, internal/netfault) between the
	// workers and the store — the workers are given its address, the store
	// restarts behind it — and runs a nemesis on it while the load runs:
	// replies held for less or more than a store call's budget, connections
	// cut in the middle of a reply, one direction stalled, every connection
	// cut, new ones refused. One fault at a time, each healed within
	// NetworkHold; the sequence of faults is fixed by Seed.
	Network bool
	// NetworkEvery is the mean pause between two network faults (each
	// pause is drawn between half and one and a half of it). Defaults to 2s.
	NetworkEvery time.Duration
	// NetworkHold bounds how long a fault lasts before it heals, and so the
	// longest a reply is held; a long delay holds replies between
	// StartToClose and NetworkHold. Defaults to twice StartToClose (4s);
	// raised to StartToClose if below it.
	NetworkHold time.Duration
	// NetworkShort bounds a short delay, which holds replies for less than
	// any store call's budget. Defaults to 250ms.
	NetworkShort time.Duration
	// Seed makes the behaviour mix and the network faults reproducible.
	Seed uint64
	// Dir keeps the ledger and the worker logs; a temporary directory
	// (removed at the end) when empty.
	Dir string
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
}

func (c *Config) defaults() error {
	if c.Frontend == "" || len(c.WorkerCommand) == 0 {
		return errors.New("faultrun: Frontend and WorkerCommand are required")
	}
	switch c.Store {
	case StorePostgres, StoreRedis, StoreRedisVolatile:
	case StorePostgresFailover, StorePostgresSyncFailover:
		if c.Network || c.Transactional {
			return errors.New("faultrun: a failover round runs without Network and Transactional")
		}
		if c.FailoverDelay <= 0 {
			c.FailoverDelay = DefaultFailoverDelay
		}
		if c.Restarts > 1 {
			return errors.New("faultrun: a failover round fails over once (Restarts 1)")
		}
	case StoreCitusWorker, StoreCitusCoordinator:
		if c.Network || c.Transactional || len(c.PreviousWorkerCommand) > 0 {
			return errors.New("faultrun: a Citus round runs without Network, Transactional and a previous release's workers")
		}
		if c.CitusURL == "" {
			return errors.New("faultrun: a Citus round needs Config.CitusURL, the coordinator of a running cluster (scripts/citus-cluster.sh starts one)")
		}
	default:
		return fmt.Errorf("faultrun: store %q: want %s, %s, %s, %s, %s, %s or %s", c.Store, StorePostgres, StoreRedis, StoreRedisVolatile,
			StorePostgresFailover, StorePostgresSyncFailover, StoreCitusWorker, StoreCitusCoordinator)
	}
	if c.Transactional && (c.Store != StorePostgres || c.Probe) {
		return errors.New("faultrun: a transactional round runs on postgres, without a probe")
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	if c.Workers < 3 {
		c.Workers = 3
	}
	if c.Workflows <= 0 {
		c.Workflows = 30
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.StoreDown <= 0 {
		c.StoreDown = time.Second
	}
	if c.Bound <= 0 {
		c.Bound = 2 * time.Minute
	}
	if c.Lease <= 0 {
		c.Lease = 3 * time.Second
	}
	if c.StartToClose <= 0 {
		c.StartToClose = 2 * time.Second
	}
	if c.Pause <= 0 {
		c.Pause = 1500 * time.Millisecond
	}
	if c.StartEvery <= 0 {
		c.StartEvery = 100 * time.Millisecond
	}
	if c.PersonDelay <= 0 {
		c.PersonDelay = 10 * time.Second
	}
	if c.NetworkEvery <= 0 {
		c.NetworkEvery = 2 * time.Second
	}
	if c.NetworkHold <= 0 {
		c.NetworkHold = 2 * c.StartToClose
	}
	c.NetworkHold = max(c.NetworkHold, c.StartToClose)
	if c.NetworkShort <= 0 {
		c.NetworkShort = 250 * time.Millisecond
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}

// Summary is what a round found.
type Summary struct {
	Store     string
	Workflows int
	// Completed workflows returned a result; Hung did not within Bound;
	// Failed ended with an error of their own.
	Completed, Hung, Failed int
	// Calls counts activity calls by the workflows, Charge and Reserve.
	Calls int
	// Effects counts Charge effects in the ledger; Keys the orders with at
	// least one.
	Effects, Keys int
	// Duplicates is the number of orders with more than one effect;
	// ExtraEffects the effects beyond the first.
	Duplicates, ExtraEffects int
	// ReserveRepeats counts IDEMPOTENT effects beyond the first per seat
	// (allowed by the kind, reported for information).
	ReserveRepeats int
	// Results counts calls that answered with an effect; Unbacked those
	// whose effect is not in the ledger.
	Results, Unbacked int
	// Indeterminate counts calls by reason; Landed those among them whose
	// order's effect is in the ledger.
	Indeterminate map[string]int
	Landed        map[string]int
	// AskedKeys counts the orders with at least one indeterminate call —
	// the decisions a person would be asked for — and AskedLanded those
	// among them whose effect is in the ledger.
	AskedKeys, AskedLanded int
	// Errors counts the other call outcomes by class (timeout,
	// application:<type>, other); Untyped the ones of class other.
	Errors  map[string]int
	Untyped int
	// TornLines are ledger lines cut short by a kill (no body answered).
	TornLines int
	// Kills and Restarts are the faults injected.
	Kills, Restarts int
	// Takeovers counts the EFFECTFUL (Charge) claims that superseded a
	// lapsed holder's token, TakeoversUnanswered those among them that
	// returned an error (the store may have taken the key over all the
	// same, or never seen the claim), and StoreErrors the
	// store calls that failed, by operation (OpClaim, OpTakeover, …): the
	// recovery paths the round reached, as the workers noted them.
	Takeovers, TakeoversUnanswered int
	StoreErrors                    map[string]int
	// Network says the round ran with the network nemesis (Config.Network);
	// NetFaults counts its faults by kind (NetDelayShort, …), and
	// ProxyConns, ProxyRefused and ProxyCut the connections the proxy
	// forwarded, refused, and cut (whole, or in the middle of a reply).
	Network   bool
	NetFaults map[string]int
	// Transactional says the EFFECTFUL activity was transactional
	// (Config.Transactional): then an indeterminate outcome is a problem.
	Transactional                      bool
	ProxyConns, ProxyRefused, ProxyCut int
	Elapsed                            time.Duration
	// Person is what the person did in a round with AwaitDecision; nil
	// without.
	Person *PersonSummary
	// Samples keep a few messages of unexpected errors, the answers not in
	// the ledger, and each duplicate (up to 20): its effects — worker PID,
	// call, idempotency key — and what the workflow's calls answered.
	Samples []string
}

// Run runs one round and returns its summary. It returns an error only when
// the round could not be run (a server that would not start); what the
// round found is in the summary, judged by Summary.Problems.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	began := time.Now()
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "faultrun-")
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.RemoveAll(d) }()
		dir = d
	}
	ledgerDir := filepath.Join(dir, "ledger")
	if err := os.MkdirAll(ledgerDir, 0o755); err != nil {
		return nil, err
	}

	inst, kind, err := startInstance(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer inst.close()
	if pair, ok := inst.(*postgresPair); ok {
		pair.slow(cfg.FailoverDelay)
		cfg.Logf("%s: the standby streams through a link holding what the primary sends %v", cfg.Store, cfg.FailoverDelay)
	}
	var pgTable string
	if cl, ok := inst.(*citusCluster); ok {
		pgTable = cl.table
		cfg.Logf("%s: table %s; a restart stops %s", cfg.Store, cl.table, cl.describe())
	}
	label := cfg.Store
	if cfg.Probe {
		label += "+probe"
	}
	if cfg.Transactional {
		label += "+tx"
	}
	if cfg.Network {
		label += "+net"
	}
	if cfg.AwaitDecision {
		label += "+person"
	}
	if cfg.WaitAfterProbeRerun {
		label += "+rewait"
	}
	cfg.Logf("%s: private store at %s", label, inst.addr())

	// The workers' way to the store: the store itself, or the proxy the
	// nemesis works on.
	storeAddr := inst.addr()
	var (
		proxy    *netfault.Proxy
		schedule *os.File
	)
	if cfg.Network {
		if proxy, err = netfault.Start(inst.endpoint()); err != nil {
			return nil, err
		}
		defer func() { _ = proxy.Close() }()
		storeAddr = inst.via(proxy.Addr())
		// The nemesis's schedule, time-stamped, beside the worker logs.
		if schedule, err = os.Create(filepath.Join(dir, "nemesis.log")); err != nil {
			return nil, err
		}
		defer func() { _ = schedule.Close() }()
		cfg.Logf("%s: workers reach the store through %s", label, proxy.Addr())
	}

	queue := fmt.Sprintf("faultrun-%s-%d", cfg.Store, time.Now().UnixNano())
	workerArgs := func(command []string) []string {
		argv := append(append([]string(nil), command...),
			"-frontend", cfg.Frontend, "-namespace", cfg.Namespace, "-queue", queue,
			"-store", kind, "-store-addr", storeAddr, "-ledger", ledgerDir,
			"-lease", cfg.Lease.String(), "-parent", fmt.Sprint(os.Getpid()),
			fmt.Sprintf("-probe=%t", cfg.Probe), fmt.Sprintf("-transactional=%t", cfg.Transactional),
			fmt.Sprintf("-await=%t", cfg.AwaitDecision))
		if cfg.StoreTimeout > 0 {
			argv = append(argv, "-store-timeout", cfg.StoreTimeout.String())
		}
		if cfg.WaitAfterProbeRerun {
			argv = append(argv, "-wait-after-probe-rerun")
		}
		if pgTable != "" {
			argv = append(argv, "-pg-table", pgTable)
		}
		return argv
	}
	pool := &workerPool{argv: func() []string { return workerArgs(cfg.WorkerCommand) }, env: cfg.WorkerEnv, logDir: dir}
	if len(cfg.PreviousWorkerCommand) > 0 {
		pool.previous = &workerPool{argv: func() []string { return workerArgs(cfg.PreviousWorkerCommand) }, env: cfg.PreviousWorkerEnv}
	}
	defer pool.killAll()
	for range cfg.Workers {
		if err := pool.add(); err != nil {
			return nil, err
		}
	}

	c, err := client.Dial(worker.ClientOptions(client.Options{HostPort: cfg.Frontend, Namespace: cfg.Namespace}, nil))
	if err != nil {
		return nil, err
	}
	defer c.Close()

	sum := &Summary{Store: label, Workflows: cfg.Workflows, Network: cfg.Network,
		Indeterminate: map[string]int{}, Landed: map[string]int{}, Errors: map[string]int{}}

	// Faults.
	faultCtx, stopFaults := context.WithCancel(ctx)
	var faults sync.WaitGroup
	var kills, restarts atomic.Int64
	var started atomic.Int64
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	var rngMu sync.Mutex
	if cfg.KillEvery > 0 {
		faults.Add(1)
		go func() {
			defer faults.Done()
			t := time.NewTicker(cfg.KillEvery)
			defer t.Stop()
			for {
				select {
				case <-faultCtx.Done():
					return
				case <-t.C:
				}
				if cfg.MaxKills > 0 && int(kills.Load()) >= cfg.MaxKills {
					return
				}
				rngMu.Lock()
				i := rng.IntN(cfg.Workers)
				rngMu.Unlock()
				pool.killAt(i)
				kills.Add(1)
				cfg.Logf("%s: killed worker %d (%d kills)", label, i, kills.Load())
				if err := pool.replace(i); err != nil {
					cfg.Logf("%s: replacing worker %d: %v", label, i, err)
				}
			}
		}()
	}
	if cfg.Restarts > 0 {
		faults.Add(1)
		go func() {
			defer faults.Done()
			for r := 1; r <= cfg.Restarts; r++ {
				// Restart r when r/(Restarts+1) of the workflows have started.
				threshold := int64(cfg.Workflows * r / (cfg.Restarts + 1))
				for started.Load() < threshold {
					select {
					case <-faultCtx.Done():
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
				if err := inst.kill(); err != nil {
					cfg.Logf("%s: %v", label, err)
					continue
				}
				select {
				case <-faultCtx.Done():
				case <-time.After(cfg.StoreDown):
				}
				if err := inst.start(); err != nil {
					cfg.Logf("%s: restart: %v", label, err)
					return
				}
				restarts.Add(1)
				cfg.Logf("%s: store restarted (%d)", label, restarts.Load())
			}
		}()
	}

	var nem *nemesis
	if cfg.Network {
		nem = newNemesis(&cfg, proxy, schedule, label)
		faults.Add(1)
		go func() {
			defer faults.Done()
			nem.run(faultCtx)
		}()
	}

	var who *person
	if cfg.AwaitDecision {
		who = newPerson(c, ledgerDir, cfg.PersonDelay)
		faults.Add(1)
		go func() {
			defer faults.Done()
			who.run(faultCtx)
		}()
	}

	// Load.
	behaviours := []string{BehaviourOK, BehaviourOK, BehaviourOK, BehaviourOK, BehaviourOK, BehaviourOK,
		BehaviourSlowIgnore, BehaviourSlowIgnore, BehaviourSlowRespect, BehaviourSlowRespect, BehaviourDrop}
	results := make([]*WorkflowResult, cfg.Workflows)
	var mu sync.Mutex
	sem := make(chan struct{}, cfg.Concurrency)
	var load sync.WaitGroup
	pace := time.NewTicker(cfg.StartEvery)
	defer pace.Stop()
	for i := range cfg.Workflows {
		sem <- struct{}{}
		<-pace.C
		if ctx.Err() != nil {
			// Interrupted: start no more; the summary says how many ran.
			<-sem
			sum.Workflows = i
			break
		}
		rngMu.Lock()
		b := behaviours[rng.IntN(len(behaviours))]
		rngMu.Unlock()
		in := WorkflowInput{
			Order:        fmt.Sprintf("order-%d", i),
			Seat:         fmt.Sprintf("seat-%d", i),
			Behaviour:    b,
			Slow:         cfg.StartToClose * 3 / 2,
			StartToClose: cfg.StartToClose,
			Pause:        cfg.Pause,
		}
		started.Add(1)
		load.Add(1)
		go func() {
			defer load.Done()
			defer func() { <-sem }()
			if who != nil {
				who.started(workflowID(in, queue))
				defer who.finished(workflowID(in, queue))
			}
			res, err := runWorkflow(ctx, c, queue, cfg.Bound, in)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				results[i] = res
				sum.Completed++
			case isHung(err):
				sum.Hung++
				sum.Samples = append(sum.Samples, fmt.Sprintf("%s hung: %v", in.Order, err))
			default:
				sum.Failed++
				sum.Samples = append(sum.Samples, fmt.Sprintf("%s failed: %v", in.Order, err))
			}
		}()
	}
	load.Wait()
	stopFaults()
	faults.Wait()
	pool.killAll()
	sum.Kills, sum.Restarts = int(kills.Load()), int(restarts.Load())
	if who != nil {
		sum.Person = who.summary()
	}
	if nem != nil {
		sum.NetFaults = nem.Counts()
		st := proxy.Stats()
		sum.ProxyConns, sum.ProxyRefused, sum.ProxyCut = st.Accepted, st.Refused, st.Cut
	}

	entries, torn, err := MergeLedgers(ledgerDir)
	if err != nil {
		return nil, err
	}
	if cfg.Transactional {
		rows, err := readLedgerTable(ctx, inst.addr())
		if err != nil {
			return nil, fmt.Errorf("faultrun: reading %s: %w", LedgerTable, err)
		}
		entries = append(entries, rows...)
	}
	sum.Transactional = cfg.Transactional
	events, err := ReadCallEvents(ledgerDir)
	if err != nil {
		return nil, err
	}
	sum.TornLines = torn
	sum.analyse(results, entries, events)
	sum.Elapsed = time.Since(began)
	return sum, nil
}

func startInstance(ctx context.Context, cfg *Config) (instance, string, error) {
	switch kind := cfg.Store; kind {
	case StoreCitusWorker, StoreCitusCoordinator:
		c, err := newCitusCluster(ctx, cfg.CitusURL, kind == StoreCitusCoordinator)
		if err != nil {
			return nil, "", err
		}
		return c, "citus", nil
	case StorePostgres:
		p, err := newPrivatePostgres()
		if err != nil {
			return nil, "", err
		}
		if err := ensureSchema(ctx, p.addr()); err != nil {
			p.close()
			return nil, "", err
		}
		return p, "postgres", nil
	case StorePostgresFailover, StorePostgresSyncFailover:
		p, err := newPostgresPair(ctx, kind == StorePostgresSyncFailover)
		if err != nil {
			return nil, "", err
		}
		if err := ensureSchema(ctx, p.addr()); err != nil {
			p.close()
			return nil, "", err
		}
		// The schema is on the standby before the link slows.
		if err := p.waitCaughtUp(ctx); err != nil {
			p.close()
			return nil, "", err
		}
		return p, "postgres", nil
	case StoreRedis:
		r, err := newPrivateRedis(true)
		return r, "redis", err
	default:
		r, err := newPrivateRedis(false)
		return r, "redis", err
	}
}

func ensureSchema(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	s, err := pgstore.New(pool, pgstore.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.EnsureSchema(ctx); err != nil {
		return err
	}
	_, err = pool.Exec(ctx, createLedgerTable)
	return err
}

// readLedgerTable reads the effects of a transactional round: the rows that
// committed.
func readLedgerTable(ctx context.Context, url string) ([]Entry, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, "SELECT kind, key, ikey, effect, request, pid FROM "+LedgerTable)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for rows.Next() {
		var e Entry
		if err := rows.Scan(&e.Kind, &e.Key, &e.IKey, &e.Effect, &e.Request, &e.PID); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// isHung reports whether a workflow ran past its bound: the server timed
// it out (the execution timeout is the bound), or the driver stopped
// waiting for it.
func isHung(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded)
}

func workflowID(in WorkflowInput, queue string) string { return "faultrun-" + in.Order + "-" + queue }

func runWorkflow(ctx context.Context, c client.Client, queue string, bound time.Duration, in WorkflowInput) (*WorkflowResult, error) {
	// The server ends the workflow at the bound; the driver waits a little
	// longer, so a server that does not is caught too.
	ctx, cancel := context.WithTimeout(ctx, bound+30*time.Second)
	defer cancel()
	ctx = interceptor.WithTenant(ctx, loadTenant)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflowID(in, queue),
		TaskQueue:                queue,
		WorkflowExecutionTimeout: bound,
	}, Workflow, in)
	if err != nil {
		return nil, err
	}
	var res WorkflowResult
	if err := run.Get(ctx, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (s *Summary) analyse(results []*WorkflowResult, entries []Entry, events []CallEvent) {
	s.StoreErrors = map[string]int{}
	byKey := map[string][]CallEvent{}
	for _, e := range events {
		byKey[e.Key] = append(byKey[e.Key], e)
		if e.Op == OpTakeover && e.Activity == ChargeActivity {
			s.Takeovers++
			if e.Err != "" {
				s.TakeoversUnanswered++
			}
		}
		if e.Err != "" {
			s.StoreErrors[e.Op]++
		}
	}
	effects := map[string]int{}
	charges := map[string][]Entry{}
	ids := map[string]bool{}
	seats := map[string]int{}
	for _, e := range entries {
		switch e.Kind {
		case KindCharge:
			effects[e.Key]++
			charges[e.Key] = append(charges[e.Key], e)
			ids[e.Effect] = true
		case KindReserve:
			seats[e.Key]++
			ids[e.Effect] = true
		}
	}
	for _, n := range effects {
		s.Effects += n
		s.Keys++
		if n > 1 {
			s.Duplicates++
			s.ExtraEffects += n - 1
		}
	}
	for _, n := range seats {
		s.ReserveRepeats += n - 1
	}
	// Each duplicate, as evidence: its effects (the worker process, the
	// call, the idempotency key each ran under) and what the workflow's
	// calls answered.
	calls := map[string][]CallResult{}
	for _, r := range results {
		if r != nil {
			calls[r.Order] = r.Calls
		}
	}
	dups := 0
	for _, order := range slices.Sorted(maps.Keys(charges)) {
		es := charges[order]
		if len(es) < 2 || dups == maxDuplicateSamples {
			continue
		}
		dups++
		line := fmt.Sprintf("%s charged %d times:", order, len(es))
		for _, e := range es {
			line += fmt.Sprintf(" [effect %s pid %d request %s key %s]", e.Effect, e.PID, e.Request, e.IKey)
		}
		line += "; calls:"
		for _, c := range calls[order] {
			line += " " + c.Activity + "/" + c.Request + "=" + c.Class
			if c.Reason != "" {
				line += "(" + c.Reason + ")"
			}
		}
		keys := map[string]bool{}
		for _, e := range es {
			keys[e.IKey] = true
		}
		line += "; store calls noted on its key:"
		noted := 0
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			for _, e := range byKey[k] {
				if noted == maxNotedCalls {
					line += fmt.Sprintf(" [and %d more]", len(byKey[k])-maxNotedCalls)
					break
				}
				line += " [" + e.String() + "]"
				noted++
			}
		}
		if noted == 0 {
			line += " none"
		}
		s.Samples = append(s.Samples, line)
	}
	for _, r := range results {
		if r == nil {
			continue
		}
		asked := false
		for _, c := range r.Calls {
			s.Calls++
			switch c.Class {
			case ClassOK:
				s.Results++
				if !ids[c.Effect] {
					s.Unbacked++
					s.Samples = append(s.Samples, fmt.Sprintf("%s %s answered effect %q not in the ledger", r.Order, c.Request, c.Effect))
				}
			case ClassIndeterminate:
				asked = true
				s.Indeterminate[c.Reason]++
				if effects[r.Order] > 0 {
					s.Landed[c.Reason]++
				}
			default:
				s.Errors[c.Class]++
				if c.Class == ClassOther {
					s.Untyped++
				}
				if len(s.Samples) < 20 {
					s.Samples = append(s.Samples, fmt.Sprintf("%s %s %s: %s", r.Order, c.Activity, c.Request, c.Err))
				}
			}
		}
		if asked {
			s.AskedKeys++
			if effects[r.Order] > 0 {
				s.AskedLanded++
			}
		}
	}
}

// maxDuplicateSamples bounds the duplicates described in Summary.Samples,
// and maxNotedCalls the store calls listed for each.
const (
	maxDuplicateSamples = 20
	maxNotedCalls       = 40
)

// Problems lists what breaks the promise or the run's own bounds: a key
// with more than one effect, a result not backed by the ledger, a hung or
// failed workflow, an untyped error.
func (s *Summary) Problems() []string {
	var p []string
	if s.Duplicates > 0 {
		p = append(p, fmt.Sprintf("%d keys with more than one effect (%d extra effects)", s.Duplicates, s.ExtraEffects))
	}
	if s.Unbacked > 0 {
		p = append(p, fmt.Sprintf("%d results whose effect is not in the ledger", s.Unbacked))
	}
	if s.Hung > 0 {
		p = append(p, fmt.Sprintf("%d workflows hung past the bound", s.Hung))
	}
	if s.Failed > 0 {
		p = append(p, fmt.Sprintf("%d workflows failed", s.Failed))
	}
	if s.Untyped > 0 {
		p = append(p, fmt.Sprintf("%d untyped errors", s.Untyped))
	}
	if s.Transactional {
		n := 0
		for _, c := range s.Indeterminate {
			n += c
		}
		if n > 0 || s.AskedKeys > 0 {
			p = append(p, fmt.Sprintf("%d indeterminate outcomes (%d keys for a person) for a transactional activity", n, s.AskedKeys))
		}
	}
	return p
}

// Rows returns the summary as label/value rows, in a fixed order.
func (s *Summary) Rows() [][2]string {
	rows := [][2]string{
		{"store", s.Store},
		{"workflows (completed/hung/failed)", fmt.Sprintf("%d (%d/%d/%d)", s.Workflows, s.Completed, s.Hung, s.Failed)},
		{"activity calls", fmt.Sprint(s.Calls)},
		{"effects (keys)", fmt.Sprintf("%d (%d)", s.Effects, s.Keys)},
		{"duplicate keys (extra effects)", fmt.Sprintf("%d (%d)", s.Duplicates, s.ExtraEffects)},
		{"results (not in ledger)", fmt.Sprintf("%d (%d)", s.Results, s.Unbacked)},
	}
	reasons := []string{string(activity.ReasonStoreUnavailable), string(activity.ReasonHolderLost),
		string(activity.ReasonBodyFailed), string(activity.ReasonRecorded), string(activity.ReasonKeyNotDerivable),
		string(activity.ReasonTimedOut)}
	total, landed := 0, 0
	for r, n := range s.Indeterminate {
		if !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
		total += n
		landed += s.Landed[r]
	}
	rows = append(rows, [2]string{"indeterminate (effect landed)", fmt.Sprintf("%d (%d)", total, landed)})
	for _, r := range reasons {
		rows = append(rows, [2]string{"  " + r, fmt.Sprintf("%d (%d)", s.Indeterminate[r], s.Landed[r])})
	}
	rows = append(rows, [2]string{"keys left indeterminate (effect landed)", fmt.Sprintf("%d (%d)", s.AskedKeys, s.AskedLanded)})
	rows = append(rows, s.Person.rows(s.Workflows)...)
	classes := []string{ClassTimeout, ClassOther}
	for c := range s.Errors {
		if !slices.Contains(classes, c) {
			classes = append(classes, c)
		}
	}
	sort.Strings(classes[2:])
	for _, c := range classes {
		rows = append(rows, [2]string{"error " + c, fmt.Sprint(s.Errors[c])})
	}
	rows = append(rows,
		[2]string{"idempotent repeats", fmt.Sprint(s.ReserveRepeats)},
		[2]string{"worker kills", fmt.Sprint(s.Kills)},
		[2]string{"store restarts", fmt.Sprint(s.Restarts)},
	)
	rows = append(rows, s.networkRows()...)
	failed := 0
	for _, n := range s.StoreErrors {
		failed += n
	}
	rows = append(rows,
		[2]string{"store calls failed", fmt.Sprint(failed)},
		[2]string{"Charge takeovers (unanswered)", fmt.Sprintf("%d (%d)", s.Takeovers, s.TakeoversUnanswered)},
	)
	rows = append(rows,
		[2]string{"torn ledger lines", fmt.Sprint(s.TornLines)},
		[2]string{"elapsed", s.Elapsed.Round(time.Second).String()},
	)
	return rows
}

// networkRows are the nemesis's rows: its faults by kind and what the
// proxy did; "-" in a round without it.
func (s *Summary) networkRows() [][2]string {
	if !s.Network {
		rows := [][2]string{{"network faults", "-"}}
		for _, k := range NetFaults {
			rows = append(rows, [2]string{"  " + k, "-"})
		}
		return append(rows, [2]string{"proxy connections (refused/cut)", "-"})
	}
	total := 0
	for _, n := range s.NetFaults {
		total += n
	}
	rows := [][2]string{{"network faults", fmt.Sprint(total)}}
	for _, k := range NetFaults {
		rows = append(rows, [2]string{"  " + k, fmt.Sprint(s.NetFaults[k])})
	}
	return append(rows, [2]string{"proxy connections (refused/cut)",
		fmt.Sprintf("%d (%d/%d)", s.ProxyConns, s.ProxyRefused, s.ProxyCut)})
}

// Table formats summaries side by side, one column per round.
func Table(sums ...*Summary) string {
	if len(sums) == 0 {
		return ""
	}
	// Union of labels, in first-seen order.
	var labels []string
	seen := map[string]bool{}
	values := make([]map[string]string, len(sums))
	for i, s := range sums {
		values[i] = map[string]string{}
		for _, r := range s.Rows() {
			if !seen[r[0]] {
				seen[r[0]] = true
				labels = append(labels, r[0])
			}
			values[i][r[0]] = r[1]
		}
	}
	width := 0
	for _, l := range labels {
		width = max(width, len(l))
	}
	out := ""
	for _, l := range labels {
		out += fmt.Sprintf("%-*s", width, l)
		for i := range sums {
			v := values[i][l]
			if v == "" {
				v = "-"
			}
			out += fmt.Sprintf(" | %-16s", v)
		}
		out += "\n"
	}
	return out
}
