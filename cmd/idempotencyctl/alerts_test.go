package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// alertCommand is a command an alert's text gives, in backticks.
var alertCommand = regexp.MustCompile("`(idempotencyctl [^`]*)`")

// Every idempotencyctl command the shipped alerts give a person (in
// contrib/observability) runs as written, in a shell that names the store
// as docs/OPERATING.md says, and lists what the alert is about. Before,
// the paging alert said "idempotencyctl list -state indeterminate", which
// refuses without -tenant — and the metrics carry no tenant.
func TestAlertCommandsRun(t *testing.T) {
	t.Parallel()
	rules, err := os.ReadFile(filepath.Join("..", "..", "contrib", "observability", "idempotency-alerts.yml"))
	require.NoError(t, err)
	var commands []string
	for _, line := range strings.Split(string(rules), "\n") {
		text := strings.TrimSpace(line)
		if !strings.HasPrefix(text, "summary:") && !strings.HasPrefix(text, "description:") {
			continue
		}
		found := alertCommand.FindAllStringSubmatch(text, -1)
		assert.Equal(t, strings.Count(text, "idempotencyctl"), len(found),
			"every idempotencyctl command an alert gives is whole, in backticks: %s", text)
		for _, m := range found {
			commands = append(commands, m[1])
		}
	}
	require.GreaterOrEqual(t, len(commands), 3, "the paging, waiting and stale alerts each give a command")

	ctx := context.Background()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	// An indeterminate record and a pending one whose holder is gone, in a
	// tenant the alert cannot name.
	res, err := mem.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: testKey, Holder: "w1", Lease: time.Minute,
		Origin: store.Origin{WorkflowID: "trip-1", ActivityType: "Book"}})
	require.NoError(t, err)
	require.NoError(t, mem.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: "acme", Key: testKey,
		Token: res.Record.Token, Reason: "body_failed"}))
	const staleKey = "v1:1111111111111111111111111111111111111111111111111111111111111111"
	_, err = mem.Claim(ctx, store.ClaimParams{Tenant: "globex", Key: staleKey, Holder: "w2", Lease: time.Nanosecond,
		Origin: store.Origin{WorkflowID: "trip-2", ActivityType: "Book"}})
	require.NoError(t, err)
	time.Sleep(time.Millisecond)

	open := func(context.Context, config) (*backend, error) {
		return &backend{Store: mem, where: "the memory store"}, nil
	}
	for _, cmd := range commands {
		t.Run(cmd, func(t *testing.T) {
			args := strings.Fields(strings.TrimPrefix(cmd, "idempotencyctl "))
			r := invoke(t, map[string]string{envStore: storePostgres}, open, args...)
			require.Equal(t, exitOK, r.code, "%s: %s", cmd, r.stderr)
			assert.Empty(t, r.stderr)
			switch {
			case strings.Contains(cmd, "-state indeterminate"):
				assert.Contains(t, r.stdout, testKey, "the indeterminate record")
				assert.NotContains(t, r.stdout, staleKey)
			case strings.Contains(cmd, "-stale"):
				assert.Contains(t, r.stdout, staleKey, "the stale pending record")
				assert.NotContains(t, r.stdout, testKey)
			}
		})
	}
}
