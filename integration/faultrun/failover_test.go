package faultrun_test

import (
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/server/temporaltest"

	"github.com/tesserix/idempotency/integration/faultrun"
	"github.com/tesserix/idempotency/internal/testenv"
)

// FailoverWorkflowsEnv sets how many workflows each round of
// TestFaultRunFailover starts (default 30): raise it for docs/SCALING.md's
// figures.
const FailoverWorkflowsEnv = "FAULTRUN_FAILOVER_WORKFLOWS"

// TestFaultRunFailover is the fault run with a PostgreSQL primary
// failover in place of the store's restart: the workers reach the store
// through a multi-host URL with target_session_attrs=read-write; halfway
// through the workflows the primary is killed (pg_ctl stop -m immediate)
// and its standby promoted at once, its replication link holding what the
// primary sends for 200 ms. With an asynchronous standby the round
// reports what the failover cost (keys with two effects: completed
// records that vanished), asserting only that nothing hangs, fails or
// fails untyped, and that no answer is missing from the ledger; with a
// synchronous one every problem fails it, duplicates first.
func TestFaultRunFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes and private stores; skipped with -short")
	}
	workflows := 30
	if v := os.Getenv(FailoverWorkflowsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s: %v", FailoverWorkflowsEnv, err)
		}
		workflows = n
	}
	srv := temporaltest.NewServer(temporaltest.WithT(t))
	var sums []*faultrun.Summary
	for _, st := range []string{faultrun.StorePostgresFailover, faultrun.StorePostgresSyncFailover} {
		sum, err := faultrun.Run(t.Context(), faultrun.Config{
			Frontend:      srv.GetFrontendHostPort(),
			Namespace:     srv.GetDefaultNamespace(),
			Store:         st,
			WorkerCommand: []string{os.Args[0]},
			WorkerEnv:     []string{workerEnv + "=1"},
			Workers:       3,
			Workflows:     workflows,
			Concurrency:   15,
			Restarts:      1,
			StoreDown:     time.Second,
			Bound:         90 * time.Second,
			Seed:          1,
			Logf:          t.Logf,
		})
		if errors.Is(err, faultrun.ErrMissingTool) {
			testenv.Unreachable(t, st+" (private instances)", err)
		}
		if err != nil {
			t.Fatalf("%s round: %v", st, err)
		}
		sums = append(sums, sum)
		for _, s := range sum.Samples {
			t.Logf("%s: %s", sum.Store, s)
		}
		if sum.Restarts != 1 {
			t.Errorf("%s round: %d failovers: the fault did not happen", sum.Store, sum.Restarts)
		}
		if st == faultrun.StorePostgresSyncFailover {
			for _, p := range sum.Problems() {
				t.Errorf("%s round: %s", sum.Store, p)
			}
			continue
		}
		t.Logf("%s round: %d keys with more than one effect (%d extra effects): what the asynchronous standby lost",
			sum.Store, sum.Duplicates, sum.ExtraEffects)
		if sum.Hung > 0 || sum.Failed > 0 || sum.Untyped > 0 || sum.Unbacked > 0 {
			t.Errorf("%s round: %d hung, %d failed, %d untyped, %d results not in the ledger", sum.Store, sum.Hung, sum.Failed, sum.Untyped, sum.Unbacked)
		}
	}
	t.Logf("\n%s", faultrun.Table(sums...))
}
