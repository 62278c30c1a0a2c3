package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

// waitFunc blocks until the claim on key under token has ended.
type waitFunc func(ctx context.Context, key string, token int64) error

// storeWait waits with the store's own Wait.
func storeWait(s store.Store) waitFunc {
	return func(ctx context.Context, key string, token int64) error {
		res, err := s.Wait(ctx, store.WaitParams{Tenant: benchTenant, Key: key, Token: token})
		if err == nil && res.Status != store.StatusCompleted {
			err = fmt.Errorf("wait ended with %v", res.Status)
		}
		return err
	}
}

// pollWait re-reads the record with Lookup, backing off from first to
// limit: a waiter with no notifications.
func pollWait(s store.Store, first, limit time.Duration) waitFunc {
	return func(ctx context.Context, key string, _ int64) error {
		d := first
		for {
			rec, err := s.Lookup(ctx, store.LookupParams{Tenant: benchTenant, Key: key})
			if err != nil {
				return err
			}
			if rec.State == store.StateCompleted {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
			d = min(2*d, limit)
		}
	}
}

// wakeSample claims a fresh key on holder, starts a waiter on it, keeps the
// claim for a random 5–100 ms, completes it, and returns how long after the
// holder called Complete the waiter woke.
func wakeSample(ctx context.Context, holder store.Store, wait waitFunc, key string) (lat, settle time.Duration, err error) {
	res, err := holder.Claim(ctx, store.ClaimParams{Tenant: benchTenant, Key: key, Holder: "holder", Lease: benchLease})
	if err != nil {
		return 0, 0, err
	}
	if res.Status != store.StatusAcquired {
		return 0, 0, fmt.Errorf("fresh key %s: %v", key, res.Status)
	}
	woke := make(chan time.Time, 1)
	failed := make(chan error, 1)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		if err := wait(wctx, key, res.Record.Token); err != nil {
			failed <- err
			return
		}
		woke <- time.Now()
	}()
	time.Sleep(time.Duration(5+rand.IntN(96)) * time.Millisecond)
	select {
	case <-woke:
		return 0, 0, errors.New("the waiter woke before the claim ended")
	case err := <-failed:
		return 0, 0, err
	default:
	}
	// Timed from the call, not its return: the notification can reach
	// the waiter before the reply reaches the holder.
	done := time.Now()
	if err := holder.Complete(ctx, store.CompleteParams{Tenant: benchTenant, Key: key, Token: res.Record.Token, Outcome: []byte("ok")}); err != nil {
		return 0, 0, err
	}
	settle = time.Since(done)
	select {
	case t := <-woke:
		return t.Sub(done), settle, nil
	case err := <-failed:
		return 0, 0, err
	}
}

// benchWake is section 2.
func benchWake(ctx context.Context, e *benchEnv, cfg config, out, progress io.Writer) error {
	ps, err := pgstore.New(e.pool, pgstore.Options{Schema: e.schema, Table: "wake", TTL: benchTTL})
	if err != nil {
		return err
	}
	defer ps.Close()
	if err := ps.EnsureSchema(ctx); err != nil {
		return err
	}
	// A second store on the same table listening on another channel never
	// hears the first's notifications: its Wait is pgstore's polling alone.
	deaf, err := pgstore.New(e.pool, pgstore.Options{Schema: e.schema, Table: "wake", TTL: benchTTL, NotifyChannel: testenv.UniqueName("nobody")})
	if err != nil {
		return err
	}
	defer deaf.Close()
	rs, err := redisstore.New(e.redis, redisstore.Options{Prefix: e.prefix + ":wake", TTL: redisTTL})
	if err != nil {
		return err
	}
	defer rs.Close()

	designs := []struct {
		name   string
		holder store.Store
		wait   waitFunc
	}{
		{"pgstore, LISTEN/NOTIFY (Wait)", ps, storeWait(ps)},
		{fmt.Sprintf("pgstore, polling only (Wait, no notification: %s doubling to %s)", pgstore.DefaultPollInterval, pgstore.DefaultMaxPollInterval), ps, storeWait(deaf)},
		{"redisstore, pub/sub (Wait)", rs, storeWait(rs)},
		{fmt.Sprintf("redisstore, polling only (Lookup, 10ms doubling to %s)", redisstore.DefaultPollInterval), rs, pollWait(rs, 10*time.Millisecond, redisstore.DefaultPollInterval)},
	}
	if e.cluster != nil {
		cs, err := redisstore.New(e.cluster, redisstore.Options{Prefix: e.prefix + ":wake", TTL: redisTTL})
		if err != nil {
			return err
		}
		defer cs.Close()
		designs = append(designs, struct {
			name   string
			holder store.Store
			wait   waitFunc
		}{"redisstore on a Cluster, sharded pub/sub (Wait)", cs, storeWait(cs)})
	}
	samples := make([][]time.Duration, len(designs))
	settles := make([][]time.Duration, len(designs))
	n := 0
	for rep := range cfg.Reps {
		for i := range cfg.WakeN {
			for di, d := range designs {
				n++
				lat, settle, err := wakeSample(ctx, d.holder, d.wait, fmt.Sprintf("w%d-%d-%d", rep, i, di))
				if err != nil {
					return fmt.Errorf("%s: %w", d.name, err)
				}
				samples[di] = append(samples[di], lat)
				settles[di] = append(settles[di], settle)
			}
		}
		fmt.Fprintf(progress, "   rep %d: %d samples\n", rep+1, n)
	}
	fmt.Fprintf(out, "## 2. Wake-up latency of a waiting duplicate\n\nFrom the holder calling Complete to the waiter's Wait returning (so it includes the Complete's own round trip and, for PostgreSQL, its commit); the claim is held 5–100 ms (random) first. "+
		"Then how long the Complete call itself took, to its return (a wake-up cannot come before the settlement commits, somewhere within that call), "+
		"and how long after that return the waiter woke (0 when it woke first). "+
		"%d samples per design, interleaved.\n\n", cfg.Reps*cfg.WakeN)
	fmt.Fprintln(out, "| design | p50 ms | p99 ms | max ms | Complete call p50 ms | Complete call p99 ms | after Complete returned p50 ms | p99 ms |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|")
	for di, d := range designs {
		s, c := samples[di], settles[di]
		after := make([]time.Duration, len(s))
		for i := range s {
			after[i] = max(0, s[i]-c[i])
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", d.name, ms(percentile(s, 50)), ms(percentile(s, 99)), ms(percentile(s, 100)),
			ms(percentile(c, 50)), ms(percentile(c, 99)), ms(percentile(after, 50)), ms(percentile(after, 99)))
	}
	fmt.Fprintln(out)
	return nil
}
