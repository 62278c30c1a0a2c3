package redisstore_test

import (
	"context"
	"errors"
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

func TestReplicaOptionsValidated(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	for _, tc := range []struct {
		name  string
		opts  redisstore.Options
		field string
	}{
		{"negative acks", redisstore.Options{ReplicaAcks: -1}, "ReplicaAcks"},
		{"negative timeout", redisstore.Options{ReplicaAcks: 1, ReplicaAckTimeout: -time.Second}, "ReplicaAckTimeout"},
		{"sub-millisecond timeout", redisstore.Options{ReplicaAcks: 1, ReplicaAckTimeout: time.Microsecond}, "ReplicaAckTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redisstore.New(client, tc.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "Options."+tc.field)
		})
	}
	s, err := redisstore.New(client, redisstore.Options{ReplicaAcks: 1})
	require.NoError(t, err, "ReplicaAckTimeout defaults")
	require.NoError(t, s.Close())
}

// TestClaimNotReplicatedIsUnavailable asks a Redis without replicas for one
// replica's acknowledgement: the claim fails with ErrNotReplicated, which
// matches store.ErrUnavailable, and leaves the key free for a later claim.
// With and without Options.IndexOnlyWhatWaits (its claim is one SET, not a
// MULTI, before the WAIT).
func TestClaimNotReplicatedIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, sparse := range []bool{false, true} {
		t.Run("IndexOnlyWhatWaits="+strconv.FormatBool(sparse), func(t *testing.T) {
			t.Parallel()
			claimNotReplicatedIsUnavailable(t, sparse)
		})
	}
}

func claimNotReplicatedIsUnavailable(t *testing.T, sparse bool) {
	plain, client := newStoreClient(t, redisstore.Options{})
	acked, err := redisstore.New(client, redisstore.Options{
		Prefix:      redisstore.Prefix(plain),
		ReplicaAcks: 1, ReplicaAckTimeout: 5 * time.Millisecond,
		IndexOnlyWhatWaits: sparse,
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, acked.Close()) })
	ctx := t.Context()

	_, err = acked.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.ErrorIs(t, err, redisstore.ErrNotReplicated)
	require.ErrorIs(t, err, store.ErrUnavailable)
	_, err = plain.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "k"})
	require.ErrorIs(t, err, store.ErrNotFound, "the unacknowledged claim was taken back")
	claimOK(t, plain, "t", "k")

	// A claim that finds the key held does not wait, and answers.
	res, err := acked.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, store.StatusHeld, res.Status)
}

// TestNoReplicasIsUnavailable writes to a Redis that refuses writes without
// a replica (min-replicas-to-write): NOREPLICAS is "not now", so every write
// fails with store.ErrUnavailable rather than as an unknown error.
func TestNoReplicasIsUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private redis-server; skipped with -short")
	}
	t.Parallel()
	port := testenv.FreePort(t)
	cmd := exec.Command(redisServerBin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--min-replicas-to-write", "1", "--logfile", "")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	t.Cleanup(func() { _ = client.Close() })
	require.Eventually(t, func() bool { return client.Ping(context.Background()).Err() == nil },
		10*time.Second, 10*time.Millisecond)

	s, err := redisstore.New(client, redisstore.Options{Prefix: "noreplicas"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	_, err = s.Claim(t.Context(), store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.True(t, errors.Is(err, store.ErrUnavailable) && !errors.Is(err, redisstore.ErrNotReplicated))
}
