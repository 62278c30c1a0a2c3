package faultrun

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// WorkerMain is a worker process: it runs the load's workflow and
// activities on the task queue until it is killed, its parent goes away, or
// its lifetime runs out. args are its flags (without the program name).
func WorkerMain(args []string) error {
	fs := flag.NewFlagSet("faultrun worker", flag.ContinueOnError)
	frontend := fs.String("frontend", "", "Temporal frontend host:port (required)")
	namespace := fs.String("namespace", "default", "Temporal namespace")
	queue := fs.String("queue", "", "task queue (required)")
	kind := fs.String("store", "", "postgres, citus (PostgreSQL in the mode DetectCapabilities answers) or redis (required)")
	addr := fs.String("store-addr", "", "PostgreSQL URL or Redis host:port (required)")
	ledgerDir := fs.String("ledger", "", "directory of the ledger files (required)")
	probe := fs.Bool("probe", false, "declare Charge with a probe that asks the ledger")
	transactional := fs.Bool("transactional", false, "declare Charge transactional: its effect is a row of the ledger table in the store's database")
	await := fs.Bool("await", false, "Options.AwaitDecision: indeterminate outcomes wait for a decision")
	rewait := fs.Bool("wait-after-probe-rerun", false, "Options.WaitAfterProbeRerun: a call the probe ran again that fails again waits once more")
	lease := fs.Duration("lease", 3*time.Second, "claim lease")
	storeTimeout := fs.Duration("store-timeout", 0, "the dispatcher's StoreTimeout (0: the library's default)")
	parent := fs.Int("parent", 0, "PID of the run; the worker exits when its parent is no longer it")
	maxLife := fs.Duration("max-life", 30*time.Minute, "the worker exits after this long whatever happens")
	table := fs.String("pg-table", "", "the PostgreSQL store's table (default: pgstore's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *frontend == "" || *queue == "" || *addr == "" || *ledgerDir == "" {
		return errors.New("faultrun worker: -frontend, -queue, -store-addr and -ledger are required")
	}
	watchdog(*parent, *maxLife)
	// The ledger names effects by PID: say which process this log is.
	fmt.Fprintf(os.Stderr, "faultrun worker: pid %d, store %s at %s\n", os.Getpid(), *kind, *addr)

	ledger, err := OpenLedger(*ledgerDir)
	if err != nil {
		return err
	}
	defer func() { _ = ledger.Close() }()

	st, closeStore, err := openStore(*kind, *addr, *table)
	if err != nil {
		return err
	}
	defer closeStore()
	calls, err := openCallLog(*ledgerDir)
	if err != nil {
		return err
	}
	defer func() { _ = calls.Close() }()
	if tr, ok := st.(store.Transactor); ok {
		// Keep the store's transactions visible through the wrapper.
		st = watchedTxStore{watchedStore: watchedStore{Store: st, log: calls}, Transactor: tr}
	} else {
		st = watchedStore{Store: st, log: calls}
	}

	logger := zap.NewNop()
	if os.Getenv("FAULTRUN_DEBUG") != "" {
		logger, _ = zap.NewDevelopment()
	}
	c, err := worker.Dial(client.Options{HostPort: *frontend, Namespace: *namespace}, logger)
	if err != nil {
		return fmt.Errorf("faultrun worker: dial %s: %w", *frontend, err)
	}
	defer c.Close()
	w, err := worker.New(c, *queue, worker.Options{
		Worker: sdkworker.Options{
			MaxConcurrentActivityExecutionSize: 50,
			WorkerStopTimeout:                  time.Second,
		},
		Idempotency: interceptor.Options{
			Store:         st,
			Lease:         *lease,
			StoreTimeout:  *storeTimeout,
			Identity:      fmt.Sprintf("faultrun@%d", os.Getpid()),
			AwaitDecision: *await,
			// Set only when asked: the flag is this release's.
			WaitAfterProbeRerun: *rewait,
		},
		Logger: logger,
	})
	if err != nil {
		return err
	}
	acts := &Activities{Ledger: ledger, Transactional: *transactional}
	if *probe {
		acts.LedgerDir = *ledgerDir
	}
	decls, err := acts.Declarations()
	if err != nil {
		return err
	}
	if err := w.Register(decls...); err != nil {
		return err
	}
	w.RegisterWorkflow(Workflow)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	interrupt := make(chan any)
	go func() { <-stop; close(interrupt) }()
	return w.Run(interrupt)
}

// watchdog ends the process when the run that started it is gone (its
// parent PID changes), or after maxLife: a worker must never outlive a run
// that died without killing it.
func watchdog(parent int, maxLife time.Duration) {
	deadline := time.Now().Add(maxLife)
	go func() {
		for {
			time.Sleep(250 * time.Millisecond)
			if (parent != 0 && os.Getppid() != parent) || time.Now().After(deadline) {
				os.Exit(3)
			}
		}
	}()
}

func openStore(kind, addr, table string) (store.Store, func(), error) {
	switch kind {
	case "postgres", "citus":
		cfg, err := pgxpool.ParseConfig(addr)
		if err != nil {
			return nil, nil, fmt.Errorf("faultrun worker: -store-addr: %w", err)
		}
		// A transactional body holds a connection for its whole run:
		// room for every activity slot, and for the renewals beside them.
		cfg.MaxConns = 20
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			return nil, nil, err
		}
		opts := pgstore.Options{Table: table, PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond}
		if kind == "citus" {
			// The portable mode Citus needs, as a deployment there runs.
			_, caps, err := pgstore.DetectCapabilities(context.Background(), pool)
			if err != nil {
				pool.Close()
				return nil, nil, err
			}
			opts.Capabilities = &caps
		}
		s, err := pgstore.New(pool, opts)
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		return s, func() { s.Close(); pool.Close() }, nil
	case "redis":
		rc := redis.NewClient(&redis.Options{
			Addr:        addr,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
			MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: 10 * time.Millisecond,
		})
		s, err := redisstore.New(rc, redisstore.Options{Prefix: "faultrun", PollInterval: 50 * time.Millisecond})
		if err != nil {
			_ = rc.Close()
			return nil, nil, err
		}
		return s, func() { _ = s.Close(); _ = rc.Close() }, nil
	default:
		return nil, nil, fmt.Errorf("faultrun worker: -store %q: want postgres, citus or redis", kind)
	}
}
