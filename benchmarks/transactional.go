package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// txCallers are the caller counts of the transactional section.
var txCallers = []int{1, 8}

// benchTransactional is section 6: one EFFECTFUL call's store work when its
// effect is a row in the store's database, three ways, on one pgstore:
//
//   - transactional: Claim, then the row and the completed record in one
//     transaction (BeginTransaction, INSERT through pgstore.Tx, Commit);
//   - write + Complete: Claim, the same INSERT committed on its own, then
//     Complete — the ordinary path with the same effect: one commit more;
//   - claim + Complete: pgstore's ordinary path with no effect at all, the
//     floor of what the store costs.
//
// Each cell runs the callers for cfg.Cell on fresh keys; the ratios are of
// calls per second within one repetition.
func benchTransactional(ctx context.Context, e *benchEnv, cfg config, out, progress io.Writer) error {
	s, err := pgstore.New(e.pool, pgstore.Options{Schema: e.schema, Table: "tx_records", TTL: benchTTL})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.EnsureSchema(ctx); err != nil {
		return err
	}
	ledger := e.table("tx_ledger")
	if _, err := e.pool.Exec(ctx, "CREATE TABLE "+ledger+" (key text NOT NULL, effect text NOT NULL)"); err != nil {
		return err
	}
	insert := "INSERT INTO " + ledger + " (key, effect) VALUES ($1, $2)"
	outcome := []byte("booked seat 12A on BA117")

	var seq atomic.Int64
	claim := func(ctx context.Context) (store.Record, error) {
		key := "k" + strconv.FormatInt(seq.Add(1), 36)
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "bench", Key: key, Holder: "bench", Lease: time.Minute})
		if err != nil {
			return store.Record{}, err
		}
		if res.Status != store.StatusAcquired {
			return store.Record{}, fmt.Errorf("fresh key %s: %s", key, res.Status)
		}
		return res.Record, nil
	}
	designs := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"transactional", func(ctx context.Context) error {
			rec, err := claim(ctx)
			if err != nil {
				return err
			}
			txn, err := s.BeginTransaction(ctx, store.TransactionParams{Tenant: rec.Tenant, Key: rec.Key, Token: rec.Token})
			if err != nil {
				return err
			}
			bctx := txn.Context(ctx)
			tx, err := pgstore.Tx(bctx)
			if err != nil {
				_ = txn.Rollback(ctx)
				return err
			}
			if _, err := tx.Exec(bctx, insert, rec.Key, "effect"); err != nil {
				_ = txn.Rollback(ctx)
				return err
			}
			return txn.Commit(ctx, outcome)
		}},
		{"write + Complete", func(ctx context.Context) error {
			rec, err := claim(ctx)
			if err != nil {
				return err
			}
			if _, err := e.pool.Exec(ctx, insert, rec.Key, "effect"); err != nil {
				return err
			}
			return s.Complete(ctx, store.CompleteParams{Tenant: rec.Tenant, Key: rec.Key, Token: rec.Token, Outcome: outcome})
		}},
		{"claim + Complete", func(ctx context.Context) error {
			rec, err := claim(ctx)
			if err != nil {
				return err
			}
			return s.Complete(ctx, store.CompleteParams{Tenant: rec.Tenant, Key: rec.Key, Token: rec.Token, Outcome: outcome})
		}},
	}

	fmt.Fprintf(out, "## 6. Transactional EFFECTFUL calls\n\n"+
		"One EFFECTFUL call's store work when its effect is a row in the store's database (pgstore, pool of %d): "+
		"**transactional** — Claim, then the row and the completed record in one transaction; "+
		"**write + Complete** — Claim, the same INSERT committed on its own, then Complete; "+
		"**claim + Complete** — no effect, pgstore's ordinary path alone. Fresh keys, %v per cell. "+
		"Calls per second, median (min–max) of %d interleaved repetitions; a ratio above 1 means the transactional call is faster.\n\n",
		cfg.PoolConns, cfg.Cell, cfg.Reps)
	fmt.Fprintln(out, "| callers | transactional calls/s | write + Complete calls/s | claim + Complete calls/s | transactional ÷ write + Complete | transactional ÷ claim + Complete |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|")
	for _, callers := range txCallers {
		rates := make([][]float64, len(designs))
		for rep := range cfg.Reps {
			for i, d := range designs {
				r, err := callRate(ctx, callers, cfg.Cell, d.call)
				if err != nil {
					return fmt.Errorf("%s: %w", d.name, err)
				}
				rates[i] = append(rates[i], r)
				fmt.Fprintf(progress, "   rep %d, %d callers, %s: %.0f calls/s\n", rep+1, callers, d.name, r)
			}
		}
		fmt.Fprintf(out, "| %d | %s | %s | %s | %s | %s |\n", callers,
			spread(rates[0], "%.0f"), spread(rates[1], "%.0f"), spread(rates[2], "%.0f"),
			spread(ratios(rates[0], rates[1]), "%.2f"), spread(ratios(rates[0], rates[2]), "%.2f"))
	}
	fmt.Fprintln(out)
	return nil
}

// callRate runs call from callers goroutines for d and returns the calls
// per second that succeeded; the first error ends the cell.
func callRate(ctx context.Context, callers int, d time.Duration, call func(context.Context) error) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		n     atomic.Int64
		wg    sync.WaitGroup
		first atomic.Pointer[error]
	)
	start := time.Now()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := call(ctx); err != nil {
					if ctx.Err() == nil {
						first.CompareAndSwap(nil, &err)
						cancel()
					}
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return 0, *p
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}
