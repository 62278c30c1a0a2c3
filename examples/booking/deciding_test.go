package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tesserix/idempotency/internal/testenv/pgenv"
)

// decidingDoc is the page whose blocks TestDecidingAsDocumented runs.
const decidingDoc = "../../docs/DECIDING.md"

// documentedFrontend is the address the page's commands name; the test
// puts its in-process server's frontend in its place.
const documentedFrontend = "127.0.0.1:7233"

// TestDecidingAsDocumented walks docs/DECIDING.md as a person would: the
// worker and the starter (-person) as separate processes on a real frontend
// (the in-process server's), then the person's commands exactly as the page
// writes them, run by bash with the built idempotencyctl on PATH. The
// airline's ledger, which the worker writes, must hold one seat per flight,
// and the repeated decide must change nothing.
func TestDecidingAsDocumented(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two commands and runs three processes")
	}
	pool, _ := pgenv.Postgres(t) // skips, or fails under CI, when the server does not answer
	blocks := documentedBlocks(t)

	ts := temporaltest.NewServer(temporaltest.WithT(t),
		temporaltest.WithBaseServerOptions(temporal.WithLogger(serverlog.NewNoopLogger())))
	frontend := ts.GetFrontendHostPort()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := ts.GetDefaultClient()
	registerDefaultNamespace(ctx, t, c)
	// The page's "temporal operator search-attribute create", through the
	// operator service the CLI calls.
	_, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        client.DefaultNamespace,
		SearchAttributes: map[string]enums.IndexedValueType{"IdempotencyPendingKeys": enums.INDEXED_VALUE_TYPE_KEYWORD_LIST},
	})
	require.NoError(t, err)

	bin := t.TempDir()
	build(t, ".", filepath.Join(bin, "booking"))
	build(t, "../../cmd/idempotencyctl", filepath.Join(bin, "idempotencyctl"))

	// Where this test's servers are; each terminal's block exports the rest.
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"IDEMPOTENCY_POSTGRES_URL="+pgenv.PostgresURL(), "TEMPORAL_ADDRESS="+frontend)
	workerEnv, workerLine := exported(env, blocks["worker"])
	table := envValue(workerEnv, "IDEMPOTENCY_TABLE")
	require.NotEmpty(t, table, "the worker's terminal exports IDEMPOTENCY_TABLE")
	_, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+table)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })

	dir := t.TempDir() // the three terminals' examples/booking: the ledger lives here
	command := func(line string) string {
		line = strings.Replace(line, "go run . ", filepath.Join(bin, "booking")+" ", 1)
		return strings.ReplaceAll(line, documentedFrontend, frontend)
	}
	worker := startProcess(ctx, t, dir, workerEnv, command(workerLine))
	worker.waitFor(t, "Worker polling", time.Minute)
	require.Len(t, blocks["starter"], 1)

	// Walked twice in a row, with the same worker: every trip waits for a
	// person, and each decision settles its own trip.
	for trip := 1; trip <= 2; trip++ {
		t.Logf("trip %d", trip)
		walkOnce(ctx, t, c, dir, env, blocks, command, worker, trip)
	}
}

// walkOnce walks the page's trip and the person's commands once, the
// trip'th time with the worker already running, and checks the ledger: one
// seat per flight per trip, the decided one the person's.
func walkOnce(ctx context.Context, t *testing.T, c client.Client, dir string, env []string, blocks map[string][]string,
	command func(string) string, worker *process, trip int) {
	t.Helper()
	starter := startProcess(ctx, t, dir, env, command(blocks["starter"][0]))
	starter.waitFor(t, "waits for you", 2*time.Minute)
	worker.waitForCount(t, "indeterminate: Book", trip, 10*time.Second)

	// The search attribute lists the waiting workflow, by the page's query.
	query := regexp.MustCompile(`--query '([^']+)'`).FindStringSubmatch(readDoc(t))
	require.NotNil(t, query, "the page's temporal workflow list --query")
	require.Eventually(t, func() bool {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: client.DefaultNamespace, Query: query[1]})
		return err == nil && len(resp.GetExecutions()) == 1
	}, 30*time.Second, 200*time.Millisecond, "%s lists the waiting trip", query[1])

	script := "set -euo pipefail\n" + strings.Join(blocks["person"], "\n") + "\n"
	person := exec.CommandContext(ctx, "bash", "-c", script)
	person.Dir, person.Env = dir, env
	out, err := person.CombinedOutput()
	require.NoError(t, err, "the person's commands, as the page writes them:\n%s", out)
	t.Logf("the person's terminal:\n%s", out)
	decided := regexp.MustCompile(`(?m)^decided: .* answered: (\S+);`).FindAllStringSubmatch(string(out), -1)
	require.Len(t, decided, 2, "both decide commands answer")
	assert.Equal(t, "recorded", decided[0][1])
	assert.Equal(t, decided[0][1], decided[1][1], "the repeated decide gets the first one's answer")
	assert.Contains(t, string(out), "nothing waits for a person in tenant acme")

	starter.wait(t, time.Minute)
	ledger := readLedger(filepath.Join(dir, "airline.ledger"))
	assert.Len(t, ledger["BA117"], trip, "one seat on BA117 per trip: %v", ledger)
	require.Len(t, ledger["BA118"], trip, "one seat on BA118 per trip: %v", ledger)
	assert.Contains(t, starter.output(), fmt.Sprintf("%q (decided by a person: true)", ledger["BA118"][trip-1]))
}

// exported applies the export lines of a terminal's block to env and
// returns it with the block's one command.
func exported(env []string, block []string) ([]string, string) {
	env = append([]string(nil), env...)
	var cmd []string
	for _, line := range block {
		if rest, ok := strings.CutPrefix(line, "export "); ok {
			env = append(env, strings.Fields(rest)...)
			continue
		}
		cmd = append(cmd, line)
	}
	if len(cmd) != 1 {
		panic(fmt.Sprintf("a terminal's block holds %d commands besides its exports: %q", len(cmd), block))
	}
	return env, cmd[0]
}

// documentedBlocks returns the page's marked sh blocks by name
// (<!-- deciding:NAME --> before a fenced block), a line per command.
func documentedBlocks(t *testing.T) map[string][]string {
	t.Helper()
	blocks := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(readDoc(t)))
	name, in := "", false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "<!-- deciding:"):
			name = strings.TrimSuffix(strings.TrimPrefix(line, "<!-- deciding:"), " -->")
		case name != "" && line == "```sh":
			in = true
		case in && line == "```":
			in, name = false, ""
		case in && strings.TrimSpace(line) != "":
			blocks[name] = append(blocks[name], line)
		}
	}
	for _, n := range []string{"worker", "starter", "person"} {
		require.NotEmpty(t, blocks[n], "%s has no %q block", decidingDoc, n)
	}
	return blocks
}

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(decidingDoc)
	require.NoError(t, err)
	return string(b)
}

// registerDefaultNamespace registers "default", the namespace the page's
// commands use without saying so, and waits until it serves.
func registerDefaultNamespace(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	_, err := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: client.DefaultNamespace, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: client.DefaultNamespace})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond)
}

// build builds the command in pkg (a directory) to out.
func build(t *testing.T, pkg, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = pkg
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkg, b)
}

func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// process is a command running in the background, its output collected.
type process struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// startProcess runs line (split on spaces: the page's commands quote
// nothing) in dir, and stops it when the test ends.
func startProcess(ctx context.Context, t *testing.T, dir string, env []string, line string) *process {
	t.Helper()
	args := strings.Fields(line)
	p := &process{done: make(chan error, 1)}
	p.cmd = exec.CommandContext(ctx, args[0], args[1:]...)
	p.cmd.Dir, p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = dir, env, p, p
	require.NoError(t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
		}
		t.Logf("%s:\n%s", filepath.Base(args[0])+" "+strings.Join(args[1:], " "), p.output())
	})
	return p
}

// waitFor waits until the process has printed text.
// waitForCount waits until the process has printed text n times.
func (p *process) waitForCount(t *testing.T, text string, n int, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Count(p.output(), text) >= n }, within, 20*time.Millisecond,
		"%q printed %d times; output so far:\n%s", text, n, p.output())
}

func (p *process) waitFor(t *testing.T, text string, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(p.output(), text) }, within, 50*time.Millisecond,
		"waiting for %q in:\n%s", text, p.output())
}

// wait waits for the process to exit successfully.
func (p *process) wait(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		require.NoError(t, err, p.output())
	case <-time.After(within):
		t.Fatalf("still running after %v:\n%s", within, p.output())
	}
}
