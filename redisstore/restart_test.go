package redisstore_test

import (
	"context"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

const redisServerBin = "/usr/bin/redis-server"

// privateRedis is a redis-server this test starts, stops and starts again,
// with an append-only file in a directory of its own.
type privateRedis struct {
	t    *testing.T
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startPrivateRedis(t *testing.T, port int, dir string) *privateRedis {
	t.Helper()
	cmd := exec.Command(redisServerBin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "yes", "--appendfsync", "always",
		"--dir", dir, "--logfile", "")
	require.NoError(t, cmd.Start())
	p := &privateRedis{t: t, port: port, dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)

	client := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1})
	defer func() { _ = client.Close() }()
	require.Eventually(t, func() bool {
		return client.Ping(context.Background()).Err() == nil
	}, 10*time.Second, 10*time.Millisecond, "private redis-server on port %d did not answer", port)
	return p
}

func (p *privateRedis) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

// shutdown stops the server the way an operator would, flushing the
// append-only file, and waits for the process to exit.
func (p *privateRedis) shutdown() {
	p.t.Helper()
	client := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1})
	defer func() { _ = client.Close() }()
	_ = client.ShutdownSave(context.Background()).Err() // The connection drops: no reply.
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
		p.t.Fatal("redis-server did not shut down")
	}
}

func (p *privateRedis) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// TestRedisRestart stops Redis under a working store: every call during the
// outage fails with ErrUnavailable, and after Redis comes back on the same
// data the records are intact and the store works again.
func TestRedisRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private redis-server; skipped with -short")
	}
	t.Parallel()
	port, dir := testenv.FreePort(t), t.TempDir()
	srv := startPrivateRedis(t, port, dir)

	client := redis.NewClient(&redis.Options{
		Addr:        srv.addr(),
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: 10 * time.Millisecond,
	})
	s, err := redisstore.New(client, redisstore.Options{Prefix: "restart", PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, s.Close())
		assert.NoError(t, client.Close())
	})
	ctx := t.Context()

	done := claimOK(t, s, "tenant", "done")
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "tenant", Key: "done", Token: done.Token, Outcome: []byte("booked 12A")}))
	marked := claimOK(t, s, "tenant", "marked")
	require.NoError(t, s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: "tenant", Key: "marked", Token: marked.Token, Reason: "timeout"}))
	held := claimOK(t, s, "tenant", "held")
	// Start the subscriber, so the restart also exercises its reconnect.
	res, err := s.Wait(ctx, store.WaitParams{Tenant: "tenant", Key: "done", Token: done.Token})
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, res.Status)

	before := make(map[string]store.Record)
	for _, key := range []string{"done", "marked", "held"} {
		rec, err := s.Lookup(ctx, store.LookupParams{Tenant: "tenant", Key: key})
		require.NoError(t, err)
		before[key] = rec
	}

	srv.shutdown()
	for _, op := range allOps(held.Token) {
		t.Run("Outage/"+op.name, func(t *testing.T) {
			opCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			err := op.call(opCtx, s, "tenant", "held")
			require.Error(t, err, "nothing succeeds while Redis is down")
			assert.ErrorIs(t, err, store.ErrUnavailable)
		})
	}

	startPrivateRedis(t, port, dir)
	// go-redis keeps failing fast with its last dial error until its pool
	// has redialled in the background; wait for that, not for a duration.
	require.Eventually(t, func() bool {
		_, err := s.Lookup(ctx, store.LookupParams{Tenant: "tenant", Key: "done"})
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the store answers again once Redis is back")
	for key, want := range before {
		got, err := s.Lookup(ctx, store.LookupParams{Tenant: "tenant", Key: key})
		require.NoError(t, err, "record %q survives the restart", key)
		assert.Equal(t, want, got, "record %q survives the restart intact", key)
	}

	// The store works again, waiters included.
	wait := make(chan store.Result, 1)
	go func() {
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := s.Wait(waitCtx, store.WaitParams{Tenant: "tenant", Key: "held", Token: held.Token})
		assert.NoError(t, err)
		wait <- res
	}()
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "tenant", Key: "held", Token: held.Token, Outcome: []byte("late")}))
	res = <-wait
	assert.Equal(t, store.StatusCompleted, res.Status)
	assert.Equal(t, []byte("late"), res.Record.Outcome)
	res, err = s.Claim(ctx, store.ClaimParams{Tenant: "tenant", Key: "done", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, store.StatusCompleted, res.Status)
	claimOK(t, s, "tenant", "new")
	n, err := s.Forget(ctx, store.ForgetParams{Tenant: "tenant"})
	require.NoError(t, err)
	assert.Equal(t, 4, n)
}
