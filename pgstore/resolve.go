package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tesserix/idempotency/store"
)

// Resolve implements [store.Store.Resolve]: a person's decision on an
// indeterminate record (or, with ResolveParams.Stale, a pending one whose
// lease ran out), in one statement (resolveComplete or resolveFree,
// fenced by ResolveParams.Token when it is set); when it changes nothing,
// a read of what stands picks the error, and with ResolveParams.RecordIfGone
// a record gone meanwhile is written completed (resolveGone).
func (s *Store) Resolve(ctx context.Context, p store.ResolveParams) error {
	const op = "resolve"
	if err := begin(ctx, op, p); err != nil {
		return err
	}
	announce := s.notice(p.Tenant, p.Key)
	trail := resolution{action: int16(p.Decision), by: p.By, reason: p.Reason, reference: p.Reference}
	outcome := p.Outcome
	if outcome == nil {
		outcome = []byte{}
	}
	var (
		n    int64
		when time.Time // the store's time the statement judged leases by
	)
	err := retry(ctx, func(ctx context.Context) error {
		now := s.now(ctx)
		when = now
		if p.Decision == store.ActionComplete {
			a := resolveCompleteArgs{
				tenant: p.Tenant, key: p.Key, now: now, expiresAt: now.Add(s.opts.TTL), outcome: outcome,
				notice: announce, token: p.Token, resolution: trail, stale: p.Stale,
			}
			return s.pool.QueryRow(ctx, s.sql.resolveComplete, a.params().values()...).Scan(&n)
		}
		a := resolveFreeArgs{tenant: p.Tenant, key: p.Key, now: now, notice: announce, token: p.Token, stale: p.Stale}
		return s.pool.QueryRow(ctx, s.sql.resolveFree, a.params().values()...).Scan(&n)
	})
	if err != nil {
		return s.interpret(ctx, op, err)
	}
	if n > 0 {
		return nil
	}
	// Nothing changed: say why. The read only picks the error.
	rec, err := s.lookup(ctx, p.Tenant, p.Key)
	if errors.Is(err, pgx.ErrNoRows) && p.RecordIfGone {
		err = retry(ctx, func(ctx context.Context) error {
			now := s.now(ctx)
			check, retention := kept(p.Check, p.Retention)
			a := resolveGoneArgs{
				tenant: p.Tenant, key: p.Key, holder: store.ResolveHolder, token: store.NewToken(),
				now: now, expiresAt: now.Add(store.RetentionOr(keptRetention(p.Retention), s.opts.TTL)),
				outcome: outcome, resolution: trail, notice: announce, check: check, retention: retention,
			}
			return s.pool.QueryRow(ctx, s.sql.resolveGone, a.params().values()...).Scan(&n)
		})
		if err != nil {
			return s.interpret(ctx, op, err)
		}
		if n > 0 {
			return nil
		}
		// Claimed again since the read: say what stands there now.
		rec, err = s.lookup(ctx, p.Tenant, p.Key)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgstore: %s %q in tenant %q: %w", op, p.Key, p.Tenant, store.ErrNotFound)
	case err != nil:
		return s.interpret(ctx, op, err)
	case rec.State == store.StatePending && p.Stale && rec.Token != p.Token:
		return fmt.Errorf("pgstore: %s %q in tenant %q decided on token %d, but the claim pending stands under %d: %w",
			op, p.Key, p.Tenant, p.Token, rec.Token, store.ErrNotHolder)
	case rec.State == store.StatePending && p.Stale && when.Before(rec.LeaseUntil):
		// A lease only grows (a holder renewing), so what the read shows
		// is what the statement refused.
		return fmt.Errorf("pgstore: %s %q in tenant %q: its holder %q holds a lease until %v: %w",
			op, p.Key, p.Tenant, rec.Holder, rec.LeaseUntil, store.ErrLeaseLive)
	case rec.State == store.StatePending && p.Stale:
		return fmt.Errorf("pgstore: %s %q in tenant %q changed while being resolved: %w", op, p.Key, p.Tenant, store.ErrNotIndeterminate)
	case rec.State == store.StateIndeterminate && p.Token != 0 && rec.Token != p.Token:
		return fmt.Errorf("pgstore: %s %q in tenant %q decided on token %d, but the indeterminate record stands under %d: %w",
			op, p.Key, p.Tenant, p.Token, rec.Token, store.ErrNotHolder)
	case rec.State == store.StateIndeterminate:
		// It became indeterminate between the two statements; the
		// caller may try again.
		return fmt.Errorf("pgstore: %s %q in tenant %q changed while being resolved: %w", op, p.Key, p.Tenant, store.ErrNotIndeterminate)
	default:
		return fmt.Errorf("pgstore: %s %q in tenant %q, which is %s: %w", op, p.Key, p.Tenant, rec.State, store.ErrNotIndeterminate)
	}
}
