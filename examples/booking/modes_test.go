package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
)

// The worker and starter modes run as two processes against one frontend on
// a loopback port, as against "temporal server start-dev": the airline's
// ledger (a file both share) holds one seat per flight, and the worker's
// -json output is one event object per line.
func TestWorkerAndStarterModes(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "booking")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))

	ts := temporaltest.NewServer(temporaltest.WithT(t),
		temporaltest.WithBaseServerOptions(temporal.WithLogger(serverlog.NewNoopLogger())))
	frontend := []string{"-address", ts.GetFrontendHostPort(), "-namespace", ts.GetDefaultNamespace()}
	ledger := filepath.Join(dir, "airline.ledger")

	var events, workerErr bytes.Buffer
	w := exec.Command(bin, append([]string{"worker", "-json", "-ledger", ledger}, frontend...)...)
	w.Stdout, w.Stderr = &events, &workerErr
	require.NoError(t, w.Start())
	done := make(chan struct{})
	var exit error
	go func() { exit = w.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = w.Process.Kill()
			<-done
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	story, err := exec.CommandContext(ctx, bin, append([]string{"starter", "-ledger", ledger}, frontend...)...).Output()
	require.NoError(t, err, "%s\n%s", stderrOf(err), workerErr.String())
	assert.Contains(t, string(story), "decided by a person: true")

	seats := readLedger(ledger)
	assert.Len(t, seats["BA117"], 1, "the repeated booking took one seat")
	assert.Len(t, seats["BA118"], 1, "the lost answer was not retried into a second seat")

	require.NoError(t, w.Process.Signal(syscall.SIGINT))
	select {
	case <-done:
		require.NoError(t, exit, workerErr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop on SIGINT")
	}
	kinds := map[string]int{}
	sc := bufio.NewScanner(&events)
	for sc.Scan() {
		var e eventJSON
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e), "not one JSON object per line: %q", sc.Text())
		assert.Equal(t, "acme", e.Tenant)
		kinds[e.Event]++
	}
	assert.Equal(t, 1, kinds["indeterminate"], "%v", kinds)
	assert.Equal(t, 2, kinds["deduplicated"], "%v", kinds)
	assert.Contains(t, workerErr.String(), "Worker polling task queue")
}

// Every mode explains itself on -h.
func TestHelp(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "booking")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	for mode, want := range map[string][]string{
		"":        {"booking worker", "temporal server start-dev", "-address", "-table", "-prefix", "-json"},
		"worker":  {"until interrupted", "-ledger", "-store", "-json"},
		"starter": {"plays the person", "-ledger", "-address"},
	} {
		args := []string{"-h"}
		if mode != "" {
			args = []string{mode, "-h"}
		}
		help, _ := exec.Command(bin, args...).CombinedOutput()
		for _, w := range want {
			assert.Contains(t, string(help), w, "booking %s -h", mode)
		}
	}
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
