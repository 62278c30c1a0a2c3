package quickstart_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"

	"github.com/tesserix/idempotency/examples/quickstart"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/internal/testenv/redisenv"
)

// The quick start's worker and starter run as processes against a Temporal
// frontend on a loopback port, as they would against a real cluster: the
// trip's two identical bookings sell one seat in the airline's ledger, and
// the worker's Prometheus endpoint shows the library's counters and timers
// with their tags.
func TestWorkerAndStarter(t *testing.T) {
	bin := build(t, "./worker", "./starter")
	ts := temporaltest.NewServer(temporaltest.WithT(t),
		temporaltest.WithBaseServerOptions(temporal.WithLogger(serverlog.NewNoopLogger())))
	frontend, namespace := ts.GetFrontendHostPort(), ts.GetDefaultNamespace()

	for _, st := range []struct{ name, flag string }{
		{"memory", ""},
		{"postgres", "-postgres-url=" + pgenv.PostgresURL()},
		{"redis", "-redis-addr=" + redisenv.RedisAddr()},
	} {
		t.Run(st.name, func(t *testing.T) {
			switch st.name {
			case "postgres":
				pgenv.Postgres(t) // skips, or fails under CI, when the server does not answer
			case "redis":
				redisenv.Redis(t)
			}
			ledger := filepath.Join(t.TempDir(), "airline.ledger")
			metrics := freeAddr(t)
			args := []string{"-address", frontend, "-namespace", namespace, "-store", st.name, "-ledger", ledger, "-metrics", metrics}
			if st.flag != "" {
				args = append(args, st.flag)
			}
			stopWorker := start(t, filepath.Join(bin, "worker"), args...)

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, filepath.Join(bin, "starter"),
				"-address", frontend, "-namespace", namespace, "-passenger", "Ada", "-flight", "BA117").Output()
			require.NoError(t, err, stderrOf(err))
			var it quickstart.Itinerary
			require.NoError(t, json.Unmarshal(out, &it), string(out))
			assert.Equal(t, []string{"CONF-BA117-Ada", "CONF-BA117-Ada"}, it.Confirmations)
			assert.Equal(t, 125, it.Fare)

			seats, err := os.ReadFile(ledger)
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSpace(string(seats)), "\n")
			require.Len(t, lines, 1, "two identical bookings sold one seat:\n%s", seats)
			assert.True(t, strings.HasPrefix(lines[0], "BA117\tAda\tv1:"), lines[0])

			scrape := get(t, "http://"+metrics+"/metrics")
			book := []string{`activity_type="Book"`, `idempotency_kind="EFFECTFUL"`, `workflow_type="BookTrip"`}
			for _, series := range []string{"idempotency_claims_total", "idempotency_deduplicated_total",
				"idempotency_claim_latency_seconds_bucket", "idempotency_claim_latency_seconds_count"} {
				assert.True(t, hasSeries(scrape, series, book), "no %s%v in the scrape:\n%s", series, book, grepLines(scrape, "idempotency_"))
			}
			assert.Equal(t, "1", value(scrape, "idempotency_claims_total", book), "one claim took the key")
			assert.Contains(t, scrape, "# TYPE idempotency_claims_total counter")
			assert.True(t, hasSeries(scrape, "idempotency_claim_latency_seconds_bucket", []string{`le="0.005"`}), "sub-second buckets")
			assert.NotContains(t, grepLines(scrape, "idempotency_"), `activity_type="LookupFare"`, "READ_ONLY calls go straight to the body")
			stopWorker()
		})
	}
}

// build compiles the packages into one directory and returns it.
func build(t *testing.T, pkgs ...string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return dir
}

// start runs a process and returns a function that interrupts it and waits;
// the test's cleanup kills it if the test ends first.
func start(t *testing.T, path string, args ...string) (stop func()) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-done:
			assert.NoError(t, err, "%s exited badly:\n%s", filepath.Base(path), stderr.String())
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("%s did not stop on SIGINT", filepath.Base(path))
		}
	}
	t.Cleanup(func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Kill()
			<-done
			if t.Failed() {
				t.Logf("%s stderr:\n%s", filepath.Base(path), stderr.String())
			}
		}
	})
	return stop
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// get fetches url, retrying while the server is still coming up.
func get(t *testing.T, url string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return string(b)
		}
		if time.Now().After(deadline) {
			require.NoError(t, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hasSeries reports whether the exposition text has a sample of name whose
// labels include every one of want.
func hasSeries(text, name string, want []string) bool { return value(text, name, want) != "" }

// value returns the first sample of name whose labels include every one of
// want.
func value(text, name string, want []string) string {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		labels := line[len(name)+1 : strings.LastIndexByte(line, '}')]
		all := true
		for _, w := range want {
			all = all && slices.Contains(strings.Split(labels, ","), w)
		}
		if all {
			return line[strings.LastIndexByte(line, ' ')+1:]
		}
	}
	return ""
}

func grepLines(text, substr string) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, substr) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
