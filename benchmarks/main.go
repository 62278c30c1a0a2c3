// Command benchmarks measures the idempotency library against the designs it
// is compared with, side by side in one process, and prints markdown tables:
//
//  1. store throughput (claim+complete pairs per second, every key claimed by
//     two callers) at several caller counts: pgstore against the
//     hand-written floor (INSERT … ON CONFLICT DO NOTHING + UPDATE), a
//     read-then-write design and a SERIALIZABLE lock-column design;
//     redisstore against raw SET NX + SET XX;
//  2. the wake-up latency of a waiting duplicate, notifications against
//     polling;
//  3. the cost per activity on an in-process Temporal server, with no
//     interceptor and with the memory, PostgreSQL and Redis stores;
//  4. claim latency as the table grows, and a sweep of expired records with
//     the claim latency during it;
//  5. keyspace.Derive against json.Marshal + SHA-256;
//  6. a transactional EFFECTFUL call (its effect's row and the outcome in
//     one transaction) against the same write followed by a separate
//     Complete, and against pgstore's claim + Complete alone.
//
// Every comparison is a ratio of two measurements taken in the same
// repetition; repetitions are interleaved, and the tables give the median of
// the repetitions with their range. Run it with `make bench`; flags and
// BENCH_* environment variables set the sizes (see -help).
//
// It uses the PostgreSQL and Redis the tests use (IDEMPOTENCY_TEST_POSTGRES_URL,
// IDEMPOTENCY_TEST_REDIS_ADDR), in a schema and under a key prefix of its own
// that it removes when it ends. With -citus it also measures pgstore on a
// Citus cluster (sections 1 and 3; make bench-citus starts one).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

// config sizes one run of the harness.
type config struct {
	Reps       int           // interleaved repetitions of every comparison
	Callers    []int         // caller counts of the throughput benchmark
	Cell       time.Duration // how long one throughput cell runs
	PoolConns  int32         // PostgreSQL pool size
	WakeN      int           // wake-up samples per design and repetition
	Sequential int           // activities in the sequential workflow
	Workflows  int           // concurrent workflows …
	PerFlow    int           // … of this many activities each
	GrowthBase int           // existing records, small table
	GrowthRows int           // existing records, large table
	SweepRows  int           // expired records swept
	SweepBatch int           // sweep batch size
	ClaimN     int           // claims timed per table size and repetition
	Backlog    int           // indeterminate records, and as many stale claims, in each growth table
	ListN      int           // calls of each listing per table size and repetition
	DeriveN    int           // Derive iterations per repetition
	Only       string        // comma-separated sections to run; empty: all
	// RedisCluster is the comma-separated addresses of a Redis Cluster to
	// run the Redis throughput and wake benchmarks on as well; empty: none.
	RedisCluster string
	// Citus is the URL of a Citus cluster's coordinator
	// (scripts/citus-cluster.sh start prints it) to run pgstore's
	// throughput and per-activity benchmarks on as well; empty: none.
	Citus string
}

func defaultConfig() config {
	return config{
		Reps:       3,
		Callers:    []int{1, 8, 32},
		Cell:       time.Second,
		PoolConns:  16,
		WakeN:      20,
		Sequential: 50,
		Workflows:  20,
		PerFlow:    10,
		GrowthBase: 10_000,
		GrowthRows: envInt("BENCH_GROWTH_ROWS", 1_000_000),
		SweepRows:  envInt("BENCH_SWEEP_ROWS", 1_000_000),
		SweepBatch: 1000,
		ClaimN:     1000,
		Backlog:    1000,
		ListN:      20,
		DeriveN:    200_000,
	}
}

// smokeConfig is every benchmark with one short iteration: it proves the
// harness still runs, not how fast anything is.
func smokeConfig() config {
	return config{
		Reps:       1,
		Callers:    []int{1, 4},
		Cell:       100 * time.Millisecond,
		PoolConns:  4,
		WakeN:      2,
		Sequential: 5,
		Workflows:  2,
		PerFlow:    3,
		GrowthBase: 100,
		GrowthRows: 1000,
		SweepRows:  500,
		SweepBatch: 100,
		ClaimN:     20,
		Backlog:    10,
		ListN:      2,
		DeriveN:    1000,
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func (c config) runs(section string) bool {
	if c.Only == "" {
		return true
	}
	for _, s := range strings.Split(c.Only, ",") {
		if strings.TrimSpace(s) == section {
			return true
		}
	}
	return false
}

func main() {
	cfg := defaultConfig()
	var callers, doc, marker string
	var smoke bool
	flag.IntVar(&cfg.Reps, "reps", cfg.Reps, "interleaved repetitions of every comparison")
	flag.StringVar(&callers, "callers", "1,8,32", "caller counts of the throughput benchmark")
	flag.DurationVar(&cfg.Cell, "cell", cfg.Cell, "duration of one throughput measurement")
	flag.IntVar(&cfg.WakeN, "wake", cfg.WakeN, "wake-up samples per design and repetition")
	flag.IntVar(&cfg.Sequential, "sequential", cfg.Sequential, "activities in the sequential workflow")
	flag.IntVar(&cfg.Workflows, "workflows", cfg.Workflows, "concurrent workflows")
	flag.IntVar(&cfg.PerFlow, "per-workflow", cfg.PerFlow, "activities per concurrent workflow")
	flag.IntVar(&cfg.GrowthBase, "growth-base", cfg.GrowthBase, "existing records in the small table")
	flag.IntVar(&cfg.GrowthRows, "growth-rows", cfg.GrowthRows, "existing records in the large table (env BENCH_GROWTH_ROWS)")
	flag.IntVar(&cfg.SweepRows, "sweep-rows", cfg.SweepRows, "expired records to sweep (env BENCH_SWEEP_ROWS)")
	flag.IntVar(&cfg.SweepBatch, "sweep-batch", cfg.SweepBatch, "records per sweep batch")
	flag.IntVar(&cfg.ClaimN, "claims", cfg.ClaimN, "claims timed per table size and repetition")
	flag.IntVar(&cfg.Backlog, "backlog", cfg.Backlog, "indeterminate records, and as many stale claims, in each growth table")
	flag.IntVar(&cfg.ListN, "lists", cfg.ListN, "calls of each listing per table size and repetition")
	flag.IntVar(&cfg.DeriveN, "derive", cfg.DeriveN, "Derive iterations per repetition")
	flag.StringVar(&cfg.RedisCluster, "redis-cluster", "", "comma-separated addresses of a Redis Cluster (scripts/redis-cluster.sh start prints them) to also measure redisstore on")
	flag.StringVar(&cfg.Citus, "citus", "", "URL of a Citus cluster's coordinator (scripts/citus-cluster.sh start prints it; make bench-citus starts one) to also measure pgstore on")
	flag.StringVar(&cfg.Only, "only", "", "comma-separated sections: throughput,wake,activity,growth,derive,transactional")
	flag.StringVar(&doc, "doc", "", "also write the tables into this markdown file, between its markers (see -doc-marker)")
	flag.StringVar(&marker, "doc-marker", "bench", "the markers -doc writes between: <!-- NAME:begin --> and <!-- NAME:end -->")
	flag.BoolVar(&smoke, "smoke", false, "tiny sizes: check the harness runs")
	flag.Parse()
	if smoke {
		only := cfg.Only
		cluster, citus := cfg.RedisCluster, cfg.Citus
		cfg = smokeConfig()
		cfg.Only, cfg.RedisCluster, cfg.Citus = only, cluster, citus
	} else {
		cfg.Callers = nil
		for _, s := range strings.Split(callers, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				fmt.Fprintf(os.Stderr, "benchmarks: -callers: %q is not a positive number\n", s)
				os.Exit(2)
			}
			cfg.Callers = append(cfg.Callers, n)
		}
	}
	if cfg.Reps < 1 {
		fmt.Fprintln(os.Stderr, "benchmarks: -reps must be at least 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var out strings.Builder
	err := run(ctx, cfg, io.MultiWriter(os.Stdout, &out), os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmarks:", err)
		os.Exit(1)
	}
	if doc != "" {
		if err := writeDoc(doc, marker, out.String()); err != nil {
			fmt.Fprintln(os.Stderr, "benchmarks:", err)
			os.Exit(1)
		}
	}
}

// run runs the sections cfg selects, writing tables to out and progress to
// progress.
func run(ctx context.Context, cfg config, out, progress io.Writer) error {
	start := time.Now()
	host, _ := os.Hostname()
	fmt.Fprintf(out, "Run %s on %s (%s), %d repetitions, interleaved.\n\n",
		start.UTC().Format("2006-01-02 15:04 MST"), host, machine(), cfg.Reps)
	env, err := openEnv(ctx, cfg)
	if err != nil {
		return err
	}
	defer env.close()
	sections := []struct {
		name string
		fn   func(context.Context, *benchEnv, config, io.Writer, io.Writer) error
	}{
		{"throughput", benchThroughput},
		{"wake", benchWake},
		{"activity", benchActivity},
		{"growth", benchGrowth},
		{"derive", benchDerive},
		{"transactional", benchTransactional},
	}
	for _, s := range sections {
		if !cfg.runs(s.name) {
			continue
		}
		t := time.Now()
		fmt.Fprintf(progress, "== %s\n", s.name)
		if err := s.fn(ctx, env, cfg, out, progress); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Fprintf(progress, "   %s took %s\n", s.name, time.Since(t).Round(time.Millisecond))
	}
	printGoals(out, env.goals)
	fmt.Fprintf(out, "Whole run: %s.\n", time.Since(start).Round(time.Second))
	return nil
}
