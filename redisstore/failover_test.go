package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

// FailoverRoundsEnv sets how many failover rounds TestClusterFailover runs
// for each setting of Options.ReplicaAcks (default 1): raise it to soak.
const FailoverRoundsEnv = "IDEMPOTENCY_FAILOVER_ROUNDS"

// failoverTally is what one round saw. The ledger of effects is the test's
// own, outside Redis, so a failover cannot touch it.
type failoverTally struct {
	calls, effects int
	// duplicates are keys whose effect was applied more than once, by when
	// the second effect happened: after the kill but before the dead master
	// came back (failover), or after it came back (rejoin).
	duplicates, duplicatesRejoin int
	deduplicated                 int // answered from a completed record
	indeterminate                int // found the key indeterminate
	holderLost                   int // found the holder's lease run out: EFFECTFUL ends indeterminate
	completeRefused              int // Complete found its claim gone (the claim was lost)
	lostCompletions              int // Complete was acknowledged, yet the record is not completed at the end
	unavailable                  int // claims and completions retried while the store was down
	promotion                    time.Duration
}

func (t *failoverTally) add(o failoverTally) {
	t.calls += o.calls
	t.effects += o.effects
	t.duplicates += o.duplicates
	t.duplicatesRejoin += o.duplicatesRejoin
	t.deduplicated += o.deduplicated
	t.indeterminate += o.indeterminate
	t.holderLost += o.holderLost
	t.completeRefused += o.completeRefused
	t.lostCompletions += o.lostCompletions
	t.unavailable += o.unavailable
}

// TestClusterFailover kills a master of a real Redis Cluster while callers
// make EFFECTFUL-style calls (claim, apply the effect to the test's ledger,
// complete; a key found held by a lost holder ends indeterminate, never runs
// again), waits for its replica to be promoted, brings the dead node back as
// a replica, and counts keys whose effect was applied more than once. Each
// key is called three times, the later calls after the failover, so a claim
// the failover lost is claimed again and shows as a duplicate.
//
// Redis replicates asynchronously, so without Options.ReplicaAcks a
// duplicate is possible (and rare: a claim must be lost in the last moments
// before the kill); with ReplicaAcks=1 every claim a caller acted on is on
// the replica that is promoted, and the test requires zero duplicates.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private Redis Cluster; skipped with -short")
	}
	t.Parallel()
	rounds := 1
	if v := os.Getenv(FailoverRoundsEnv); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, FailoverRoundsEnv)
		rounds = n
	}
	start := time.Now()
	c := startCluster(t)
	t.Logf("cluster up in %v", time.Since(start))
	for _, acks := range []int{0, 1} {
		var total failoverTally
		var promotions []time.Duration
		for r := range rounds {
			tally := failoverRound(t, c, acks, fmt.Sprintf("a%d_r%d", acks, r))
			t.Logf("ReplicaAcks=%d round %d: %+v", acks, r, tally)
			total.add(tally)
			promotions = append(promotions, tally.promotion)
		}
		t.Logf("ReplicaAcks=%d, %d rounds: calls=%d effects=%d duplicates: failover=%d rejoin=%d; deduplicated=%d indeterminate=%d holder-lost=%d complete-refused=%d lost-completions=%d unavailable-retries=%d promotions=%v",
			acks, rounds, total.calls, total.effects, total.duplicates, total.duplicatesRejoin, total.deduplicated, total.indeterminate,
			total.holderLost, total.completeRefused, total.lostCompletions, total.unavailable, promotions)
		if acks > 0 {
			assert.Zero(t, total.duplicates+total.duplicatesRejoin, "with ReplicaAcks=%d no acknowledged claim may be lost", acks)
		}
	}
	t.Run("ClientFollowsPromotion", func(t *testing.T) { clientFollowsPromotion(t, c) })
}

// clientFollowsPromotion kills a master for good and requires a claim on
// its slot, through a client that learnt the slot map before the kill, to
// reach the promoted replica. go-redis reloads its map on MOVED, which a
// dead node never sends, or after ClusterStateReloadInterval (a minute);
// the store asks for a reload after an unavailable error. The bound is far
// below that minute and far above a reload: not a timing assertion.
func clientFollowsPromotion(t *testing.T, c *redisCluster) {
	client := c.client(&redis.ClusterOptions{DialTimeout: 200 * time.Millisecond, DialerRetries: 1})
	s, err := redisstore.New(client, redisstore.Options{Prefix: "follow"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	claimOK(t, s, "tenant", "before") // Loads the slot map.
	victim, err := client.MasterForKey(t.Context(), redisstore.RecordKey(s, "tenant", "after"))
	require.NoError(t, err)
	replica := replicaOf(t, c, victim.Options().Addr)
	c.kill(port(victim.Options().Addr))
	waitFor(t, "the replica's promotion", func(ctx context.Context) bool { return role(ctx, replica) == "master" })

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "tenant", Key: "after", Holder: "h", Lease: time.Minute})
		if errors.Is(err, store.ErrUnavailable) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		require.NoError(t, err, "a claim on the dead master's slot never reached the promoted replica")
		require.Equal(t, store.StatusAcquired, res.Status)
		return
	}
}

func failoverRound(t *testing.T, c *redisCluster, acks int, prefix string) failoverTally {
	const (
		keys    = 400
		calls   = 3 // per key
		callers = 8
		tenants = 16 // spread over the three masters
	)
	client := c.client(&redis.ClusterOptions{
		DialTimeout: 200 * time.Millisecond, DialerRetries: 1, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRedirects: 8,
	})
	s, err := redisstore.New(client, redisstore.Options{Prefix: prefix, ReplicaAcks: acks, ReplicaAckTimeout: 200 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	// A bound, not a timing assertion: a round takes seconds, but a client
	// that kept its slot map past a master's death stalled for its
	// ClusterStateReloadInterval (a minute) before refreshTopology.
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()

	var (
		mu      sync.Mutex
		ledger  = make(map[string][]time.Time) // key → when each effect was applied
		acked   = make(map[string]bool)
		tally   failoverTally
		unavail atomic.Int64
		done    atomic.Int64
	)
	tenantOf := func(i int) string { return "tenant-" + strconv.Itoa(i%tenants) }
	keyOf := func(i int) string { return "key-" + strconv.Itoa(i) }
	retry := func(err error) bool {
		if errors.Is(err, store.ErrUnavailable) && ctx.Err() == nil {
			unavail.Add(1)
			time.Sleep(20 * time.Millisecond)
			return true
		}
		return false
	}
	call := func(i int, holder string) error {
		tenant, key := tenantOf(i), keyOf(i)
		for {
			res, err := s.Claim(ctx, store.ClaimParams{Tenant: tenant, Key: key, Holder: holder, Lease: time.Second})
			if retry(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("claim %s: %w", key, err)
			}
			switch res.Status {
			case store.StatusAcquired:
				mu.Lock()
				ledger[tenant+"/"+key] = append(ledger[tenant+"/"+key], time.Now())
				mu.Unlock()
				for {
					err := s.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: key, Token: res.Record.Token, Outcome: []byte(holder)})
					if retry(err) {
						continue
					}
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						acked[tenant+"/"+key] = true
						return nil
					case errors.Is(err, store.ErrNotHolder), errors.Is(err, store.ErrNotFound):
						tally.completeRefused++
						return nil
					default:
						return fmt.Errorf("complete %s: %w", key, err)
					}
				}
			case store.StatusCompleted:
				mu.Lock()
				tally.deduplicated++
				mu.Unlock()
				return nil
			case store.StatusIndeterminate:
				mu.Lock()
				tally.indeterminate++
				mu.Unlock()
				return nil
			case store.StatusHeld:
				if res.LeaseExpired {
					mu.Lock()
					tally.holderLost++
					mu.Unlock()
					return nil
				}
				_, err := s.Wait(ctx, store.WaitParams{Tenant: tenant, Key: key, Token: res.Record.Token})
				if err != nil && !retry(err) {
					return fmt.Errorf("wait %s: %w", key, err)
				}
			default:
				return fmt.Errorf("claim %s: status %v", key, res.Status)
			}
		}
	}

	// The master of tenant 0's slot dies once a quarter of the calls are
	// made; the rest of each key's calls come after it.
	victim, err := client.MasterForKey(ctx, redisstore.RecordKey(s, tenantOf(0), keyOf(0)))
	require.NoError(t, err)
	victimAddr := victim.Options().Addr
	replicaAddr := replicaOf(t, c, victimAddr)

	roundStart := time.Now()
	var restartedAt time.Time // written before g.Wait returns
	jobs := make(chan int)
	var g group
	for w := range callers {
		g.Go(func() error {
			for i := range jobs {
				if err := call(i, "caller-"+strconv.Itoa(w)); err != nil {
					return err
				}
				done.Add(1)
			}
			return nil
		})
	}
	// The kill comes from the feeder, after a quarter of the calls were
	// handed out and before the rest: with callers in flight, and three
	// quarters of the calls after it.
	kill := func() {
		c.kill(port(victimAddr))
		killedAt := time.Now()
		g.Go(func() error {
			// The promotion: the dead master's replica says it is a master.
			for role(ctx, replicaAddr) != "master" {
				if ctx.Err() != nil {
					return fmt.Errorf("no promotion of %s: %w", replicaAddr, ctx.Err())
				}
				time.Sleep(10 * time.Millisecond)
			}
			tally.promotion = time.Since(killedAt).Round(10 * time.Millisecond)
			// Bring the dead node back (empty: it kept no AOF) while the calls
			// go on: it rejoins as the new master's replica. Until it has, the
			// new master has no replica, and with ReplicaAcks its claims wait
			// in vain.
			restartedAt = time.Now()
			if out, err := exec.Command(clusterScript, "restart", c.dir, port(victimAddr)).CombinedOutput(); err != nil {
				return fmt.Errorf("restarting %s: %w: %s", victimAddr, err, out)
			}
			return nil
		})
	}
	for pass := range calls {
		for i := range keys {
			if pass*keys+i == keys*calls/4 {
				kill()
			}
			select {
			case jobs <- i:
			case <-ctx.Done():
			}
		}
	}
	close(jobs)
	require.NoError(t, g.Wait())
	t.Logf("calls done in %v", time.Since(roundStart))
	waitFor(t, "the old master to rejoin as a replica", func(ctx context.Context) bool {
		return role(ctx, victimAddr) == "slave" && linkUp(ctx, victimAddr)
	})
	t.Logf("rejoined in %v", time.Since(roundStart))

	for k, effects := range ledger {
		tally.effects += len(effects)
		switch {
		case len(effects) < 2:
		case effects[1].Before(restartedAt):
			tally.duplicates++
		default:
			tally.duplicatesRejoin++
		}
		if acked[k] {
			tenant, key, _ := strings.Cut(k, "/")
			for {
				rec, err := s.Lookup(ctx, store.LookupParams{Tenant: tenant, Key: key})
				if retry(err) {
					continue
				}
				if err != nil || rec.State != store.StateCompleted {
					tally.lostCompletions++
				}
				break
			}
		}
	}
	tally.calls = keys * calls
	tally.unavailable = int(unavail.Load())
	return tally
}

// replicaOf returns the address of the replica of the master at addr.
func replicaOf(t *testing.T, c *redisCluster, addr string) string {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = client.Close() }()
	var replica string
	waitFor(t, "a replica of "+addr, func(ctx context.Context) bool {
		info, err := client.Info(ctx, "replication").Result()
		if err != nil {
			return false
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			// slave0:ip=127.0.0.1,port=40216,state=online,offset=..,lag=0
			if !strings.HasPrefix(line, "slave0:") {
				continue
			}
			var ip, p string
			for f := range strings.SplitSeq(strings.TrimPrefix(line, "slave0:"), ",") {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "ip":
					ip = v
				case "port":
					p = v
				}
			}
			replica = ip + ":" + p
			return strings.Contains(line, "state=online")
		}
		return false
	})
	return replica
}

func role(ctx context.Context, addr string) string {
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer func() { _ = client.Close() }()
	v, err := client.Do(ctx, "role").Slice()
	if err != nil || len(v) == 0 {
		return ""
	}
	r, _ := v[0].(string)
	return r
}

func linkUp(ctx context.Context, addr string) bool {
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer func() { _ = client.Close() }()
	info, err := client.Info(ctx, "replication").Result()
	return err == nil && strings.Contains(info, "master_link_status:up")
}

func port(addr string) string {
	_, p, _ := strings.Cut(addr, ":")
	return p
}
