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

// rewaitEnv runs TestFaultRunPersonRewait when set to 1: one round of
// 2.5 min, kept out of make test.
const rewaitEnv = "FAULTRUN_REWAIT"

// TestFaultRunPersonRewait is TestFaultRunPerson's Redis round with the
// probe and Options.WaitAfterProbeRerun (issue 43 item 6): no call ends
// indeterminate — the calls of a downstream that always times out, which
// reach the workflow as timed_out without it, end as not landed after one
// run again — with no duplicate, no workflow hung, and nobody asked.
func TestFaultRunPersonRewait(t *testing.T) {
	if os.Getenv(rewaitEnv) != "1" {
		t.Skip("set " + rewaitEnv + "=1 to run the round")
	}
	srv := temporaltest.NewServer(temporaltest.WithT(t))
	sum, err := faultrun.Run(t.Context(), faultrun.Config{
		Frontend: srv.GetFrontendHostPort(), Namespace: srv.GetDefaultNamespace(),
		Store: faultrun.StoreRedis, Probe: true, AwaitDecision: true, WaitAfterProbeRerun: true,
		WorkerCommand: []string{os.Args[0]}, WorkerEnv: []string{workerEnv + "=1"},
		Workers: 3, Workflows: 30, Concurrency: 15, KillEvery: 3 * time.Second, MaxKills: 1,
		Restarts: 1, StoreDown: time.Second, Bound: 180 * time.Second, Seed: 1, Logf: t.Logf,
	})
	if errors.Is(err, faultrun.ErrMissingTool) {
		testenv.Unreachable(t, faultrun.StoreRedis+" (private instance)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range sum.Problems() {
		t.Errorf("%s", p)
	}
	n := 0
	for _, c := range sum.Indeterminate {
		n += c
	}
	if n > 0 {
		t.Errorf("%d calls ended indeterminate: %v", n, sum.Indeterminate)
	}
	if decided, _ := sum.Person.Total(); decided > 0 {
		t.Errorf("a person was asked %d times with the probe declared", decided)
	}
	t.Logf("\n%s", faultrun.Table(sum))
}
