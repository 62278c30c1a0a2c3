package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// The TypeScript package (../typescript, @tesserix/idempotency) beside the
// Go library: a Go worker and a TypeScript worker, a child process on the
// test server's frontend port, run the same EFFECTFUL activity on one
// pgstore table.

// typescriptDir is the TypeScript package, beside this module.
const typescriptDir = "../typescript"

var (
	tsBuildOnce sync.Once
	tsBuildErr  error
)

// typescriptWorker returns the path of the TypeScript side-by-side worker
// script, building the package (npm run build) when its output is older
// than its sources. A missing node or package node_modules is a missing
// service (testenv.Unreachable: a failure unless skipping is asked for).
func typescriptWorker(t *testing.T) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Unreachable(t, "node (install Node 20, then npm ci in typescript/)", err)
	}
	if _, err := os.Stat(filepath.Join(typescriptDir, "node_modules")); err != nil {
		testenv.Unreachable(t, "typescript/node_modules (run npm ci in typescript/; make test does)", err)
	}
	script, err = filepath.Abs(filepath.Join(typescriptDir, "dist", "sidebyside", "worker.js"))
	require.NoError(t, err)
	tsBuildOnce.Do(func() {
		if !stale(script, filepath.Join(typescriptDir, "src"), filepath.Join(typescriptDir, "sidebyside"),
			filepath.Join(typescriptDir, "tsconfig.json"), filepath.Join(typescriptDir, "package-lock.json")) {
			return
		}
		npm, err := exec.LookPath("npm")
		if err != nil {
			tsBuildErr = errors.New("typescript/dist is stale and npm is not on PATH to build it")
			return
		}
		cmd := exec.Command(npm, "run", "build")
		cmd.Dir = typescriptDir
		if out, err := cmd.CombinedOutput(); err != nil {
			tsBuildErr = errors.New("npm run build in typescript/: " + err.Error() + "\n" + string(out))
		}
	})
	require.NoError(t, tsBuildErr)
	return node, script
}

// stale reports whether out is missing or older than any file under srcs.
func stale(out string, srcs ...string) bool {
	info, err := os.Stat(out)
	if err != nil {
		return true
	}
	built := info.ModTime()
	newer := false
	for _, src := range srcs {
		_ = filepath.WalkDir(src, func(_ string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			if fi, err := d.Info(); err == nil && fi.ModTime().After(built) {
				newer = true
			}
			return nil
		})
	}
	return newer
}

// startTypescriptWorker runs the TypeScript worker on queue, on the store
// in schema, booking into ledger, until the test ends.
func startTypescriptWorker(t *testing.T, queue, schema, ledger string) {
	t.Helper()
	node, script := typescriptWorker(t)
	cmd := exec.Command(node, script)
	cmd.Env = append(os.Environ(),
		"TEMPORAL_ADDRESS="+server.GetFrontendHostPort(),
		"TEMPORAL_NAMESPACE="+server.GetDefaultNamespace(),
		"TASK_QUEUE="+queue,
		"PG_URL="+pgenv.PostgresURL(),
		"PG_SCHEMA="+schema,
		"LEDGER_TABLE="+ledger,
	)
	var stderr bytes.Buffer
	var mu sync.Mutex
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return stderr.Write(p)
	})
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("TypeScript worker's stderr:\n%s", stderr.String())
			mu.Unlock()
		}
	})
	select {
	case <-ready:
	case err := <-exited:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the TypeScript worker exited before it was ready (%v):\n%s", err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("the TypeScript worker was not ready within a minute")
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// goBooker is the Go worker's "Book": the same name and arguments as the
// TypeScript worker's, booking into the same ledger.
type goBooker struct {
	pool   *pgxpool.Pool
	ledger string
}

func (b *goBooker) Book(ctx context.Context, req BookRequest) (string, error) {
	if _, err := b.pool.Exec(ctx, "INSERT INTO "+b.ledger+" (impl, flight) VALUES ('go', $1)", req.Flight); err != nil {
		return "", err
	}
	return "booked " + req.Flight + " by go", nil
}

// BookOnBoth books flight on the first queue's worker, then, with the same
// arguments that identify the effect (another request ID, which does not),
// on the second's.
func BookOnBoth(ctx workflow.Context, flight, first, second string) ([]string, error) {
	ctx = activityOptions(ctx, 10*time.Second, 100*time.Millisecond)
	var out []string
	for _, q := range []string{first, second} {
		var r string
		if err := workflow.ExecuteActivity(workflow.WithTaskQueue(ctx, q), "Book", BookRequest{Flight: flight, RequestID: "on-" + q}).Get(ctx, &r); err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// BookOnQueue books flight on queue's worker once.
func BookOnQueue(ctx workflow.Context, flight, queue string) (string, error) {
	ctx = activityOptions(ctx, 10*time.Second, 100*time.Millisecond)
	var r string
	err := workflow.ExecuteActivity(workflow.WithTaskQueue(ctx, queue), "Book", BookRequest{Flight: flight, RequestID: "once"}).Get(ctx, &r)
	return r, err
}

// ledgerRows counts the ledger's bookings of flight by implementation.
func ledgerRows(t *testing.T, pool *pgxpool.Pool, ledger, flight string) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT impl, count(*) FROM "+ledger+" WHERE flight = $1 GROUP BY impl", flight)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var impl string
		var n int
		require.NoError(t, rows.Scan(&impl, &n))
		out[impl] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// A Go worker and a TypeScript worker share one pgstore table: the same
// EFFECTFUL call, made on one worker's queue and then on the other's,
// books once, the second answered from the record the first wrote, in
// either order; and a TypeScript call whose outcome is unknown makes the
// Go workflow (AwaitDecision) wait for a person, whose decision through
// idempotencyctl settles it.
func TestSideBySideTypeScriptWorker(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	st, err := pgstore.New(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, st.EnsureSchema(context.Background()))
	t.Cleanup(st.Close)
	ledger := pgx.Identifier{schema, "sidebyside_ledger"}.Sanitize()
	_, err = pool.Exec(context.Background(), "CREATE TABLE "+ledger+" (impl text NOT NULL, flight text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())")
	require.NoError(t, err)

	tsQueue := testenv.UniqueName("tq-ts")
	startTypescriptWorker(t, tsQueue, schema, pgx.Identifier{schema, "sidebyside_ledger"}.Sanitize())

	e := newEnv(t, st, interceptor.Options{Lease: 2 * time.Second, AwaitDecision: true})
	b := &goBooker{pool: pool, ledger: ledger}
	require.NoError(t, e.worker.Register(activity.MustDeclare(b.Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})))
	e.worker.RegisterWorkflow(BookOnBoth)
	e.worker.RegisterWorkflow(BookOnQueue)
	e.start()

	t.Run("TypeScriptThenGo", func(t *testing.T) {
		var got []string
		require.NoError(t, e.execute("acme", BookOnBoth, &got, "BA117", tsQueue, e.queue))
		assert.Equal(t, []string{"booked BA117 by typescript", "booked BA117 by typescript"}, got,
			"the Go worker answered from the record the TypeScript worker wrote")
		assert.Equal(t, map[string]int{"typescript": 1}, ledgerRows(t, pool, ledger, "BA117"), "booked once")
	})

	t.Run("GoThenTypeScript", func(t *testing.T) {
		var got []string
		require.NoError(t, e.execute("acme", BookOnBoth, &got, "LH400", e.queue, tsQueue))
		assert.Equal(t, []string{"booked LH400 by go", "booked LH400 by go"}, got,
			"the TypeScript worker answered from the record the Go worker wrote")
		assert.Equal(t, map[string]int{"go": 1}, ledgerRows(t, pool, ledger, "LH400"), "booked once")
	})

	t.Run("UnknownOutcomeDecided", func(t *testing.T) {
		run, o := startWaiting(t, e.client, e.queue, BookOnQueue, "FAIL-UA9", tsQueue)
		assert.Equal(t, activity.ReasonBodyFailed, o.Reason)
		assert.True(t, o.BodyEntered)
		assert.Equal(t, "acme", o.Tenant)
		assert.True(t, strings.HasPrefix(o.Key, "v1:"), o.Key)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rec, err := st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
		require.NoError(t, err)
		assert.Equal(t, store.StateIndeterminate, rec.State)
		assert.Equal(t, rec.Token, o.Token, "the error names the record's token, exactly")
		assert.Contains(t, rec.Reason, "the connection dropped after the booking was sent")

		r := ctl(t, temporalEnv(), "-store", "postgres", "-postgres-url", pgenv.PostgresURL(), "-schema", schema,
			"decide", "-tenant", o.Tenant, "-key", o.Key, "-by", "ops@acme", "-reason", "the airline confirmed by phone",
			"-outcome", `"booked FAIL-UA9 by phone"`)
		require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)

		var got string
		require.NoError(t, run.Get(ctx, &got))
		assert.Equal(t, "booked FAIL-UA9 by phone", got)
		assert.Equal(t, map[string]int{"typescript": 1}, ledgerRows(t, pool, ledger, "FAIL-UA9"), "the body ran once, before the decision")
		rec, err = st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
		require.NoError(t, err)
		assert.Equal(t, store.StateCompleted, rec.State)
	})
}
