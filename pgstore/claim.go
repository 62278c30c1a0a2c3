package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tesserix/idempotency/internal/backoff"
	"github.com/tesserix/idempotency/store"
)

// Claim implements [store.Store.Claim] in one round trip in the common
// cases: a fresh key is inserted, or the row that stands is read (see
// claimFast). A standing row that must be replaced (expired, or pending
// under the superseded token) is taken by the full claim statement, which
// judges and replaces it in one server-side statement (see sql.go).
//
// Under READ COMMITTED, the full statement's read of the existing row uses
// the snapshot the statement started with, while ON CONFLICT decides
// against the latest committed row. A row committed by a concurrent claim
// after that snapshot therefore blocks the insert yet is invisible to the
// read, and the statement returns nothing; likewise the read may show an
// older version of the row (one that had expired, or was pending under
// the superseded token) that the conflict arm has just judged differently.
// The fast claim can find no row when one was deleted between its two
// statements. All are detected and the claim is run again at once, with a
// new snapshot, a bounded number of times. No decision is ever made from a
// stale read.
//
// When the caller's context ends, or the connection breaks, while the
// statement is in flight, the claim may have committed without the caller
// learning its token; Claim then undoes the claim it may have made (by
// that token, which only it knows) before returning the error, and the
// undo removes only what that claim created (see undoClaim).
func (s *Store) Claim(ctx context.Context, p store.ClaimParams) (store.Result, error) {
	const op = "claim"
	if err := begin(ctx, op, p); err != nil {
		return store.Result{}, err
	}
	if err := s.requireSynchronous(ctx); err != nil {
		return store.Result{}, err
	}
	if s.claims == nil || p.Supersede != 0 {
		return s.claim(ctx, p)
	}
	a, err := s.claims.Do(ctx, p, func(ctx context.Context, p store.ClaimParams) (claimAnswer, error) {
		res, err := s.claim(ctx, p)
		return claimAnswer{res: res}, err
	})
	switch {
	case err != nil && err == ctx.Err():
		return store.Result{}, s.interpret(ctx, op, err) // it gave up waiting for a batch
	case err != nil || !a.alone:
		return a.res, err
	}
	return s.claim(ctx, p)
}

// claim is Claim on its own: its own statements, not batched.
func (s *Store) claim(ctx context.Context, p store.ClaimParams) (store.Result, error) {
	const op = "claim"
	token := store.NewToken()
	for token == p.Supersede {
		token = store.NewToken()
	}
	// The fast claim first: it inserts a fresh key or reads the one
	// standing. Only a standing row that must be replaced (expired, or
	// pending under the superseded token) takes the full statement.
	fast := true
	for attempt := 1; ; attempt++ {
		if attempt > 1 && s.onRetry != nil {
			s.onRetry(attempt)
		}
		// PostgreSQL keeps microseconds; the fast claim builds the record
		// it inserted from these values, so they are what a read returns.
		now := s.now(ctx).Truncate(time.Microsecond)
		rec, acquired, err := s.claimOnce(ctx, p, token, now, fast)
		if fast && err == nil && !acquired && stale(rec, now, p.Supersede) {
			// A row to replace: the full statement judges and takes it.
			fast = false
			attempt--
			continue
		}
		switch {
		case err == nil && acquired:
			return store.Result{Status: store.StatusAcquired, Record: rec}, nil
		case err == nil && !stale(rec, now, p.Supersede):
			return store.ResultOf(rec, now), nil
		case err == nil, errors.Is(err, pgx.ErrNoRows):
			// A stale snapshot, or a row deleted under the fast claim:
			// the change has committed by now, so a new statement, with a
			// new snapshot, sees it. Run it again at once: nothing is
			// waited for that a pause would let finish.
			if attempt == maxAttempts {
				return store.Result{}, keptChanging(p)
			}
			continue
		case !retryable(err):
			if uncertain(ctx, err) {
				// Only the statement that replaces a standing row can
				// have taken a key over; the fast claim inserts into a
				// free key or changes nothing.
				s.undoClaim(ctx, p.Tenant, p.Key, token, !fast && p.Supersede != 0)
			}
			return store.Result{}, s.interpret(ctx, op, err)
		}
		// A transient conflict: run it again after a pause.
		if attempt == maxAttempts {
			return store.Result{}, keptChanging(p)
		}
		if err := pause(ctx, attempt); err != nil {
			return store.Result{}, fmt.Errorf("pgstore: %s: %w", op, err)
		}
	}
}

// claimOnce makes one attempt at the claim: the fast claim, or the full
// statement that judges and replaces a standing row.
func (s *Store) claimOnce(ctx context.Context, p store.ClaimParams, token int64, now time.Time, fast bool) (store.Record, bool, error) {
	if fast {
		return s.claimFast(ctx, p, token, now)
	}
	if s.onReplace != nil {
		s.onReplace()
	}
	if s.sql.claim == "" {
		return s.claimReplace(ctx, p, token, now)
	}
	var (
		rec      store.Record
		acquired bool
		notified int64
	)
	row := s.pool.QueryRow(ctx, s.sql.claim, claimArgs{
		newClaim:  s.newClaim(p, token, now),
		supersede: p.Supersede,
		notice:    s.notice(p.Tenant, p.Key),
	}.params().values()...)
	err := scanRecord(row, &rec, &acquired, &notified)
	return rec, acquired, err
}

// keptChanging is the error of a claim whose key changed under every one
// of its attempts.
func keptChanging(p store.ClaimParams) error {
	return store.Unavailable("pgstore: claim",
		fmt.Errorf("key %q in tenant %q kept changing under %d attempts", p.Key, p.Tenant, maxAttempts))
}

// claimFast is the claim of the common cases, in one round trip: a batch
// of two statements that PostgreSQL runs as one implicit transaction. The
// first inserts the key unless a row stands (ON CONFLICT DO NOTHING); the
// second reads the row that stands, unless it is the one just inserted.
// Under READ COMMITTED each statement of a transaction takes its own
// snapshot, so when the insert had to wait for a concurrent claim of the
// same key to commit, the read, which starts after that wait, sees the row
// that claim committed. (Read in the same statement, through a CTE, it
// would not: the snapshot predates the wait.) A key that stands is read,
// not locked, so a duplicate's claim writes nothing and commits without a
// WAL flush. A claim that inserts learns nothing from the read: the record
// is the one it wrote, built here from the values it sent.
//
// It reports acquired when the insert took the key; otherwise rec is the
// row that stands, and pgx.ErrNoRows says none stands any more (it was
// deleted between the two statements), for the caller to run it again.
func (s *Store) claimFast(ctx context.Context, p store.ClaimParams, token int64, now time.Time) (rec store.Record, acquired bool, err error) {
	c := s.newClaim(p, token, now)
	b := &pgx.Batch{}
	b.Queue(s.sql.claimInsert, claimInsertArgs{c}.params().values()...)
	b.Queue(s.sql.claimRead, claimReadArgs{tenant: p.Tenant, key: p.Key, ownToken: token}.params().values()...)
	br := s.pool.SendBatch(ctx, b)
	tag, err := br.Exec()
	if err == nil {
		acquired = tag.RowsAffected() == 1
		if !acquired {
			err = scanRecord(br.QueryRow(), &rec)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil || !acquired {
		return rec, false, err
	}
	return store.Record{
		Tenant: p.Tenant, Key: p.Key, State: store.StatePending, Holder: p.Holder, Token: token,
		LeaseUntil: c.leaseUntil, ExpiresAt: c.expiresAt, CreatedAt: now, UpdatedAt: now, Origin: p.Origin,
		Check: p.Check, Retention: keptRetention(p.Retention),
	}, true, nil
}

// newClaim is the record a claim under token, made at now, writes.
func (s *Store) newClaim(p store.ClaimParams, token int64, now time.Time) newClaim {
	lease, expires := s.claimTimes(now, p.Lease, p.Retention)
	check, retention := kept(p.Check, p.Retention)
	return newClaim{
		tenant: p.Tenant, key: p.Key, holder: p.Holder, token: token,
		leaseUntil: lease, expiresAt: expires, now: now,
		origin: p.Origin, check: check, retention: retention,
	}
}

// claimTimes returns the lease deadline and the expiry of a claim made at
// now: the retention window (the claim's own, else the TTL), never ending
// before the lease (a lease longer than the window), so the key is not
// free while its holder may be running.
func (s *Store) claimTimes(now time.Time, lease, retention time.Duration) (leaseUntil, expires time.Time) {
	leaseUntil, expires = now.Add(lease), now.Add(store.RetentionOr(keptRetention(retention), s.opts.TTL))
	if expires.Before(leaseUntil) {
		expires = leaseUntil
	}
	return leaseUntil, expires
}

// stale reports whether a row the claim statement read but did not take
// cannot be the row its conflict arm judged: one the arm would have taken.
func stale(rec store.Record, now time.Time, supersede int64) bool {
	if !now.Before(rec.ExpiresAt) {
		return true
	}
	return supersede != 0 && rec.State == store.StatePending && rec.Token == supersede
}

// uncertain reports whether a failed statement may have committed without
// its answer reaching the caller: the caller's context ended while it was
// in flight, or the connection failed after it was sent. A server error
// means the implicit transaction was rolled back; an error pgx marks safe
// to retry means nothing was sent.
func uncertain(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	var pgErr *pgconn.PgError
	return !errors.As(err, &pgErr) && !pgconn.SafeToRetry(err)
}

// undoClaim undoes the claim made under token, if it was made, after its
// answer was lost. The token is the one this call generated, so the undo
// can only touch the claim this call made, and it removes only what that
// claim created (the rule of store.Store.Claim):
//
//   - a claim of a free key (or of an expired row) is deleted;
//   - a takeover, which may have replaced a lost holder's pending record,
//     is left standing, pending, with its lease ended now by the store's
//     clock, so the next claimer finds the key held by a holder presumed
//     gone, as it would have found the record it replaced. Deleting it
//     would free a key whose effect may have landed.
//
// takeover is set when the statement in flight was the one that replaces
// rows and the claim superseded a token. It is conservative: that
// statement may instead have replaced an expired row (the key was free),
// and then the next EFFECTFUL claimer ends indeterminate where the key was
// free — a person asked needlessly, never an effect run twice. The store
// package's documentation says why the lease is ended rather than the
// superseded record restored.
//
// It is best effort: when it fails too, the claim stays as it landed until
// its lease runs out, which frees nothing either.
func (s *Store) undoClaim(ctx context.Context, tenant, key string, token int64, takeover bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backoff.CleanupTimeout)
	defer cancel()
	var n int64
	if takeover {
		a := settleArgs{fence: fence{tenant: tenant, key: key, token: token, now: s.now(ctx)}, notice: s.notice(tenant, key)}
		_ = s.pool.QueryRow(ctx, s.sql.endLease, a.params().values()...).Scan(&n)
		return
	}
	a := cancelClaimArgs{tenant: tenant, key: key, token: token, notice: s.notice(tenant, key)}
	_ = s.pool.QueryRow(ctx, s.sql.cancelClaim, a.params().values()...).Scan(&n)
}
