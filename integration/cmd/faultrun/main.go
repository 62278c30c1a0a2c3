// Command faultrun is the fault run: a Temporal server in-process, worker
// processes on one task queue sharing one store, faults while the load
// runs, and a ledger outside the store that says how many effects each key
// had. It prints a summary table, one column per round.
//
// Usage:
//
//	faultrun [flags]            run the rounds (the driver)
//	faultrun worker [flags]     one worker process (the driver starts these)
//
// The soak documented in docs/RELIABILITY.md:
//
//	cd integration && GOTOOLCHAIN=go1.27.3 go run ./cmd/faultrun -workflows 2000 -workers 4 -kill-every 5s -restarts 4
//	cd integration && GOTOOLCHAIN=go1.27.3 go run ./cmd/faultrun -workflows 2000 -workers 4 -kill-every 5s -restarts 4 -stores postgres,redis -probe on
//	cd integration && GOTOOLCHAIN=go1.27.3 go run ./cmd/faultrun -workflows 1500 -workers 4 -kill-every 5s -restarts 3 -stores postgres,redis -network on -network-every 1s -store-timeout 1s
//	cd integration && GOTOOLCHAIN=go1.27.3 go run ./cmd/faultrun -workflows 1000 -workers 4 -kill-every 5s -restarts 3 -stores postgres -transactional
//
// With -transactional the EFFECTFUL activity is declared transactional: its
// effect is a row of a table in the store's own PostgreSQL, committed in the
// transaction that records its outcome, and a round with any indeterminate
// outcome fails.
//
//	cd integration && GOTOOLCHAIN=go1.27.3 go run ./cmd/faultrun -workflows 300 -workers 3 -kill-every 3s -restarts 1 -stores postgres,redis -probe both -await
//
// With -await the workers run with AwaitDecision and the driver plays the
// person: it decides every waiting key from the ledger through the
// idempotency.decide Update, and the table counts its decisions per 100
// workflows by reason, the decisions refused and why, and the time from
// the outcome turning indeterminate to the decision applied.
//
// With -network on the workers reach the store through a loopback TCP proxy
// on which a nemesis injects network faults (replies held, cut mid-reply,
// one direction stalled, connections cut or refused); -seed fixes their
// sequence. Each worker notes its takeovers and failed store calls beside
// the ledger (calls-PID.jsonl), and a key with two effects is printed with
// its effects and those calls; -dir keeps them with the worker logs (set
// FAULTRUN_DEBUG=1 for the dispatcher's events in the logs).
//
// -stores postgres-failover,postgres-sync-failover runs the PostgreSQL
// failover rounds: the store's restart (one a round) is its primary killed
// and its standby promoted, the standby streaming through a link that holds
// what the primary sends for -failover-delay; the asynchronous round's
// duplicates are what the failover lost, reported and not a failure.
//
// -stores citus,citus-coordinator runs the Citus rounds on the running
// cluster -citus-url names (its nodes on this machine, synchronous_commit
// on): pgstore in its portable mode on a table of the round's own,
// distributed by tenant; each store restart stops the worker node holding
// the round's tenant (citus) or the coordinator (citus-coordinator) with
// pg_ctl stop -m immediate and starts it again after -store-down:
//
//	dir=$(mktemp -d) && url=$(scripts/citus-cluster.sh start $dir)   # then synchronous_commit on, as scripts/test-citus.sh does
//	cd integration && GOTOOLCHAIN=go1.27.3 go run ./cmd/faultrun -stores citus,citus-coordinator -citus-url "$url" -workflows 200 -workers 3 -kill-every 3s -restarts 1 -store-down 2s -await
//
// It exits 1 when a round under the promise (postgres, redis,
// postgres-sync-failover, citus, citus-coordinator) breaks it —
// a key with two effects, an answer not in the ledger, a hung workflow, an
// untyped error — or when the control round (redis-volatile) finds no
// duplicate; 2 when a round could not be run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/server/temporaltest"

	"github.com/tesserix/idempotency/integration/faultrun"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		if err := faultrun.WorkerMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "faultrun worker:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(drive(os.Args[1:]))
}

func drive(args []string) int {
	fs := flag.NewFlagSet("faultrun", flag.ContinueOnError)
	stores := fs.String("stores", "postgres,redis,redis-volatile", "rounds to run, comma-separated: postgres, redis, redis-volatile (the control), postgres-failover, postgres-sync-failover (a primary failover, -failover-delay on the replication link), citus, citus-coordinator (a Citus worker node, or the coordinator, stopped at each restart; -citus-url)")
	citusURL := fs.String("citus-url", os.Getenv("IDEMPOTENCY_TEST_CITUS_URL"), "the coordinator of a running Citus cluster on this machine, for the citus and citus-coordinator rounds (scripts/citus-cluster.sh starts one)")
	failoverDelay := fs.Duration("failover-delay", faultrun.DefaultFailoverDelay, "what the replication link of a failover round holds what the primary sends for")
	workflows := fs.Int("workflows", 200, "workflows per round")
	workers := fs.Int("workers", 3, "worker processes (at least 3)")
	concurrency := fs.Int("concurrency", 32, "workflows running at once")
	startEvery := fs.Duration("start-every", 50*time.Millisecond, "pause between two workflow starts")
	killEvery := fs.Duration("kill-every", 4*time.Second, "SIGKILL a random worker and start a replacement this often (0: never)")
	maxKills := fs.Int("max-kills", 0, "stop killing after this many (0: no bound)")
	restarts := fs.Int("restarts", 2, "hard store restarts per round, spread over the round")
	storeDown := fs.Duration("store-down", time.Second, "how long the store stays down at each restart")
	bound := fs.Duration("bound", 3*time.Minute, "a workflow running longer than this is hung")
	lease := fs.Duration("lease", 3*time.Second, "the dispatcher's claim lease in the workers")
	startToClose := fs.Duration("start-to-close", 2*time.Second, "the activities' start-to-close timeout (slow bodies take 1.5 times that)")
	pause := fs.Duration("pause", 1500*time.Millisecond, "pause between a workflow's pair of calls and its retry-like third")
	storeTimeout := fs.Duration("store-timeout", 0, "the dispatcher's StoreTimeout in the workers (0: the library's default, 10s)")
	network := fs.String("network", "off", "put a TCP proxy between the workers and the store and inject network faults on it: off, on, or both (each round twice)")
	networkEvery := fs.Duration("network-every", 2*time.Second, "mean pause between two network faults")
	networkHold := fs.Duration("network-hold", 0, "longest a network fault lasts before it heals, and longest a reply is held (0: twice -start-to-close)")
	networkShort := fs.Duration("network-short", 250*time.Millisecond, "longest short reply delay (below every store call's budget)")
	seed := fs.Uint64("seed", 1, "seed of the behaviour mix, the kills and the network faults")
	keep := fs.String("dir", "", "keep ledgers and worker logs under this directory (default: a temporary one, removed)")
	transactional := fs.Bool("transactional", false, "declare the EFFECTFUL activity transactional: its effect is a row in the store's database, committed with its outcome (postgres rounds only, without -probe)")
	probe := fs.String("probe", "off", "declare the EFFECTFUL activity with a probe that asks the ledger: off, on, or both (each round twice)")
	await := fs.Bool("await", false, "AwaitDecision on, and a person who decides every waiting key from the ledger (the idempotency.decide Update)")
	verbose := fs.Bool("v", false, "log progress")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultrun:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	srv := temporaltest.NewServer()
	defer srv.Stop()
	logf := func(string, ...any) {}
	if *verbose {
		logf = func(format string, a ...any) {
			fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", a...)
		}
	}
	var probes []bool
	switch *probe {
	case "off":
		probes = []bool{false}
	case "on":
		probes = []bool{true}
	case "both":
		probes = []bool{false, true}
	default:
		fmt.Fprintf(os.Stderr, "faultrun: -probe %q: want off, on or both\n", *probe)
		return 2
	}
	var networks []bool
	switch *network {
	case "off":
		networks = []bool{false}
	case "on":
		networks = []bool{true}
	case "both":
		networks = []bool{false, true}
	default:
		fmt.Fprintf(os.Stderr, "faultrun: -network %q: want off, on or both\n", *network)
		return 2
	}
	type round struct {
		store   string
		probe   bool
		network bool
	}
	var rounds []round
	for _, st := range strings.Split(*stores, ",") {
		for _, p := range probes {
			for _, n := range networks {
				rounds = append(rounds, round{strings.TrimSpace(st), p, n})
			}
		}
	}
	code := 0
	var sums []*faultrun.Summary
	for _, r := range rounds {
		cfg := faultrun.Config{
			Frontend:      srv.GetFrontendHostPort(),
			Namespace:     srv.GetDefaultNamespace(),
			Store:         r.store,
			Probe:         r.probe,
			Transactional: *transactional,
			AwaitDecision: *await,
			WorkerCommand: []string{exe, "worker"},
			Workers:       *workers,
			Workflows:     *workflows,
			Concurrency:   *concurrency,
			StartEvery:    *startEvery,
			KillEvery:     *killEvery,
			MaxKills:      *maxKills,
			Restarts:      *restarts,
			FailoverDelay: *failoverDelay,
			CitusURL:      *citusURL,
			StoreDown:     *storeDown,
			Bound:         *bound,
			Lease:         *lease,
			StartToClose:  *startToClose,
			Pause:         *pause,
			StoreTimeout:  *storeTimeout,
			Network:       r.network,
			NetworkEvery:  *networkEvery,
			NetworkHold:   *networkHold,
			NetworkShort:  *networkShort,
			Seed:          *seed,
			Logf:          logf,
		}
		if cfg.Store == faultrun.StorePostgresFailover || cfg.Store == faultrun.StorePostgresSyncFailover {
			cfg.Restarts = min(cfg.Restarts, 1) // one failover a round
		}
		if *keep != "" {
			cfg.Dir = fmt.Sprintf("%s/%s-probe-%t-network-%t-tx-%t-await-%t", *keep, cfg.Store, cfg.Probe, cfg.Network, cfg.Transactional, cfg.AwaitDecision)
			if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
				fmt.Fprintln(os.Stderr, "faultrun:", err)
				return 2
			}
		}
		sum, err := faultrun.Run(ctx, cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "faultrun: %s round: %v\n", cfg.Store, err)
			return 2
		}
		sums = append(sums, sum)
		switch {
		case cfg.Store == faultrun.StoreRedisVolatile:
			if sum.Duplicates == 0 {
				fmt.Fprintln(os.Stderr, "faultrun: the control round found no duplicate")
				code = 1
			}
		case cfg.Store == faultrun.StorePostgresFailover:
			fmt.Fprintf(os.Stderr, "faultrun: %s round: %d keys with more than one effect (%d extra): what the asynchronous standby lost\n",
				sum.Store, sum.Duplicates, sum.ExtraEffects)
			if sum.Hung > 0 || sum.Failed > 0 || sum.Untyped > 0 || sum.Unbacked > 0 {
				fmt.Fprintf(os.Stderr, "faultrun: %s round: %d hung, %d failed, %d untyped, %d not in the ledger\n", sum.Store, sum.Hung, sum.Failed, sum.Untyped, sum.Unbacked)
				code = 1
			}
		default:
			for _, p := range sum.Problems() {
				fmt.Fprintf(os.Stderr, "faultrun: %s round: %s\n", sum.Store, p)
				code = 1
			}
		}
		for _, s := range sum.Samples {
			fmt.Fprintf(os.Stderr, "faultrun: %s: %s\n", sum.Store, s)
		}
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Print(faultrun.Table(sums...))
	return code
}
