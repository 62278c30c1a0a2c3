package faultrun_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"go.temporal.io/server/temporaltest"

	"github.com/tesserix/idempotency/integration/faultrun"
	"github.com/tesserix/idempotency/internal/testenv"
)

// workerEnv makes this test binary a worker process: the run starts it
// again with the variable set and the worker's flags.
const workerEnv = "FAULTRUN_WORKER_PROCESS"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		if err := faultrun.WorkerMain(os.Args[1:]); err != nil {
			_, _ = os.Stderr.WriteString("faultrun worker: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestFaultRun is the short fault run: a few dozen workflows per round on
// three worker processes, one worker SIGKILLed and replaced, the store
// stopped hard and restarted once, against PostgreSQL and Redis with AOF
// (no key may have two effects, every answer must be in the ledger,
// nothing may hang or fail untyped) and against Redis again with the
// EFFECTFUL activity's probe declared, then the control round — Redis
// without persistence across the restart — which must find duplicates.
func TestFaultRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes and private stores; skipped with -short")
	}
	srv := temporaltest.NewServer(temporaltest.WithT(t))
	base := faultrun.Config{
		Frontend:      srv.GetFrontendHostPort(),
		Namespace:     srv.GetDefaultNamespace(),
		WorkerCommand: []string{os.Args[0]},
		WorkerEnv:     []string{workerEnv + "=1"},
		Workers:       3,
		Workflows:     30,
		Concurrency:   15,
		KillEvery:     3 * time.Second,
		MaxKills:      1,
		Restarts:      1,
		StoreDown:     time.Second,
		Bound:         90 * time.Second,
		Seed:          1,
		Logf:          t.Logf,
	}
	var sums []*faultrun.Summary
	for _, r := range []struct {
		store string
		probe bool
	}{
		{faultrun.StorePostgres, false},
		{faultrun.StoreRedis, false},
		{faultrun.StoreRedis, true},
		{faultrun.StoreRedisVolatile, false},
	} {
		st := r.store
		cfg := base
		cfg.Store, cfg.Probe = st, r.probe
		sum, err := faultrun.Run(t.Context(), cfg)
		if errors.Is(err, faultrun.ErrMissingTool) {
			testenv.Unreachable(t, st+" (private instance)", err)
		}
		if err != nil {
			t.Fatalf("%s round: %v", st, err)
		}
		sums = append(sums, sum)
		for _, s := range sum.Samples {
			t.Logf("%s: %s", st, s)
		}
		if sum.Kills < 1 || sum.Restarts < 1 {
			t.Errorf("%s round: %d kills, %d restarts: the faults did not happen", st, sum.Kills, sum.Restarts)
		}
		if st == faultrun.StoreRedisVolatile {
			if sum.Duplicates == 0 {
				t.Errorf("control round found no duplicate: the run cannot be shown to see one")
			}
			continue
		}
		for _, p := range sum.Problems() {
			t.Errorf("%s round: %s", st, p)
		}
	}
	t.Logf("\n%s", faultrun.Table(sums...))
}
