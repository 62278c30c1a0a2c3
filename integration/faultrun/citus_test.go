package faultrun_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/server/temporaltest"

	"github.com/tesserix/idempotency/integration/faultrun"
	"github.com/tesserix/idempotency/internal/testenv"
)

// CitusURLEnv names the coordinator of a running Citus cluster
// (scripts/test-citus.sh sets it; make test-citus). Without it
// TestFaultRunCitus skips.
const CitusURLEnv = "IDEMPOTENCY_TEST_CITUS_URL"

// CitusDirEnv keeps each round's ledgers and worker logs under the
// directory it names (a directory per round).
const CitusDirEnv = "FAULTRUN_CITUS_DIR"

// CitusWorkflowsEnv sets how many workflows each round of
// TestFaultRunCitus starts (default 24): raise it for docs/SCALING.md's
// figures.
const CitusWorkflowsEnv = "FAULTRUN_CITUS_WORKFLOWS"

// TestFaultRunCitus is the fault run on a Citus cluster: pgstore in the
// portable mode on a table distributed by tenant, worker processes
// SIGKILLed, AwaitDecision on and a person deciding every waiting key from
// the ledger; in the first round the worker node holding the round's
// tenant is stopped (pg_ctl stop -m immediate) halfway through and started
// again two seconds later, in the second the coordinator. No key may have
// two effects, no answer may be missing from the ledger, no workflow may
// hang or fail, and no decision may be refused. It runs only under make
// test-citus.
func TestFaultRunCitus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped with -short")
	}
	url := os.Getenv(CitusURLEnv)
	if url == "" {
		t.Skipf("%s names no Citus cluster (make test-citus starts one)", CitusURLEnv)
	}
	workflows := 24
	if v := os.Getenv(CitusWorkflowsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s: %v", CitusWorkflowsEnv, err)
		}
		workflows = n
	}
	srv := temporaltest.NewServer(temporaltest.WithT(t))
	var sums []*faultrun.Summary
	for _, st := range []string{faultrun.StoreCitusWorker, faultrun.StoreCitusCoordinator} {
		var dir string
		if keep := os.Getenv(CitusDirEnv); keep != "" {
			dir = filepath.Join(keep, st)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		sum, err := faultrun.Run(t.Context(), faultrun.Config{
			Frontend:      srv.GetFrontendHostPort(),
			Namespace:     srv.GetDefaultNamespace(),
			Store:         st,
			CitusURL:      url,
			AwaitDecision: true,
			WorkerCommand: []string{os.Args[0]},
			WorkerEnv:     []string{workerEnv + "=1"},
			Workers:       3,
			Workflows:     workflows,
			Concurrency:   12,
			KillEvery:     3 * time.Second,
			MaxKills:      2,
			Restarts:      1,
			StoreDown:     2 * time.Second,
			Bound:         180 * time.Second,
			Seed:          1,
			Dir:           dir,
			Logf:          t.Logf,
		})
		if errors.Is(err, faultrun.ErrMissingTool) {
			testenv.Unreachable(t, st+" (pg_ctl)", err)
		}
		if err != nil {
			t.Fatalf("%s round: %v", st, err)
		}
		sums = append(sums, sum)
		for _, s := range sum.Samples {
			t.Logf("%s: %s", sum.Store, s)
		}
		for _, p := range sum.Problems() {
			t.Errorf("%s round: %s", sum.Store, p)
		}
		if sum.Kills < 1 || sum.Restarts != 1 {
			t.Errorf("%s round: %d kills, %d node restarts: the faults did not happen", sum.Store, sum.Kills, sum.Restarts)
		}
		if sum.Person == nil {
			t.Fatalf("%s round: no person", sum.Store)
		}
		if rej := sum.Person.Rejected; len(rej) > 0 {
			t.Errorf("%s round: decisions rejected: %v", sum.Store, rej)
		}
	}
	t.Logf("\n%s", faultrun.Table(sums...))
}
