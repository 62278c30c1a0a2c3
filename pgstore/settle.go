package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tesserix/idempotency/store"
)

// What a holder does with its claim: extend its lease (Renew) and end it
// (Complete, Release, MarkIndeterminate), each a statement fenced by the
// claim's token (fenced), and the error that says what stood instead when
// the token no longer held (notHolder). Complete's batched path is in
// batch.go.

// Renew implements [store.Store.Renew].
func (s *Store) Renew(ctx context.Context, p store.RenewParams) (time.Time, error) {
	const op = "renew"
	if err := begin(ctx, op, p); err != nil {
		return time.Time{}, err
	}
	var until time.Time
	err := retry(ctx, func(ctx context.Context) error {
		now := s.now(ctx)
		a := renewArgs{
			fence:      fence{tenant: p.Tenant, key: p.Key, token: p.Token, now: now},
			leaseUntil: now.Add(p.Lease),
			expiresAt:  now.Add(s.opts.TTL),
		}
		return s.pool.QueryRow(ctx, s.sql.renew, a.params().values()...).Scan(&until)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, s.notHolder(ctx, op, p.Tenant, p.Key, p.Token)
	}
	if err != nil {
		return time.Time{}, s.interpret(ctx, op, err)
	}
	return until, nil
}

// Complete implements [store.Store.Complete].
func (s *Store) Complete(ctx context.Context, p store.CompleteParams) error {
	const op = "complete"
	if err := begin(ctx, op, p); err != nil {
		return err
	}
	if s.completes != nil {
		done, err := s.completes.Do(ctx, p, func(ctx context.Context, p store.CompleteParams) (bool, error) {
			return true, s.complete(ctx, p)
		})
		switch {
		case err != nil && err == ctx.Err():
			return s.interpret(ctx, op, err) // it gave up waiting for a batch
		case err != nil || done:
			return err
		}
	}
	return s.complete(ctx, p)
}

// complete is Complete on its own: its own statement, not batched.
func (s *Store) complete(ctx context.Context, p store.CompleteParams) error {
	const op = "complete"
	outcome := p.Outcome
	if outcome == nil {
		outcome = []byte{} // nil and empty are the same: store '' rather than NULL
	}
	return s.fenced(ctx, op, p.Tenant, p.Key, p.Token, func(f fence) (string, paramList) {
		return s.sql.complete, completeArgs{
			fence:     f,
			expiresAt: f.now.Add(s.opts.TTL),
			outcome:   outcome,
			notice:    s.notice(p.Tenant, p.Key),
		}.params()
	})
}

// Release implements [store.Store.Release].
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) error {
	const op = "release"
	if err := begin(ctx, op, p); err != nil {
		return err
	}
	return s.fenced(ctx, op, p.Tenant, p.Key, p.Token, func(f fence) (string, paramList) {
		return s.sql.release, settleArgs{fence: f, notice: s.notice(p.Tenant, p.Key)}.params()
	})
}

// MarkIndeterminate implements [store.Store.MarkIndeterminate].
func (s *Store) MarkIndeterminate(ctx context.Context, p store.MarkIndeterminateParams) error {
	const op = "mark indeterminate"
	if err := begin(ctx, op, p); err != nil {
		return err
	}
	return s.fenced(ctx, op, p.Tenant, p.Key, p.Token, func(f fence) (string, paramList) {
		return s.sql.markIndeterminate, markArgs{
			fence:     f,
			expiresAt: store.NeverExpires, // an indeterminate record keeps until a person decides
			reason:    p.Reason,
			notice:    s.notice(p.Tenant, p.Key),
		}.params()
	})
}

// fenced runs a statement that changes a record only while token holds its
// pending claim, and turns "no row changed" into ErrNotHolder. stmt
// returns the statement and its parameters for the fence, at each
// attempt's now.
func (s *Store) fenced(ctx context.Context, op, tenant, key string, token int64, stmt func(fence) (string, paramList)) error {
	var n int64
	err := retry(ctx, func(ctx context.Context) error {
		sql, params := stmt(fence{tenant: tenant, key: key, token: token, now: s.now(ctx)})
		if s.sql.counted {
			tag, err := s.pool.Exec(ctx, sql, params.values()...)
			n = tag.RowsAffected()
			return err
		}
		return s.pool.QueryRow(ctx, sql, params.values()...).Scan(&n)
	})
	if err != nil {
		return s.interpret(ctx, op, err)
	}
	if n == 0 {
		return s.notHolder(ctx, op, tenant, key, token)
	}
	return nil
}

// notHolder builds the ErrNotHolder error for a fenced call that changed
// nothing. It reads the record only to tell the person what stands there
// instead; the read changes nothing, so its racing a concurrent change is
// harmless.
func (s *Store) notHolder(ctx context.Context, op, tenant, key string, token int64) error {
	var what string
	rec, err := s.lookup(ctx, tenant, key)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		what = "the key has no live record"
	case err != nil:
		what = "the record could not be read"
	case rec.State != store.StatePending:
		what = "the record is " + rec.State.String()
	default:
		what = fmt.Sprintf("the claim is held under token %d by %q", rec.Token, rec.Holder)
	}
	return fmt.Errorf("pgstore: %s %q in tenant %q with token %d: %w (%s)", op, key, tenant, token, store.ErrNotHolder, what)
}
