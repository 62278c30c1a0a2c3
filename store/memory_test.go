package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tesserix/idempotency/internal/optdoc"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
		m, err := store.NewMemory(store.MemoryOptions{TTL: cfg.TTL, Clock: cfg.Clock})
		require.NoError(t, err)
		return m
	})
}

func TestNewMemoryOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		opts      store.MemoryOptions
		wantField string
	}{
		{name: "Zero", opts: store.MemoryOptions{}},
		{name: "Set", opts: store.MemoryOptions{TTL: 1, PollInterval: 1, Clock: store.SystemClock{}}},
		{name: "NegativeTTL", opts: store.MemoryOptions{TTL: -1}, wantField: "store.MemoryOptions.TTL"},
		{name: "NegativePollInterval", opts: store.MemoryOptions{PollInterval: -1}, wantField: "store.MemoryOptions.PollInterval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := store.NewMemory(tt.opts)
			if tt.wantField == "" {
				require.NoError(t, err)
				require.NotNil(t, m)
				assert.Zero(t, m.Len())
				return
			}
			require.ErrorIs(t, err, store.ErrInvalid)
			var invalid *store.InvalidError
			require.ErrorAs(t, err, &invalid)
			assert.Equal(t, tt.wantField, invalid.Field)
			assert.Nil(t, m)
		})
	}
}

// The replicas race on one memory store, passed as both replicas: the
// store of a single process.
func TestMemoryReplicasRace(t *testing.T) {
	t.Parallel()
	storetest.Replicas(t, func(t *testing.T) (store.Store, store.Store) {
		m, err := store.NewMemory(store.MemoryOptions{})
		require.NoError(t, err)
		return m, m
	})
}

// BenchmarkStore is storetest's store benchmark on the memory store,
// against a map under a mutex doing the same job by hand.
func BenchmarkStore(b *testing.B) {
	m, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	floor := map[string][]byte{}
	storetest.Benchmark(b, m, func(_ context.Context, key string, outcome []byte) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := floor[key]; ok {
			return false, nil
		}
		floor[key] = outcome
		return true, nil
	})
}

// Every default MemoryOptions states is the value NewMemory applies.
func TestMemoryOptionsDocStatesTheDefaults(t *testing.T) {
	n := optdoc.Check(t, "memory.go", map[string]any{"DefaultTTL": store.DefaultTTL, "DefaultPollInterval": store.DefaultPollInterval})
	assert.Equal(t, 2, n)
}
