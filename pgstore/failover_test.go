package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/netfault"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// Environment variables that size TestPrimaryFailover's rounds: raise them
// for the figures docs/SCALING.md gives.
const (
	// PGFailoverKeysEnv is how many keys a round calls (each twice).
	PGFailoverKeysEnv = "IDEMPOTENCY_PG_FAILOVER_KEYS"
	// PGFailoverRoundsEnv is how many rounds each mode runs.
	PGFailoverRoundsEnv = "IDEMPOTENCY_PG_FAILOVER_ROUNDS"
	// PGFailoverDelayEnv is the delay on the replication link, as a
	// time.ParseDuration string.
	PGFailoverDelayEnv = "IDEMPOTENCY_PG_FAILOVER_DELAY"
)

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	return n
}

// pgPair is a primary, a standby streaming from it through a netfault
// proxy (so the replication link can be slowed), and the multi-host URL
// that reaches whichever of them accepts writes.
type pgPair struct {
	primary, standby *privateServer
	link             *netfault.Proxy // standby → primary
}

// startPair starts a primary (with extra options) and a standby made by
// pg_basebackup -R through the proxy. The standby does not inherit the
// primary's command-line options, so once promoted it runs alone and
// asynchronous: a promoted standby has no standby of its own.
func startPair(t *testing.T, extra ...string) *pgPair {
	t.Helper()
	primary := startPrivateServer(t, append([]string{"max_connections=60"}, extra...)...)
	link, err := netfault.Start(fmt.Sprintf("127.0.0.1:%d", primary.port))
	require.NoError(t, err)
	t.Cleanup(func() { _ = link.Close() })
	_, linkPort, err := net.SplitHostPort(link.Addr())
	require.NoError(t, err)

	basebackup, err := findPostgresBinary("pg_basebackup")
	if err != nil {
		t.Skipf("failover test needs pg_basebackup: %v", err)
	}
	standby := preparePrivateServer(t, "max_connections=60", "cluster_name=standby1")
	out, err := standby.run(basebackup, "-D", standby.data, "-h", "127.0.0.1", "-p", linkPort, "-U", "postgres",
		"-R", "-X", "stream", "-c", "fast", "--no-sync")
	require.NoError(t, err, "pg_basebackup: %s", out)
	standby.start()
	t.Cleanup(func() { _, _ = standby.run(standby.pgCtl, "-D", standby.data, "-m", "immediate", "-w", "stop") })

	p := &pgPair{primary: primary, standby: standby, link: link}
	pool := p.pool(t, primary.url(), 1)
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'
AND (current_setting('synchronous_standby_names') = '' OR sync_state IN ('sync', 'quorum'))`).Scan(&n)
		return err == nil && n == 1
	}, 60*time.Second, 50*time.Millisecond, "the standby never streamed (as a synchronous standby, when the primary names one)")
	return p
}

// url is the multi-host connection string the workers use: the first
// host of the two that accepts writes.
func (p *pgPair) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2&target_session_attrs=read-write",
		p.primary.port, p.standby.port)
}

func (p *pgPair) pool(t *testing.T, url string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// failover kills the primary (pg_ctl stop -m immediate: no shutdown
// checkpoint, no goodbye to the standby) and promotes the standby at once,
// as a failover manager does once it declares the primary dead. What the
// replication link still held is lost: the promoted standby stops
// receiving.
func (p *pgPair) failover(t *testing.T) time.Duration {
	start := time.Now()
	out, err := p.primary.run(p.primary.pgCtl, "-D", p.primary.data, "-m", "immediate", "-w", "stop")
	require.NoError(t, err, "pg_ctl stop: %s", out)
	out, err = p.standby.run(p.standby.pgCtl, "-D", p.standby.data, "-w", "-t", "60", "promote")
	require.NoError(t, err, "pg_ctl promote: %s\n%s", out, p.standby.log())
	return time.Since(start)
}

// pgFailoverTally is what one round saw. The ledger of effects is the
// test's own, outside PostgreSQL, so a failover cannot touch it.
type pgFailoverTally struct {
	calls, effects  int
	secondEffects   int // keys whose effect was applied more than once
	deduplicated    int // answered from a completed record
	indeterminate   int // found the key indeterminate
	holderLost      int // found the holder's lease run out: EFFECTFUL ends indeterminate, does not run
	completeRefused int // Complete found its claim gone: the claim was lost
	// completeAnswerLost: a retried Complete found the record completed
	// under its own token (the first attempt took; its answer was lost).
	completeAnswerLost int
	lostCompletions    int // completions acknowledged whose record the key does not end with
	unavailable        int // claims and completions retried while no primary answered
	beforeKill         int // completions acknowledged before the kill
	// lostWindow is how long before the kill the earliest lost completion
	// was acknowledged: the failover lost what was acknowledged in it.
	lostWindow time.Duration
	failover   time.Duration
}

func (t *pgFailoverTally) add(o pgFailoverTally) {
	t.calls += o.calls
	t.effects += o.effects
	t.secondEffects += o.secondEffects
	t.deduplicated += o.deduplicated
	t.indeterminate += o.indeterminate
	t.holderLost += o.holderLost
	t.completeRefused += o.completeRefused
	t.completeAnswerLost += o.completeAnswerLost
	t.lostCompletions += o.lostCompletions
	t.unavailable += o.unavailable
	t.beforeKill += o.beforeKill
	t.lostWindow = max(t.lostWindow, o.lostWindow)
}

// TestPrimaryFailover kills a PostgreSQL primary while workers make
// EFFECTFUL-style calls (claim, apply the effect to the test's ledger,
// complete; a key found held by a lost holder ends indeterminate and never
// runs again), promotes its standby, and counts the keys whose effect was
// applied twice. The workers reach the primary through a multi-host
// connection string with target_session_attrs=read-write, so after the
// promotion their new connections land on the promoted standby. Every key
// is called twice, the second call after the failover, so a completed
// record the failover lost is a second effect on that call.
//
// The replication link runs through a netfault proxy that delays what the
// primary sends by IDEMPOTENCY_PG_FAILOVER_DELAY (default 200ms): on
// loopback, a standby is never far enough behind for a failover to lose
// anything. With an asynchronous standby the round measures what is lost
// (reported, not asserted: it depends on timing); with a synchronous one
// (synchronous_standby_names='*', synchronous_commit=on) it requires none.
func TestPrimaryFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts private PostgreSQL primaries and standbys; skipped with -short")
	}
	t.Parallel()
	keys := envInt(t, PGFailoverKeysEnv, 40)
	rounds := envInt(t, PGFailoverRoundsEnv, 1)
	delay := 200 * time.Millisecond
	if v := os.Getenv(PGFailoverDelayEnv); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, PGFailoverDelayEnv)
		delay = d
	}
	for _, sync := range []bool{false, true} {
		mode := map[bool]string{false: "asynchronous", true: "synchronous"}[sync]
		t.Run(mode, func(t *testing.T) {
			var total pgFailoverTally
			var failovers []time.Duration
			for r := range rounds {
				var extra []string
				if sync {
					extra = []string{"synchronous_standby_names='*'", "synchronous_commit=on"}
				}
				pair := startPair(t, extra...)
				tally := pgFailoverRound(t, pair, keys, delay, sync)
				t.Logf("%s round %d: %+v", mode, r, tally)
				total.add(tally)
				failovers = append(failovers, tally.failover.Round(time.Millisecond))
			}
			t.Logf("%s standby, link delay %v, %d rounds of %d keys: calls=%d effects=%d completions acknowledged before the kill=%d "+
				"second effects=%d lost completions=%d (acknowledged up to %v before the kill) complete-refused=%d complete-answer-lost=%d; deduplicated=%d indeterminate=%d holder-lost=%d unavailable-retries=%d failovers=%v",
				mode, delay, rounds, keys, total.calls, total.effects, total.beforeKill, total.secondEffects, total.lostCompletions, total.lostWindow,
				total.completeRefused, total.completeAnswerLost, total.deduplicated, total.indeterminate, total.holderLost, total.unavailable, failovers)
			if sync {
				assert.Zero(t, total.secondEffects, "a synchronous standby may lose no acknowledged record")
				assert.Zero(t, total.lostCompletions, "a synchronous standby may lose no acknowledged completion")
				assert.Zero(t, total.completeRefused, "a synchronous standby may lose no acknowledged claim")
			}
		})
	}
}

func pgFailoverRound(t *testing.T, pair *pgPair, keys int, delay time.Duration, synchronous bool) pgFailoverTally {
	const (
		calls   = 2 // per key: the second after the failover
		callers = 16
	)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	pool := pair.pool(t, pair.url(), callers+2)
	s, err := pgstore.New(pool, pgstore.Options{RequireSynchronousReplication: synchronous, PollInterval: 20 * time.Millisecond, MaxPollInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.NoError(t, s.EnsureSchema(ctx))
	r, err := pgstore.DetectReplication(ctx, pool)
	require.NoError(t, err)
	t.Logf("before the failover the store runs on %s", r)
	want := map[bool]pgstore.ReplicationMode{false: pgstore.ReplicationAsynchronous, true: pgstore.ReplicationSynchronous}[synchronous]
	require.Equal(t, want, r.Mode, "%s", r)

	// The schema is on the standby before the link slows: the round
	// measures what the calls lose, not the table.
	require.Eventually(t, func() bool {
		var caughtUp bool
		err := pool.QueryRow(ctx, `SELECT coalesce(bool_and(replay_lsn >= pg_current_wal_lsn()), false) FROM pg_stat_replication`).Scan(&caughtUp)
		return err == nil && caughtUp
	}, time.Minute, 10*time.Millisecond, "the standby never replayed the schema")
	pair.link.SetDelay(netfault.Down, delay) // WAL from the primary to the standby

	var (
		mu       sync.Mutex
		ledger   = make(map[string]int)      // key → effects applied
		acked    = make(map[string][]int64)  // key → tokens of its acknowledged completions
		ackedAt  = make(map[int64]time.Time) // token → when its completion was acknowledged
		killAt   time.Time                   // written before failedAt is closed
		tally    pgFailoverTally
		unavail  atomic.Int64
		killed   atomic.Bool
		failedAt = make(chan struct{})
	)
	retry := func(err error) bool {
		if errors.Is(err, store.ErrUnavailable) && ctx.Err() == nil {
			unavail.Add(1)
			time.Sleep(20 * time.Millisecond)
			return true
		}
		return false
	}
	// The options check refuses claims while the promoted standby runs
	// alone; the round's calls after the failover use a store without it,
	// as a deployment would have to, to measure what the failover lost.
	after, err := pgstore.New(pool, pgstore.Options{PollInterval: 20 * time.Millisecond, MaxPollInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(after.Close)
	storeFor := func() *pgstore.Store {
		select {
		case <-failedAt:
			return after
		default:
			return s
		}
	}
	call := func(i int, holder string) error {
		key := "key-" + strconv.Itoa(i)
		for {
			s := storeFor()
			res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: key, Holder: holder, Lease: 2 * time.Second})
			if retry(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("claim %s: %w", key, err)
			}
			switch res.Status {
			case store.StatusAcquired:
				mu.Lock()
				ledger[key]++
				mu.Unlock()
				for {
					err := storeFor().Complete(ctx, store.CompleteParams{Tenant: "t", Key: key, Token: res.Record.Token, Outcome: []byte(holder)})
					if retry(err) {
						continue
					}
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						acked[key] = append(acked[key], res.Record.Token)
						ackedAt[res.Record.Token] = time.Now()
						if !killed.Load() {
							tally.beforeKill++
						}
						return nil
					case errors.Is(err, store.ErrNotHolder), errors.Is(err, store.ErrNotFound):
						// The completion may have taken with its answer
						// lost in the failover (a retried Complete then
						// finds its own record completed), or its claim was
						// lost.
						rec, lerr := after.Lookup(ctx, store.LookupParams{Tenant: "t", Key: key})
						if lerr == nil && rec.State == store.StateCompleted && rec.Token == res.Record.Token {
							acked[key] = append(acked[key], res.Record.Token)
							tally.completeAnswerLost++
							return nil
						}
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
				_, err := s.Wait(ctx, store.WaitParams{Tenant: "t", Key: key, Token: res.Record.Token})
				if err != nil && !retry(err) {
					return fmt.Errorf("wait %s: %w", key, err)
				}
			default:
				return fmt.Errorf("claim %s: status %v", key, res.Status)
			}
		}
	}

	roundStart := time.Now()
	jobs := make(chan int)
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for w := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := call(i, "caller-"+strconv.Itoa(w)); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
	// The kill comes once three quarters of the first calls are handed
	// out: callers in flight, and every key's second call after it.
	for pass := range calls {
		for i := range keys {
			if pass == 0 && i == keys*3/4 {
				killed.Store(true)
				killAt = time.Now()
				t.Logf("killing the primary %v into the round", killAt.Sub(roundStart).Round(time.Millisecond))
				tally.failover = pair.failover(t)
				close(failedAt)
			}
			select {
			case jobs <- i:
			case <-ctx.Done():
			}
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	r, err = pgstore.DetectReplication(ctx, pool)
	require.NoError(t, err)
	t.Logf("after the failover the store runs on %s", r)
	assert.Equal(t, pgstore.ReplicationSingleNode, r.Mode, "the promoted standby runs alone")
	if synchronous {
		// The store that requires a synchronous standby refuses to claim
		// on the promoted one, which has none.
		_, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "after-failover", Holder: "h", Lease: time.Second})
		var re *pgstore.ReplicationError
		require.ErrorAs(t, err, &re)
		assert.ErrorIs(t, err, pgstore.ErrNotSynchronous)
		assert.ErrorIs(t, err, store.ErrUnavailable)
		assert.Equal(t, pgstore.ReplicationSingleNode, re.Replication.Mode)
	}

	for _, effects := range ledger {
		tally.effects += effects
		if effects > 1 {
			tally.secondEffects++
		}
	}
	// A key ends with one completed record: every other completion
	// acknowledged for it was lost.
	for key, tokens := range acked {
		for {
			rec, err := after.Lookup(ctx, store.LookupParams{Tenant: "t", Key: key})
			if retry(err) {
				continue
			}
			for _, token := range tokens {
				if err != nil || rec.State != store.StateCompleted || rec.Token != token {
					tally.lostCompletions++
					if at, ok := ackedAt[token]; ok && at.Before(killAt) {
						tally.lostWindow = max(tally.lostWindow, killAt.Sub(at).Round(time.Millisecond))
					}
				}
			}
			break
		}
	}
	tally.calls = keys * calls
	tally.unavailable = int(unavail.Load())
	return tally
}

// TestDetectReplication asks the shared test server, which runs alone,
// what it runs on, and requires a store that requires synchronous
// replication to refuse to claim there, with an error that names the
// option, and to claim on a primary with a synchronous standby.
func TestDetectReplication(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgenv.Postgres(t)
	r, err := pgstore.DetectReplication(ctx, pool)
	require.NoError(t, err)
	assert.Equal(t, pgstore.ReplicationSingleNode, r.Mode, "%s", r)
	assert.Empty(t, r.Standbys)
	assert.Contains(t, r.String(), "single node")

	plain, err := pgstore.New(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(plain.Close)
	require.NoError(t, plain.EnsureSchema(ctx))
	_, err = plain.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "plain", Holder: "h", Lease: time.Second})
	require.NoError(t, err, "without the option a single node claims")

	strict, err := pgstore.New(pool, pgstore.Options{Schema: schema, RequireSynchronousReplication: true})
	require.NoError(t, err)
	t.Cleanup(strict.Close)
	_, err = strict.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "strict", Holder: "h", Lease: time.Second})
	var re *pgstore.ReplicationError
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, pgstore.ErrNotSynchronous)
	assert.ErrorIs(t, err, store.ErrUnavailable, "a refused claim is retried, never read as an answer")
	assert.Contains(t, err.Error(), "RequireSynchronousReplication")
	assert.Contains(t, err.Error(), "single node")
	_, err = plain.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "strict"})
	assert.ErrorIs(t, err, store.ErrNotFound, "a refused claim wrote nothing")
}

// TestRequireSynchronousReplicationPair starts a primary with an
// asynchronous standby and one with a synchronous standby: the option
// refuses claims on the first and lets them through on the second, and
// DetectReplication tells them apart, by the session's synchronous_commit
// too.
func TestRequireSynchronousReplicationPair(t *testing.T) {
	if testing.Short() {
		t.Skip("starts private PostgreSQL primaries and standbys; skipped with -short")
	}
	t.Parallel()
	ctx := context.Background()
	for _, sync := range []bool{false, true} {
		var extra []string
		if sync {
			extra = []string{"synchronous_standby_names='*'"}
		}
		pair := startPair(t, extra...)
		pool := pair.pool(t, pair.url(), 4)
		r, err := pgstore.DetectReplication(ctx, pool)
		require.NoError(t, err)
		require.Len(t, r.Standbys, 1, "%s", r)
		assert.Equal(t, "standby1", r.Standbys[0].Name)
		s, err := pgstore.New(pool, pgstore.Options{RequireSynchronousReplication: true})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		require.NoError(t, s.EnsureSchema(ctx))
		_, err = s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Second})
		if !sync {
			assert.Equal(t, pgstore.ReplicationAsynchronous, r.Mode, "%s", r)
			assert.ErrorIs(t, err, pgstore.ErrNotSynchronous)
			continue
		}
		assert.Equal(t, pgstore.ReplicationSynchronous, r.Mode, "%s", r)
		require.NoError(t, err, "a primary with a synchronous standby claims")
		// The session's synchronous_commit is what counts.
		cfg := pool.Config().Copy()
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "local"
		local, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(local.Close)
		r, err = pgstore.DetectReplication(ctx, local)
		require.NoError(t, err)
		assert.Equal(t, pgstore.ReplicationAsynchronous, r.Mode, "synchronous_commit=local waits for no standby: %s", r)

		// A role that may not read pg_stat_replication's sync_state is
		// told so, and the option refuses rather than guess.
		_, err = pool.Exec(ctx, "CREATE ROLE plain LOGIN")
		require.NoError(t, err)
		cfg = pool.Config().Copy()
		cfg.ConnConfig.User = "plain"
		plain, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(plain.Close)
		r, err = pgstore.DetectReplication(ctx, plain)
		require.NoError(t, err)
		assert.Equal(t, pgstore.ReplicationUnknown, r.Mode, "%s", r)
		strict, err := pgstore.New(plain, pgstore.Options{RequireSynchronousReplication: true})
		require.NoError(t, err)
		t.Cleanup(strict.Close)
		_, err = strict.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "plain", Holder: "h", Lease: time.Second})
		assert.ErrorIs(t, err, pgstore.ErrNotSynchronous)
		assert.ErrorContains(t, err, "pg_read_all_stats")
	}
}
