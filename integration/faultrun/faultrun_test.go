package faultrun_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
// nothing may hang or fail untyped), against Redis again with the
// EFFECTFUL activity's probe declared, against each store again with the
// network nemesis between the workers and the store (replies held past the
// store calls' budget, cut mid-reply, one direction stalled, connections
// cut and refused; StoreTimeout 1s, so a long hold outlasts the budget of
// the calls after the body too), then the control round — Redis without
// persistence across the restart — which must find duplicates.
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
		store   string
		probe   bool
		network bool
	}{
		{faultrun.StorePostgres, false, false},
		{faultrun.StoreRedis, false, false},
		{faultrun.StoreRedis, true, false},
		{faultrun.StorePostgres, false, true},
		{faultrun.StoreRedis, false, true},
		{faultrun.StoreRedisVolatile, false, false},
	} {
		st := r.store
		cfg := base
		cfg.Store, cfg.Probe = st, r.probe
		if r.network {
			// Twice the workflows, so the nemesis gets a dozen faults or
			// more in.
			cfg.Workflows = 60
			cfg.Network = true
			cfg.NetworkEvery = 500 * time.Millisecond
			cfg.StoreTimeout = time.Second
		}
		if r.store == faultrun.StoreRedisVolatile {
			// The restart comes when half the workflows have started; with
			// 30 it came before most of them had recorded anything to
			// forget, and the control found no duplicate in 4 runs of 4.
			cfg.Workflows = 60
		}
		sum, err := faultrun.Run(t.Context(), cfg)
		if errors.Is(err, faultrun.ErrMissingTool) {
			testenv.Unreachable(t, st+" (private instance)", err)
		}
		if err != nil {
			t.Fatalf("%s round: %v", st, err)
		}
		sums = append(sums, sum)
		st = sum.Store
		for _, s := range sum.Samples {
			t.Logf("%s: %s", st, s)
		}
		if sum.Kills < 1 || sum.Restarts < 1 {
			t.Errorf("%s round: %d kills, %d restarts: the faults did not happen", st, sum.Kills, sum.Restarts)
		}
		if r.network {
			n := 0
			for _, c := range sum.NetFaults {
				n += c
			}
			// Seed 1 draws replies held briefly, then past every budget,
			// then briefly again (then a stall of the replies, replies cut
			// mid-way, …): three faults take about six seconds.
			if n < 3 || sum.NetFaults[faultrun.NetDelayLong] < 1 {
				t.Errorf("%s round: %d network faults (%v): the nemesis did not work", st, n, sum.NetFaults)
			}
		}
		if r.store == faultrun.StoreRedisVolatile {
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

// TestFaultRunPerson is the short fault run with AwaitDecision on and a
// person who decides every waiting key from the ledger, through the
// idempotency.decide Update, ten seconds after it began to wait: against
// PostgreSQL without a probe and against Redis with one. No key may have
// two effects, no answer may differ from the ledger, no workflow may hang
// or fail; with the probe declared nobody is asked at all — the probe
// settles what the person would have. The person lets a call fail once it
// decided its key twice (a downstream that always times out).
func TestFaultRunPerson(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes and private stores; skipped with -short")
	}
	srv := temporaltest.NewServer(temporaltest.WithT(t))
	var sums []*faultrun.Summary
	for _, r := range []struct {
		store string
		probe bool
	}{
		{faultrun.StorePostgres, false},
		{faultrun.StoreRedis, true},
	} {
		sum, err := faultrun.Run(t.Context(), faultrun.Config{
			Frontend:      srv.GetFrontendHostPort(),
			Namespace:     srv.GetDefaultNamespace(),
			Store:         r.store,
			Probe:         r.probe,
			AwaitDecision: true,
			WorkerCommand: []string{os.Args[0]},
			WorkerEnv:     []string{workerEnv + "=1"},
			Workers:       3,
			Workflows:     30,
			Concurrency:   15,
			KillEvery:     3 * time.Second,
			MaxKills:      1,
			Restarts:      1,
			StoreDown:     time.Second,
			// A call whose downstream always times out goes round a
			// decision (or a probe's answer) before it fails.
			Bound: 180 * time.Second,
			Seed:  1,
			Logf:  t.Logf,
		})
		if errors.Is(err, faultrun.ErrMissingTool) {
			testenv.Unreachable(t, r.store+" (private instance)", err)
		}
		if err != nil {
			t.Fatalf("%s round: %v", r.store, err)
		}
		sums = append(sums, sum)
		for _, s := range sum.Samples {
			t.Logf("%s: %s", sum.Store, s)
		}
		for _, p := range sum.Problems() {
			t.Errorf("%s round: %s", sum.Store, p)
		}
		if sum.Person == nil {
			t.Fatalf("%s round: no person", sum.Store)
		}
		decided, _ := sum.Person.Total()
		if r.probe && decided > 0 {
			t.Errorf("%s round: a person was asked %d times with the probe declared (%v)", sum.Store, decided, sum.Person.Decided)
		}
		if rej := sum.Person.Rejected; len(rej) > 0 {
			t.Errorf("%s round: decisions rejected: %v", sum.Store, rej)
		}
	}
	t.Logf("\n%s", faultrun.Table(sums...))
}

// TestFaultRunTransactional is docs/RELIABILITY.md's transactional round at
// a size that fits in make test: the EFFECTFUL activity declared
// Transactional on PostgreSQL, workers killed while bodies hold their
// transactions open, the store restarted. Beside the usual problems, any
// indeterminate outcome or key left for a person fails it: a transactional
// call's outcome is always in the record. (Its Temporal timeouts, from
// slow_respect, are typed timeouts, not indeterminate; before issue 30 they
// carried the EFFECTFUL timeout marker and read as indeterminate.)
func TestFaultRunTransactional(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes and a private PostgreSQL; skipped with -short")
	}
	srv := temporaltest.NewServer(temporaltest.WithT(t))
	sum, err := faultrun.Run(t.Context(), faultrun.Config{
		Frontend:      srv.GetFrontendHostPort(),
		Namespace:     srv.GetDefaultNamespace(),
		Store:         faultrun.StorePostgres,
		Transactional: true,
		WorkerCommand: []string{os.Args[0]},
		WorkerEnv:     []string{workerEnv + "=1"},
		Workers:       3,
		Workflows:     20,
		Concurrency:   10,
		KillEvery:     3 * time.Second,
		MaxKills:      2,
		Restarts:      1,
		StoreDown:     time.Second,
		Bound:         150 * time.Second,
		Seed:          1,
		Logf:          t.Logf,
	})
	if errors.Is(err, faultrun.ErrMissingTool) {
		testenv.Unreachable(t, faultrun.StorePostgres+" (private instance)", err)
	}
	if err != nil {
		t.Fatalf("transactional round: %v", err)
	}
	for _, s := range sum.Samples {
		t.Logf("%s: %s", sum.Store, s)
	}
	if sum.Kills < 1 || sum.Restarts < 1 {
		t.Errorf("transactional round: %d kills, %d restarts: the faults did not happen", sum.Kills, sum.Restarts)
	}
	if !sum.Transactional {
		t.Errorf("the round did not declare the activity transactional")
	}
	for _, p := range sum.Problems() {
		t.Errorf("transactional round: %s", p)
	}
	t.Logf("\n%s", faultrun.Table(sum))
}

// previousWorker builds the previous release's faultrun worker (the test
// binary of its integration/faultrun package, which is a worker process
// with workerEnv set) from the commit scripts/previous-release.sh pins, in
// a temporary directory, and returns its path.
func previousWorker(t *testing.T) string {
	t.Helper()
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		testenv.Unreachable(t, "the repository's history (git)", err)
	}
	top := strings.TrimSpace(string(root))
	script, err := os.ReadFile(filepath.Join(top, "scripts", "previous-release.sh"))
	require.NoError(t, err)
	m := regexp.MustCompile(`previous=\$\{PREVIOUS_RELEASE:-([0-9a-f]{40})\}`).FindSubmatch(script)
	require.NotNil(t, m, "scripts/previous-release.sh pins the previous release")
	commit := string(m[1])
	if c := os.Getenv("PREVIOUS_RELEASE"); c != "" {
		commit = c
	}
	dir := t.TempDir()
	archive := exec.Command("git", "-C", top, "archive", commit)
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	require.NoError(t, err)
	untar.Stdin = pipe
	var stderr strings.Builder
	archive.Stderr = &stderr
	require.NoError(t, untar.Start())
	if err := archive.Run(); err != nil {
		testenv.Unreachable(t, "the previous release's commit "+commit[:7], fmt.Errorf("%v: %s", err, stderr.String()))
	}
	require.NoError(t, untar.Wait())
	bin := filepath.Join(dir, "previous-worker")
	build := exec.Command("go", "test", "-c", "-o", bin, "./faultrun")
	build.Dir = filepath.Join(dir, "integration") // the module that embeds the server
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the previous release's worker: %s", out)
	return bin
}

// TestFaultRunMixedFleet is a rolling deploy that never ends: every other
// worker process, and every other replacement of a killed one, runs the
// previous release (built from its pinned commit), the others this one,
// on one task queue and one store, with AwaitDecision on and the probe
// declared, on both stores. No key may have two effects, no answer may
// differ from the ledger, no workflow may hang or fail (a history one
// release could not replay would stall its workflow), and nobody may be
// asked: the probe settles what a person would be.
func TestFaultRunMixedFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release and starts worker processes; skipped with -short")
	}
	prev := previousWorker(t)
	srv := temporaltest.NewServer(temporaltest.WithT(t))
	// The two stores' rounds run side by side: each has its own private
	// store, task queue and ledger.
	for _, st := range []string{faultrun.StorePostgres, faultrun.StoreRedis} {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			sum, err := faultrun.Run(t.Context(), faultrun.Config{
				Frontend:              srv.GetFrontendHostPort(),
				Namespace:             srv.GetDefaultNamespace(),
				Store:                 st,
				Probe:                 true,
				AwaitDecision:         true,
				WorkerCommand:         []string{os.Args[0]},
				WorkerEnv:             []string{workerEnv + "=1"},
				PreviousWorkerCommand: []string{prev},
				PreviousWorkerEnv:     []string{workerEnv + "=1"},
				Workers:               4,
				Workflows:             12,
				Concurrency:           12,
				KillEvery:             3 * time.Second,
				MaxKills:              2,
				Restarts:              1,
				StoreDown:             time.Second,
				Bound:                 180 * time.Second,
				Seed:                  1,
				Logf:                  t.Logf,
			})
			if errors.Is(err, faultrun.ErrMissingTool) {
				testenv.Unreachable(t, st+" (private instance)", err)
			}
			if err != nil {
				t.Fatalf("%s round: %v", st, err)
			}
			for _, p := range sum.Problems() {
				t.Errorf("%s mixed-fleet round: %s", sum.Store, p)
			}
			if sum.Person == nil {
				t.Fatalf("%s round: no person", sum.Store)
			}
			if decided, _ := sum.Person.Total(); decided > 0 {
				t.Errorf("%s mixed-fleet round: a person was asked %d times with the probe declared (%v)", sum.Store, decided, sum.Person.Decided)
			}
			if sum.Kills < 1 {
				t.Errorf("%s mixed-fleet round: no worker was killed and replaced", sum.Store)
			}
			t.Logf("\n%s", faultrun.Table(sum))
		})
	}
}
