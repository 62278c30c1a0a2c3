package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tesserix/idempotency/internal/backoff"
	"github.com/tesserix/idempotency/store"
)

// The claim's paths: four ways a claim reaches the table, each a method of
// claimer below. A claim takes the first that applies and goes on to the
// next when one cannot settle it (as the paragraph after the table says);
// its answer is the same whichever it took.
//
//	path       what it is                      when it is taken                    what it runs
//	batched    the claims of many callers in   Options.Batch set, no Supersede,    batchClaimSQL, then batchReadSQL
//	           one round trip (claimBatch)     and every connection of the pool    (batch.go), as one implicit
//	                                           taken when the call arrives         transaction
//	fast       insert a free key, or read the  first, for every claim not batched  claimInsert, then claimRead, as
//	           row that stands (claimFast)     (a call a batch sent back too)      one implicit transaction
//	replacing  judge and take a standing row   the fast path read a row to take:   claim, one statement: the upsert
//	           in one statement (claimOnce)    expired, or pending under the       in a CTE that reads xmax and
//	                                           superseded token                    announces a replaced row
//	portable   replacing without xmax or       as replacing, when Capabilities     claimUpsert; claimRead when it
//	           NOTIFY (claimReplace)           lack Xmax or Notify                 returned nothing; then announce
//
// The statements are in sql.go but for the batch's. Whatever a path cannot
// settle goes to the next: a batch sends a claim it cannot answer (a row to
// take over, one deleted under its read) back to its caller, who claims on
// the fast path; the fast path hands a row to replace to the replacing
// statement (or, without its capabilities, the portable one). A claim whose
// answer was lost is undone by the one rule of undoClaim, whichever path
// sent it.

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
	c := claimer{s}
	if s.claims == nil || p.Supersede != 0 {
		return c.claim(ctx, p)
	}
	a, err := s.claims.Do(ctx, p, func(ctx context.Context, p store.ClaimParams) (claimAnswer, error) {
		res, err := c.claim(ctx, p)
		return claimAnswer{res: res}, err
	})
	switch {
	case err != nil && err == ctx.Err():
		return store.Result{}, s.interpret(ctx, op, err) // it gave up waiting for a batch
	case err != nil || !a.alone:
		return a.res, err
	}
	return c.claim(ctx, p)
}

// claimer is the store seen from its claim paths (the table above): its
// methods are the paths and what they share; it embeds the Store for the
// pool, the statements, the clock and the test hooks.
type claimer struct{ *Store }

// claim is Claim on its own: its own statements, not batched.
func (c claimer) claim(ctx context.Context, p store.ClaimParams) (store.Result, error) {
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
		if attempt > 1 && c.onRetry != nil {
			c.onRetry(attempt)
		}
		// PostgreSQL keeps microseconds; the fast claim builds the record
		// it inserted from these values, so they are what a read returns.
		now := c.now(ctx).Truncate(time.Microsecond)
		nc := c.newClaim(p, token, now)
		rec, acquired, err := c.claimOnce(ctx, nc, p.Supersede, fast)
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
				c.undoClaim(ctx, p.Tenant, p.Key, token, !fast && p.Supersede != 0)
			}
			return store.Result{}, c.interpret(ctx, op, err)
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

// claimOnce makes one attempt at the claim nc, superseding the token
// supersede (0: none): the fast claim, or the full statement that judges
// and replaces a standing row (the portable one without its capabilities).
func (c claimer) claimOnce(ctx context.Context, nc newClaim, supersede int64, fast bool) (store.Record, bool, error) {
	if fast {
		return c.claimFast(ctx, nc)
	}
	if c.onReplace != nil {
		c.onReplace()
	}
	if c.sql.claim == "" {
		return c.claimReplace(ctx, nc, supersede)
	}
	var (
		rec      store.Record
		acquired bool
		notified int64
	)
	row := c.pool.QueryRow(ctx, c.sql.claim, claimArgs{
		newClaim:  nc,
		supersede: supersede,
		notice:    c.notice(nc.tenant, nc.key),
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
// is the one it wrote, nc.
//
// It reports acquired when the insert took the key; otherwise rec is the
// row that stands, and pgx.ErrNoRows says none stands any more (it was
// deleted between the two statements), for the caller to run it again.
func (c claimer) claimFast(ctx context.Context, nc newClaim) (rec store.Record, acquired bool, err error) {
	b := &pgx.Batch{}
	b.Queue(c.sql.claimInsert, claimInsertArgs{nc}.params().values()...)
	b.Queue(c.sql.claimRead, claimReadArgs{tenant: nc.tenant, key: nc.key, ownToken: nc.token}.params().values()...)
	br := c.pool.SendBatch(ctx, b)
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
	return nc.record(), true, nil
}

// newClaim is the record a claim under token, made at now, writes.
func (c claimer) newClaim(p store.ClaimParams, token int64, now time.Time) newClaim {
	lease, expires := claimTimes(now, p.Lease, p.Retention, c.opts.TTL)
	check, retention := kept(p.Check, p.Retention)
	return newClaim{
		tenant: p.Tenant, key: p.Key, holder: p.Holder, token: token,
		leaseUntil: lease, expiresAt: expires, now: now,
		origin: p.Origin, check: check, retention: retention,
	}
}

// claimTimes returns the lease deadline and the expiry of a claim made at
// now: the retention window (the claim's own, else the store's TTL), never
// ending before the lease (a lease longer than the window), so the key is
// not free while its holder may be running.
func claimTimes(now time.Time, lease, retention, ttl time.Duration) (leaseUntil, expires time.Time) {
	leaseUntil, expires = now.Add(lease), now.Add(store.RetentionOr(keptRetention(retention), ttl))
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
func (c claimer) undoClaim(ctx context.Context, tenant, key string, token int64, takeover bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backoff.CleanupTimeout)
	defer cancel()
	var n int64
	if takeover {
		a := settleArgs{fence: fence{tenant: tenant, key: key, token: token, now: c.now(ctx)}, notice: c.notice(tenant, key)}
		_ = c.pool.QueryRow(ctx, c.sql.endLease, a.params().values()...).Scan(&n)
		return
	}
	a := cancelClaimArgs{tenant: tenant, key: key, token: token, notice: c.notice(tenant, key)}
	_ = c.pool.QueryRow(ctx, c.sql.cancelClaim, a.params().values()...).Scan(&n)
}

// claimReplace is the full claim without xmax: an upsert that takes the
// standing row when it has expired or is pending under the superseded
// token, and returns the record only when it wrote it. The token in what
// it returns tells the claim's outcome: this call's own, it took the key.
// When nothing comes back, a second statement (with a snapshot of its
// own, so it sees what the upsert's conflict found) reads what stands;
// pgx.ErrNoRows from it says nothing does any more, for the caller to run
// the claim again. A replacement is announced (with Notify) by a statement
// of its own, after the upsert committed: a waiter woken re-reads and
// finds the new claim.
func (c claimer) claimReplace(ctx context.Context, nc newClaim, supersede int64) (store.Record, bool, error) {
	var rec store.Record
	err := scanRecord(c.pool.QueryRow(ctx, c.sql.claimUpsert, claimArgs{
		newClaim:  nc,
		supersede: supersede,
		notice:    notice{silent: true},
	}.params().values()...), &rec)
	switch {
	case err == nil && rec.Token == nc.token:
		if c.sql.announce != "" {
			// Best effort: a lost announcement leaves the waiters of the
			// replaced record to their polling.
			_, _ = c.pool.Exec(ctx, c.sql.announce, c.notice(nc.tenant, nc.key).params().values()...)
		}
		return rec, true, nil
	case err == nil:
		// Not this call's token: what it returned stands, and is not ours.
		return rec, false, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return rec, false, err
	}
	rec = store.Record{}
	err = scanRecord(c.pool.QueryRow(ctx, c.sql.claimRead,
		claimReadArgs{tenant: nc.tenant, key: nc.key, ownToken: nc.token}.params().values()...), &rec)
	return rec, false, err
}

// claimBatch claims calls' keys in one round trip (batchClaimSQL and
// batchReadSQL) and answers each: acquired, the record that stands (a
// claim of the same batch's, when two of its calls name one key), or
// alone, for a row to take over or one deleted under the read. A batch
// whose statements failed before they ran sends every call alone; one
// whose answer was lost takes back every claim it may have made, as a
// claim alone does, and fails them.
func (c claimer) claimBatch(ctx context.Context, calls []*claimCall) {
	slices.SortFunc(calls, func(a, b *claimCall) int {
		return cmp.Or(cmp.Compare(a.Req.Tenant, b.Req.Tenant), cmp.Compare(a.Req.Key, b.Req.Key))
	})
	if c.onBatch != nil {
		c.onBatch(true, len(calls))
	}
	now := c.now(ctx).Truncate(time.Microsecond)
	claims := make([]newClaim, len(calls))
	var args batchClaimArgs
	args.now = now
	for i, call := range calls {
		claims[i] = c.newClaim(call.Req, store.NewToken(), now)
		args.add(claims[i])
	}
	inserted, standing, err := c.sendClaimBatch(ctx, args)
	if err != nil {
		lost := uncertain(ctx, err)
		for i, call := range calls {
			if !lost {
				c.claims.Answer(call, claimAnswer{alone: true}, nil)
				continue
			}
			c.undoClaim(ctx, call.Req.Tenant, call.Req.Key, claims[i].token, false)
			c.claims.Answer(call, claimAnswer{}, c.interpret(call.Ctx, "claim", err))
		}
		return
	}
	winner := make(map[[2]string]int, len(inserted))
	for i, nc := range claims {
		if _, ok := inserted[nc.token]; ok {
			winner[[2]string{nc.tenant, nc.key}] = i
		}
	}
	for i, call := range calls {
		k := [2]string{call.Req.Tenant, call.Req.Key}
		var a claimAnswer
		if w, ok := winner[k]; ok {
			rec := claims[w].record()
			if w == i {
				a.res = store.Result{Status: store.StatusAcquired, Record: rec}
			} else {
				a.res = store.ResultOf(rec, now)
			}
		} else if rec, ok := standing[k]; ok && !stale(rec, now, 0) {
			a.res = store.ResultOf(rec, now)
		} else {
			a.alone = true
		}
		if !c.claims.Answer(call, a, nil) && a.res.Status == store.StatusAcquired {
			// Its caller gave up while the batch was out: a claim nobody
			// will use is taken back.
			c.undoClaim(ctx, call.Req.Tenant, call.Req.Key, claims[i].token, false)
		}
	}
}

// sendClaimBatch sends a batch of claims and returns the tokens the insert
// wrote under and the rows that stood under other tokens.
func (c claimer) sendClaimBatch(ctx context.Context, args batchClaimArgs) (map[int64]struct{}, map[[2]string]store.Record, error) {
	b := &pgx.Batch{}
	b.Queue(c.sql.batchClaim, args.params().values()...)
	b.Queue(c.sql.batchRead, args.readParams().values()...)
	br := c.pool.SendBatch(ctx, b)
	inserted := make(map[int64]struct{}, len(args.tokens))
	standing := map[[2]string]store.Record{}
	rows, err := br.Query()
	if err == nil {
		var tok int64
		_, err = pgx.ForEachRow(rows, []any{&tok}, func() error {
			inserted[tok] = struct{}{}
			return nil
		})
	}
	if err == nil {
		rows, err = br.Query()
		for err == nil && rows.Next() {
			var rec store.Record
			if err = scanRecord(rows, &rec); err == nil {
				standing[[2]string{rec.Tenant, rec.Key}] = rec
			}
		}
		if err == nil {
			rows.Close()
			err = rows.Err()
		} else if rows != nil {
			rows.Close()
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return inserted, standing, err
}
