package pgstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/internal/coalesce"
	"github.com/tesserix/idempotency/store"
)

// Batching: with Options.Batch, the claims and completions this Store is
// asked for at the same moment share round trips (internal/coalesce). A
// call that finds a connection of the pool free goes at once, alone, on
// the statements every other call uses. Calls that arrive while every
// connection is taken wait, and the next of the store's claims (or
// completions) to return takes them all as one batch: one multi-row
// statement and one commit where each would have had its own. Only the
// common cases are batched — a claim of a key that is free or held, a
// completion by the holder — and a batch answers each call exactly as the
// call alone would have: whatever it cannot settle (a standing row to take
// over, a completion that changed nothing, a statement that failed before
// running) goes back to its caller, who runs it alone. The batch of claims
// is one of the claim's paths: claimBatch, in claim.go; this file holds
// its statements and parameters, and the batch of completions.

// batchClaimSQL and batchReadSQL are a batch of claims, sent together as
// one implicit transaction like claimInsert and claimRead: the first
// inserts every free key (the rows in the order of the arrays, which a
// batch sorts, so that two batches never wait on each other's keys in
// opposite orders) and returns the tokens it inserted under; the second,
// which runs after any wait of the first, reads the rows that stand under
// tokens not of this batch. Parameters: batchClaimArgs.
const (
	batchClaimSQL = `INSERT INTO {t} (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason,
	origin_workflow_id, origin_run_id, origin_activity_type, origin_activity_id, origin_attempt, check_digest, retention_us)
SELECT c.tenant, c.key, {pending}, c.holder, c.token, c.lease_until, c.expires_at, @now, @now, NULL, '',
	c.owf, c.orun, c.otype, c.oid, c.oattempt, c.check_digest, c.retention_us
FROM unnest(@tenants::text[], @keys::text[], @holders::text[], @tokens::bigint[], @lease_untils::timestamptz[],
	@expires_ats::timestamptz[], @owfs::text[], @oruns::text[], @otypes::text[], @oids::text[], @oattempts::integer[],
	@checks::text[], @retentions::bigint[])
	AS c(tenant, key, holder, token, lease_until, expires_at, owf, orun, otype, oid, oattempt, check_digest, retention_us)
ON CONFLICT (tenant, key) DO NOTHING
RETURNING token`
	batchReadSQL = `SELECT {cols} FROM {t}
WHERE (tenant, key) IN (SELECT * FROM unnest(@tenants::text[], @keys::text[])) AND token <> ALL (@tokens::bigint[])`
	// batchCompleteSQL completes every row still pending under its token,
	// as complete does one, and returns the tokens it completed. A
	// watched row's waiters are woken ({batch_notify}: the count of
	// notifications, or of rows without Capabilities.Notify).
	// Parameters: batchCompleteArgs.
	batchCompleteSQL = `WITH c AS (
	SELECT * FROM unnest(@tenants::text[], @keys::text[], @tokens::bigint[], @outcomes::bytea[], @payloads::text[])
		AS c(tenant, key, token, outcome, payload)
), upd AS (
	UPDATE {t} AS r SET state = {completed}, outcome = c.outcome, updated_at = @now, expires_at = {batch_window}
	FROM c
	WHERE r.tenant = c.tenant AND r.key = c.key AND r.token = c.token AND r.state = {pending} AND r.expires_at > @now
	RETURNING r.token, r.watched, c.payload
)
SELECT token, {batch_notify} FROM upd GROUP BY token`
)

// batchNotify is the last column of batchCompleteSQL's answer: it wakes
// the waiters of each watched row it completed, and counts them (without
// Capabilities.Notify it counts the rows).
func batchNotify(caps Capabilities) string {
	if !caps.Notify {
		return "count(*)"
	}
	return "count(CASE WHEN watched THEN pg_notify(@channel, payload) END)"
}

// busy reports whether a call on pool starts the group sending together
// (see internal/coalesce): when it would wait for a connection of the
// pool (none is idle and the pool may open no more). Batching while
// connections are free was measured to cost throughput at moderate
// concurrency (0.5–0.75× the floor at 8 callers on 16 connections,
// docs/BENCHMARKS.md): PostgreSQL's group commit already shares one WAL
// flush among concurrent commits, and a batch makes its later calls wait
// for the one before.
func busy(pool *pgxpool.Pool) bool {
	st := pool.Stat()
	return st.IdleConns() == 0 && st.TotalConns() >= st.MaxConns()
}

// batchMaxCalls bounds the calls one batch holds.
const batchMaxCalls = 128

// batchClaimArgs are the parameters of batchClaimSQL: one array per
// column, a claim an element.
type batchClaimArgs struct {
	now                       time.Time
	tenants, keys, holders    []string
	tokens                    []int64
	leaseUntils, expiresAts   []time.Time
	owfs, oruns, otypes, oids []string
	oattempts                 []int32
	checks                    []*string
	retentions                []*int64
}

func (a batchClaimArgs) params() paramList {
	return paramList{
		{"now", a.now}, {"tenants", a.tenants}, {"keys", a.keys}, {"holders", a.holders}, {"tokens", a.tokens},
		{"lease_untils", a.leaseUntils}, {"expires_ats", a.expiresAts}, {"owfs", a.owfs}, {"oruns", a.oruns},
		{"otypes", a.otypes}, {"oids", a.oids}, {"oattempts", a.oattempts}, {"checks", a.checks}, {"retentions", a.retentions},
	}
}

// readParams are batchReadSQL's parameters.
func (a batchClaimArgs) readParams() paramList {
	return paramList{{"tenants", a.tenants}, {"keys", a.keys}, {"tokens", a.tokens}}
}

// add appends claim c to the arrays.
func (a *batchClaimArgs) add(c newClaim) {
	a.tenants = append(a.tenants, c.tenant)
	a.keys = append(a.keys, c.key)
	a.holders = append(a.holders, c.holder)
	a.tokens = append(a.tokens, c.token)
	a.leaseUntils = append(a.leaseUntils, c.leaseUntil)
	a.expiresAts = append(a.expiresAts, c.expiresAt)
	a.owfs = append(a.owfs, c.origin.WorkflowID)
	a.oruns = append(a.oruns, c.origin.RunID)
	a.otypes = append(a.otypes, c.origin.ActivityType)
	a.oids = append(a.oids, c.origin.ActivityID)
	a.oattempts = append(a.oattempts, int32(c.origin.Attempt))
	a.checks = append(a.checks, c.check)
	a.retentions = append(a.retentions, c.retention)
}

// batchCompleteArgs are the parameters of batchCompleteSQL.
type batchCompleteArgs struct {
	now, expiresAt time.Time
	tenants, keys  []string
	tokens         []int64
	outcomes       [][]byte
	payloads       []string
	notice         // the channel; silent without Capabilities.Notify
}

func (a batchCompleteArgs) params() paramList {
	l := paramList{
		{"now", a.now}, {"expires_at", a.expiresAt}, {"tenants", a.tenants}, {"keys", a.keys},
		{"tokens", a.tokens}, {"outcomes", a.outcomes}, {"payloads", a.payloads},
	}
	if !a.silent {
		l = append(l, param{"channel", a.channel})
	}
	return l
}

// claimAnswer is what a batch tells a claim: its result, or (alone) that
// the caller must claim on its own.
type claimAnswer struct {
	res   store.Result
	alone bool
}

// claimCall and completeCall are calls in a batch.
type (
	claimCall    = coalesce.Call[store.ClaimParams, claimAnswer]
	completeCall = coalesce.Call[store.CompleteParams, bool]
)

// completeBatch completes calls' records in one statement
// (batchCompleteSQL) and answers each: done (true), or not (false: the
// caller completes alone, which finds why nothing changed). A batch whose
// statement failed before it ran sends every call alone; one whose answer
// was lost fails them, as a completion alone does: it may have landed.
func (s *Store) completeBatch(ctx context.Context, calls []*completeCall) {
	slices.SortFunc(calls, func(a, b *completeCall) int {
		return cmp.Or(cmp.Compare(a.Req.Tenant, b.Req.Tenant), cmp.Compare(a.Req.Key, b.Req.Key))
	})
	if s.onBatch != nil {
		s.onBatch(false, len(calls))
	}
	now := s.now(ctx)
	args := batchCompleteArgs{now: now, expiresAt: now.Add(s.opts.TTL), notice: s.notice("", "")}
	for _, c := range calls {
		outcome := c.Req.Outcome
		if outcome == nil {
			outcome = []byte{}
		}
		args.tenants = append(args.tenants, c.Req.Tenant)
		args.keys = append(args.keys, c.Req.Key)
		args.tokens = append(args.tokens, c.Req.Token)
		args.outcomes = append(args.outcomes, outcome)
		args.payloads = append(args.payloads, payloadFor(c.Req.Tenant, c.Req.Key))
	}
	done := make(map[int64]int, len(calls))
	rows, err := s.pool.Query(ctx, s.sql.batchComplete, args.params().values()...)
	if err == nil {
		var tok, n int64
		_, err = pgx.ForEachRow(rows, []any{&tok, &n}, func() error {
			done[tok]++
			return nil
		})
	}
	if err != nil {
		lost := uncertain(ctx, err)
		for _, c := range calls {
			if lost {
				s.completes.Answer(c, false, s.interpret(c.Ctx, "complete", err))
			} else {
				s.completes.Answer(c, false, nil)
			}
		}
		return
	}
	for _, c := range calls {
		// A token completes one record: a second call with it in the
		// batch goes alone, and learns, as it would have, that the record
		// is completed already.
		ok := done[c.Req.Token] > 0
		if ok {
			done[c.Req.Token]--
		}
		s.completes.Answer(c, ok, nil)
	}
}
