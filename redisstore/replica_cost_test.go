package redisstore_test

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

// MeasureEnv turns on measurements that only report figures (no
// assertions on time): IDEMPOTENCY_MEASURE=1.
const MeasureEnv = "IDEMPOTENCY_MEASURE"

// TestReplicaAckCost measures what Options.ReplicaAcks=1 costs a claim on a
// real Cluster on loopback: claims with and without it, interleaved one by
// one in the same process so both see the same machine, and reports the
// medians, the 99th percentiles and their ratios. It asserts nothing about
// time; run it with IDEMPOTENCY_MEASURE=1.
func TestReplicaAckCost(t *testing.T) {
	if os.Getenv(MeasureEnv) != "1" {
		t.Skip("a measurement: set " + MeasureEnv + "=1")
	}
	const claims = 3000
	c := startCluster(t)
	client := c.client(nil)
	var stores [2]*redisstore.Store
	for acks := range stores {
		s, err := redisstore.New(client, redisstore.Options{Prefix: "cost" + strconv.Itoa(acks), ReplicaAcks: acks})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, s.Close()) })
		stores[acks] = s
	}
	ctx := t.Context()
	var lat [2][]time.Duration
	for i := range claims + 100 {
		for acks, s := range stores {
			start := time.Now()
			res, err := s.Claim(ctx, store.ClaimParams{Tenant: "tenant-" + strconv.Itoa(i%16), Key: strconv.Itoa(i), Holder: "h", Lease: time.Minute})
			d := time.Since(start)
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			if i >= 100 { // The first claims warm the connections up.
				lat[acks] = append(lat[acks], d)
			}
		}
	}
	q := func(d []time.Duration, p float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[int(p*float64(len(s)-1))]
	}
	off50, on50 := q(lat[0], .5), q(lat[1], .5)
	off99, on99 := q(lat[0], .99), q(lat[1], .99)
	t.Logf("claims=%d each: ReplicaAcks=0 median=%v p99=%v; ReplicaAcks=1 median=%v p99=%v; ratio median=%.2f× p99=%.2f×",
		claims, off50, off99, on50, on99, float64(on50)/float64(off50), float64(on99)/float64(off99))
}
