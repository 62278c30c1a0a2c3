package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// privateServer is a PostgreSQL instance of the test's own, so the test may
// stop and start it without touching the shared server.
type privateServer struct {
	t      *testing.T
	pgCtl  string
	dir    string // owned by the server's OS user
	data   string
	port   int
	asUser []string // command prefix that runs as the server's OS user
	extra  []string // options start passes to the server, after its own
}

// findPostgresBinary looks for a PostgreSQL program on PATH, then where
// Debian installs them.
func findPostgresBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", fmt.Errorf("%s not found on PATH nor in /usr/lib/postgresql/*/bin", name)
}

// startPrivateServer runs initdb and starts a server on a free port with
// its socket in its own directory. PostgreSQL refuses to run as root, so
// under root it runs as the "postgres" OS user through runuser. It skips
// the test, saying why, when that is not possible.
func startPrivateServer(t *testing.T, extra ...string) *privateServer {
	t.Helper()
	initdb, err := findPostgresBinary("initdb")
	if err != nil {
		t.Skipf("restart test needs a private PostgreSQL: %v", err)
	}
	s := preparePrivateServer(t, extra...)
	if out, err := s.run(initdb, "-D", s.data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"); err != nil {
		t.Skipf("restart test could not initdb a private PostgreSQL: %v\n%s", err, out)
	}
	s.start()
	t.Cleanup(func() { _, _ = s.run(s.pgCtl, "-D", s.data, "-m", "immediate", "-w", "stop") })
	return s
}

// preparePrivateServer makes a private server's directory, owned by the
// server's OS user, and picks its port; extra are options (-c name=value)
// its start passes to the server. Nothing runs yet.
func preparePrivateServer(t *testing.T, extra ...string) *privateServer {
	t.Helper()
	pgCtl, err := findPostgresBinary("pg_ctl")
	if err != nil {
		t.Skipf("restart test needs a private PostgreSQL: %v", err)
	}
	s := &privateServer{t: t, pgCtl: pgCtl, extra: extra}

	// Not t.TempDir: its parents are private to root, and the server's
	// user must reach the data directory.
	s.dir, err = os.MkdirTemp("", "pgstore-restart-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(s.dir) })
	require.NoError(t, os.Chmod(s.dir, 0o755))
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("restart test runs as root and there is no postgres OS user to run the server as: %v", err)
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			t.Skipf("restart test runs as root and cannot switch to the postgres OS user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		require.NoError(t, os.Chown(s.dir, uid, gid))
		s.asUser = []string{runuser, "-u", "postgres", "--"}
	}
	s.data = filepath.Join(s.dir, "data")
	s.port = testenv.FreePort(t)
	return s
}

func (s *privateServer) run(name string, args ...string) (string, error) {
	argv := append(append(append([]string(nil), s.asUser...), name), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (s *privateServer) start() {
	s.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=20", s.port, s.dir)
	for _, o := range s.extra {
		opts += " -c " + o
	}
	out, err := s.run(s.pgCtl, "-D", s.data, "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "-t", "60", "start")
	require.NoError(s.t, err, "pg_ctl start: %s\n%s", out, s.log())
}

func (s *privateServer) stop() {
	s.t.Helper()
	out, err := s.run(s.pgCtl, "-D", s.data, "-m", "fast", "-w", "-t", "60", "stop")
	require.NoError(s.t, err, "pg_ctl stop: %s", out)
}

func (s *privateServer) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	return string(b)
}

func (s *privateServer) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", s.port)
}

// TestRestart writes records, stops the server, requires every operation
// during the outage to fail with store.ErrUnavailable (none may succeed),
// starts the server again and requires the records intact and the store
// working through the same pool.
func TestRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a private PostgreSQL; skipped with -short")
	}
	t.Parallel()
	srv := startPrivateServer(t)

	cfg, err := pgxpool.ParseConfig(srv.url())
	require.NoError(t, err)
	cfg.MaxConns = 3
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := pgstore.New(pool, pgstore.Options{PollInterval: 20 * time.Millisecond, MaxPollInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.NoError(t, s.EnsureSchema(ctx))

	claim := func(key string) store.Record {
		t.Helper()
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: key, Holder: "before", Lease: time.Hour})
		require.NoError(t, err)
		require.Equal(t, store.StatusAcquired, res.Status)
		return res.Record
	}
	done := claim("completed")
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "completed", Token: done.Token, Outcome: []byte("booked")}))
	pending := claim("pending")
	marked := claim("indeterminate")
	require.NoError(t, s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: "t", Key: "indeterminate", Token: marked.Token, Reason: "timeout"}))
	// Start the listener, so the outage also breaks its connection.
	_, err = s.Wait(ctx, store.WaitParams{Tenant: "t", Key: "completed", Token: done.Token})
	require.NoError(t, err)

	srv.stop()

	for name, call := range operations(s, "t", "pending", pending.Token) {
		t.Run("outage/"+name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			err := call(ctx)
			require.Error(t, err, "%s succeeded against a stopped server", name)
			assert.ErrorIs(t, err, store.ErrUnavailable)
			assert.False(t, errors.Is(err, context.DeadlineExceeded), "the outage must be reported, not waited out: %v", err)
		})
	}

	srv.start()

	// The pool may still hold a connection broken by the outage; the first
	// call after the restart is allowed to find that out.
	var rec store.Record
	require.Eventually(t, func() bool {
		rec, err = s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "completed"})
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "the store never worked again after the restart: %v", err)
	assert.Equal(t, store.StateCompleted, rec.State)
	assert.Equal(t, []byte("booked"), rec.Outcome)

	rec, err = s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "pending"})
	require.NoError(t, err)
	assert.Equal(t, store.StatePending, rec.State)
	assert.Equal(t, pending.Token, rec.Token, "the outage changed the pending claim")

	rec, err = s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "indeterminate"})
	require.NoError(t, err)
	assert.Equal(t, store.StateIndeterminate, rec.State)
	assert.Equal(t, "timeout", rec.Reason)

	// And it works again: the held claim completes, a waiter sees it, new
	// keys can be claimed.
	res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "pending", Holder: "after", Lease: time.Hour})
	require.NoError(t, err)
	require.Equal(t, store.StatusHeld, res.Status)
	waited := make(chan store.Result, 1)
	go func() {
		r, _ := s.Wait(ctx, store.WaitParams{Tenant: "t", Key: "pending", Token: pending.Token})
		waited <- r
	}()
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "pending", Token: pending.Token, Outcome: []byte("late")}))
	r := <-waited
	assert.Equal(t, store.StatusCompleted, r.Status)
	assert.Equal(t, "late", string(r.Record.Outcome))
	claim("new")

	if t.Failed() {
		t.Logf("server log:\n%s", strings.TrimSpace(srv.log()))
	}
}
