package pgstore

import (
	"strings"

	"github.com/tesserix/idempotency/store"
)

// The state column holds store.State's numeric values, which the SQL below
// spells as literals: 1 pending, 2 completed, 3 indeterminate. These lines
// stop compiling if the contract's values ever change.
var (
	_ = [1]struct{}{}[store.StatePending-1]
	_ = [1]struct{}{}[store.StateCompleted-2]
	_ = [1]struct{}{}[store.StateIndeterminate-3]
)

// columns is the order every statement returns a record's columns in; see
// scanRecord.
const columns = "tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason, " +
	"origin_workflow_id, origin_run_id, origin_activity_type, origin_activity_id, origin_attempt, " +
	"resolution_action, resolved_by, resolution_reason, resolution_reference, resolved_at, check_digest, retention_us"

// addedColumns are the columns a table made by an earlier version may lack,
// with their definitions; EnsureSchema adds those missing.
var addedColumns = []struct{ name, def string }{
	{"watched", "boolean NOT NULL DEFAULT false"},
	{"origin_workflow_id", "text NOT NULL DEFAULT ''"},
	{"origin_run_id", "text NOT NULL DEFAULT ''"},
	{"origin_activity_type", "text NOT NULL DEFAULT ''"},
	{"origin_activity_id", "text NOT NULL DEFAULT ''"},
	{"origin_attempt", "integer NOT NULL DEFAULT 0"},
	{"resolution_action", "smallint NOT NULL DEFAULT 0"},
	{"resolved_by", "text NOT NULL DEFAULT ''"},
	{"resolution_reason", "text NOT NULL DEFAULT ''"},
	{"resolution_reference", "text NOT NULL DEFAULT ''"},
	{"resolved_at", "timestamptz"},
	// Since r2: the digest of the checked arguments and the record's own
	// retention window (microseconds), both NULL for records without.
	{"check_digest", "text"},
	{"retention_us", "bigint"},
}

// statements holds the SQL of one store, with its table's name quoted in.
// Every value a caller supplies is a bind parameter; only the validated,
// quoted identifiers are spliced into the text.
type statements struct {
	createTable, createIndex, addColumn string
	createListIndex                     string
	watch                               string

	claim, claimInsert, claimRead, lookup       string
	renew, complete, release, markIndeterminate string
	completeTx, completeTxGuarded               string
	resolveComplete, resolveFree, forget, sweep string
	resolveGone                                 string
	cancelClaim, endLease                       string
}

// completeTxSQL is completeTx's statement, with more CTEs after its update.
func completeTxSQL(more string) string {
	return `WITH upd AS (
	UPDATE {t} SET state = 2, outcome = $6, updated_at = $4, expires_at = ` + window("$4", "$5") + `
	WHERE tenant = $1 AND key = $2 AND token = $3 AND state = 1 AND expires_at > $4
	RETURNING watched
)` + more + `
SELECT CASE
	WHEN current_setting('` + markSetting + `', true) IS DISTINCT FROM $9::text
		THEN ('` + txEndedMarker + ` (' || count(*) || ' rows)')::bigint
	WHEN count(*) = 1 THEN 1 + 0 * count(CASE WHEN watched THEN pg_notify($7, $8) END)
		+ 0 * length(set_config('` + commitSetting + `', $9::text, true))
	ELSE ('` + fenceMarker + ` (' || count(*) || ' rows)')::bigint END FROM upd`
}

func buildStatements(table, index, listIndex, guard string) statements {
	r := strings.NewReplacer("{t}", table, "{i}", index, "{li}", listIndex, "{g}", guard, "{cols}", columns)
	return statements{
		createTable: r.Replace(`CREATE TABLE IF NOT EXISTS {t} (
	tenant      text        NOT NULL,
	key         text        NOT NULL,
	state       smallint    NOT NULL CHECK (state IN (1, 2, 3)),
	holder      text        NOT NULL,
	token       bigint      NOT NULL,
	lease_until timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL,
	created_at  timestamptz NOT NULL,
	updated_at  timestamptz NOT NULL,
	outcome     bytea,
	reason      text        NOT NULL DEFAULT '',
	watched     boolean     NOT NULL DEFAULT false,
	origin_workflow_id   text    NOT NULL DEFAULT '',
	origin_run_id        text    NOT NULL DEFAULT '',
	origin_activity_type text    NOT NULL DEFAULT '',
	origin_activity_id   text    NOT NULL DEFAULT '',
	origin_attempt       integer NOT NULL DEFAULT 0,
	resolution_action    smallint NOT NULL DEFAULT 0,
	resolved_by          text    NOT NULL DEFAULT '',
	resolution_reason    text    NOT NULL DEFAULT '',
	resolution_reference text    NOT NULL DEFAULT '',
	resolved_at          timestamptz,
	check_digest         text,
	retention_us         bigint,
	PRIMARY KEY (tenant, key)
)`),
		// addColumn brings a table made by an earlier version up to date,
		// one column at a time; PostgreSQL 11 and later add a column with a
		// constant default without rewriting rows. %s: name and definition.
		addColumn:   r.Replace(`ALTER TABLE {t} ADD COLUMN IF NOT EXISTS %s %s`),
		createIndex: r.Replace(`CREATE INDEX IF NOT EXISTS {i} ON {t} (expires_at)`),
		// createListIndex serves the listings of what waits in a tenant
		// (pending, stale, indeterminate), newest or oldest first. It is
		// partial: completed records, the bulk of a table, are not in it,
		// and a completion writes no entry.
		createListIndex: r.Replace(`CREATE INDEX IF NOT EXISTS {li} ON {t} (tenant, created_at, key COLLATE "C") WHERE state <> 2`),

		// claim takes the key in one statement. The INSERT's ON CONFLICT
		// arm replaces the row only when it has expired ($7 is now) or is
		// pending under exactly the superseded token $8 (0, the "no
		// supersede" value, is never a token). A replaced row (xmax <> 0:
		// the tuple came from an UPDATE, not an INSERT) may have waiters on
		// its old token, so it is announced. When the arm does not fire,
		// the second branch returns the row as it stands, in the same round
		// trip. See Store.Claim for why that branch can come back empty or
		// stale under READ COMMITTED.
		//
		// $1 tenant, $2 key, $3 holder, $4 token, $5 lease_until,
		// $6 expires_at, $7 now, $8 supersede, $9 channel, $10 payload,
		// $11–$15 the origin, $16 check digest, $17 retention (µs), both
		// NULL for none.
		claim: r.Replace(`WITH ins AS (
	INSERT INTO {t} AS r (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason,
		origin_workflow_id, origin_run_id, origin_activity_type, origin_activity_id, origin_attempt, check_digest, retention_us)
	VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $7, NULL, '', $11, $12, $13, $14, $15, $16, $17)
	ON CONFLICT (tenant, key) DO UPDATE SET
		state = 1, holder = EXCLUDED.holder, token = EXCLUDED.token,
		lease_until = EXCLUDED.lease_until, expires_at = EXCLUDED.expires_at,
		created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,
		outcome = NULL, reason = '', watched = false,
		origin_workflow_id = EXCLUDED.origin_workflow_id, origin_run_id = EXCLUDED.origin_run_id,
		origin_activity_type = EXCLUDED.origin_activity_type, origin_activity_id = EXCLUDED.origin_activity_id,
		origin_attempt = EXCLUDED.origin_attempt,
		resolution_action = 0, resolved_by = '', resolution_reason = '', resolution_reference = '', resolved_at = NULL,
		check_digest = EXCLUDED.check_digest, retention_us = EXCLUDED.retention_us
	WHERE r.expires_at <= $7 OR (r.state = 1 AND r.token = $8)
	RETURNING r.tenant, r.key, r.state, r.holder, r.token, r.lease_until, r.expires_at,
		r.created_at, r.updated_at, r.outcome, r.reason, r.origin_workflow_id, r.origin_run_id,
		r.origin_activity_type, r.origin_activity_id, r.origin_attempt, r.resolution_action, r.resolved_by,
		r.resolution_reason, r.resolution_reference, r.resolved_at, r.check_digest, r.retention_us,
		r.xmax::text <> '0' AS replaced
)
SELECT true AS acquired, {cols},
	CASE WHEN replaced THEN (SELECT count(pg_notify($9, $10))) ELSE 0 END AS notified
FROM ins
UNION ALL
SELECT false, {cols}, 0
FROM {t}
WHERE tenant = $1 AND key = $2 AND NOT EXISTS (SELECT 1 FROM ins)`),

		// claimInsert and claimRead are the claim of the common cases,
		// sent together as one batch (see Store.claimFast): a fresh key is
		// inserted; a key that stands is left alone and read. Only when the
		// standing row is expired, or pending under the superseded token,
		// does Store.Claim go on to the claim statement above, which
		// replaces it.
		//
		// $1 tenant, $2 key, $3 holder, $4 token, $5 lease_until,
		// $6 expires_at, $7 now, $8–$12 the origin, $13 check digest,
		// $14 retention (µs).
		claimInsert: r.Replace(`INSERT INTO {t} (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason,
	origin_workflow_id, origin_run_id, origin_activity_type, origin_activity_id, origin_attempt, check_digest, retention_us)
VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $7, NULL, '', $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (tenant, key) DO NOTHING`),
		// $1 tenant, $2 key, $3 the claim's own token: its own row, when it
		// inserted one, is not read back.
		claimRead: r.Replace(`SELECT {cols} FROM {t} WHERE tenant = $1 AND key = $2 AND token <> $3`),

		// $1 tenant, $2 key, $3 now.
		lookup: r.Replace(`SELECT {cols} FROM {t} WHERE tenant = $1 AND key = $2 AND expires_at > $3`),
		// watch is a waiter's first read: it marks the record watched, so
		// the statement that settles it announces the change, and returns it.
		// The row lock orders it with that statement: either the waiter
		// reads the settled record, or the settling statement sees the mark.
		//
		// $1 tenant, $2 key, $3 now.
		watch: r.Replace(`UPDATE {t} SET watched = true WHERE tenant = $1 AND key = $2 AND expires_at > $3
RETURNING {cols}`),

		// The fenced statements change the row only while it is live and
		// pending under the caller's token, and report how many rows
		// changed. Complete, Release and MarkIndeterminate announce the
		// change in the same statement, so the announcement leaves at the
		// change's commit, but only when a waiter marked the record
		// watched: a NOTIFY takes a database-wide lock at commit, which
		// would serialise every settlement nobody waits for.
		//
		// $1 tenant, $2 key, $3 token, $4 now, $5 lease_until, $6 now+TTL.
		// A renewal restarts the retention window (the record's own, when
		// it keeps one: see {window}), so a live holder's record never
		// expires under it.
		renew: r.Replace(`UPDATE {t} SET lease_until = $5, updated_at = $4,
	expires_at = greatest(` + window("$4", "$6") + `, $5::timestamptz)
WHERE tenant = $1 AND key = $2 AND token = $3 AND state = 1 AND expires_at > $4
RETURNING lease_until`),
		// $1 tenant, $2 key, $3 token, $4 now, $5 now+TTL, $6 outcome,
		// $7 channel, $8 payload.
		complete: r.Replace(`WITH upd AS (
	UPDATE {t} SET state = 2, outcome = $6, updated_at = $4, expires_at = ` + window("$4", "$5") + `
	WHERE tenant = $1 AND key = $2 AND token = $3 AND state = 1 AND expires_at > $4
	RETURNING watched
)
SELECT count(*) + 0 * count(CASE WHEN watched THEN pg_notify($7, $8) END) FROM upd`),
		// completeTx is complete run inside a transactional body's
		// transaction (Store.BeginTransaction). The fence is the server's:
		// when no row changed, the statement fails (the text cast below
		// cannot succeed), which aborts the transaction, so no COMMIT can
		// land the body's writes without the completed record. The failing
		// expression depends on the aggregate, so the planner cannot fold
		// it into an error raised on every call. The parameters are
		// complete's.
		//
		// It runs only in the transaction that began (its mark, $9, is
		// the transaction-local setting BEGIN set: a body that ended its
		// transaction with ROLLBACK AND CHAIN runs it in a chained one,
		// which has lost it), and approves the COMMIT that follows it for
		// the commit guard (txguard.go): it sets the commit setting to the
		// mark and, in completeTxGuarded, deletes the guard's row.
		completeTx:        r.Replace(completeTxSQL("")),
		completeTxGuarded: r.Replace(completeTxSQL(", unguard AS (\n\tDELETE FROM {g} WHERE mark = $9::text\n)")),
		// $1 tenant, $2 key, $3 token, $4 now, $5 channel, $6 payload.
		release: r.Replace(`WITH del AS (
	DELETE FROM {t}
	WHERE tenant = $1 AND key = $2 AND token = $3 AND state = 1 AND expires_at > $4
	RETURNING watched
)
SELECT count(*) + 0 * count(CASE WHEN watched THEN pg_notify($5, $6) END) FROM del`),
		// $1 tenant, $2 key, $3 token, $4 now, $5 expires_at, $6 reason,
		// $7 channel, $8 payload.
		markIndeterminate: r.Replace(`WITH upd AS (
	UPDATE {t} SET state = 3, reason = $6, updated_at = $4, expires_at = $5
	WHERE tenant = $1 AND key = $2 AND token = $3 AND state = 1 AND expires_at > $4
	RETURNING watched
)
SELECT count(*) + 0 * count(CASE WHEN watched THEN pg_notify($7, $8) END) FROM upd`),
		// The resolutions change the row only while it is live and
		// indeterminate — or, with the stale flag, pending with its lease
		// run out at now (ResolveParams.Stale, which always carries a
		// token) — and, when the fence $token is not 0, claimed under
		// exactly that token: the check and the change are one statement.
		//
		// $1 tenant, $2 key, $3 now, $4 now+TTL, $5 outcome, $6 channel,
		// $7 payload, $8 token (0: unfenced), $9 action, $10 by, $11 reason,
		// $12 reference, $13 stale.
		resolveComplete: r.Replace(`WITH upd AS (
	UPDATE {t} SET state = 2, outcome = $5, updated_at = $3, expires_at = ` + window("$3", "$4") + `,
		resolution_action = $9, resolved_by = $10, resolution_reason = $11, resolution_reference = $12, resolved_at = $3
	WHERE tenant = $1 AND key = $2 AND expires_at > $3 AND ($8::bigint = 0 OR token = $8::bigint)
		AND (state = 3 OR ($13::boolean AND state = 1 AND lease_until <= $3))
	RETURNING 1
)
SELECT count(pg_notify($6, $7)) FROM upd`),
		// $1 tenant, $2 key, $3 now, $4 channel, $5 payload, $6 token (0:
		// unfenced), $7 stale.
		resolveFree: r.Replace(`WITH del AS (
	DELETE FROM {t} WHERE tenant = $1 AND key = $2 AND expires_at > $3 AND ($6::bigint = 0 OR token = $6::bigint)
		AND (state = 3 OR ($7::boolean AND state = 1 AND lease_until <= $3))
	RETURNING 1
)
SELECT count(pg_notify($4, $5)) FROM del`),
		// resolveGone records a person's outcome under a key that has no
		// live record (ResolveParams.RecordIfGone): a completed record,
		// inserted, or replacing an expired row. A live row is left alone
		// and nothing is returned. A replaced row may have waiters, so it is
		// announced.
		//
		// $1 tenant, $2 key, $3 holder, $4 token, $5 now, $6 expires_at,
		// $7 outcome, $8 action, $9 by, $10 reason, $11 reference,
		// $12 channel, $13 payload, $14 check digest, $15 retention (µs).
		resolveGone: r.Replace(`WITH ins AS (
	INSERT INTO {t} AS r (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason,
		resolution_action, resolved_by, resolution_reason, resolution_reference, resolved_at, check_digest, retention_us)
	VALUES ($1, $2, 2, $3, $4, $5, $6, $5, $5, $7, '', $8, $9, $10, $11, $5, $14, $15)
	ON CONFLICT (tenant, key) DO UPDATE SET
		state = 2, holder = EXCLUDED.holder, token = EXCLUDED.token,
		lease_until = EXCLUDED.lease_until, expires_at = EXCLUDED.expires_at,
		created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,
		outcome = EXCLUDED.outcome, reason = '', watched = false,
		origin_workflow_id = '', origin_run_id = '', origin_activity_type = '', origin_activity_id = '', origin_attempt = 0,
		resolution_action = EXCLUDED.resolution_action, resolved_by = EXCLUDED.resolved_by,
		resolution_reason = EXCLUDED.resolution_reason, resolution_reference = EXCLUDED.resolution_reference,
		resolved_at = EXCLUDED.resolved_at, check_digest = EXCLUDED.check_digest, retention_us = EXCLUDED.retention_us
	WHERE r.expires_at <= $5
	RETURNING r.xmax::text <> '0' AS replaced
)
SELECT count(*) + 0 * count(CASE WHEN replaced THEN pg_notify($12, $13) END) FROM ins`),
		// forget announces every erased key; the payload is computed by the
		// server exactly as payloadFor computes it in Go.
		//
		// $1 tenant, $2 channel.
		forget: r.Replace(`WITH del AS (DELETE FROM {t} WHERE tenant = $1 RETURNING key)
SELECT count(pg_notify($2, left(encode(sha256(convert_to(octet_length($1::text)::text || ':' || $1::text || del.key, 'UTF8')), 'hex'), 32)))
FROM del`),
		// sweep deletes a bounded batch of expired rows by physical
		// address. SKIP LOCKED leaves rows a claim is replacing right now to
		// that claim; the outer condition is re-checked against any row
		// that changed in between. Expired rows already read as free, so no
		// waiter needs to hear about them.
		//
		// $1 now, $2 limit.
		sweep: r.Replace(`DELETE FROM {t}
WHERE ctid = ANY (ARRAY(SELECT ctid FROM {t} WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED))
	AND expires_at <= $1`),

		// cancelClaim undoes a claim of a free key whose answer never
		// reached the caller (its context ended, or the connection broke,
		// mid-statement). The token is the one this call generated, so it
		// can only match the claim this call made.
		//
		// $1 tenant, $2 key, $3 token, $4 channel, $5 payload.
		cancelClaim: r.Replace(`WITH del AS (
	DELETE FROM {t} WHERE tenant = $1 AND key = $2 AND token = $3 AND state = 1
	RETURNING 1
)
SELECT count(pg_notify($4, $5)) FROM del`),
		// endLease undoes a takeover whose answer never reached the caller:
		// the claim stays, pending, with its lease ended at $4 (now), so
		// the key is never left free (see Store.undoClaim). Its waiters
		// are told: the lease they wait on has run out.
		//
		// $1 tenant, $2 key, $3 token, $4 now, $5 channel, $6 payload.
		endLease: r.Replace(`WITH upd AS (
	UPDATE {t} SET lease_until = least(lease_until, $4::timestamptz), updated_at = $4
	WHERE tenant = $1 AND key = $2 AND token = $3 AND state = 1
	RETURNING watched
)
SELECT count(*) + 0 * count(CASE WHEN watched THEN pg_notify($5, $6) END) FROM upd`),
	}
}

// window is the SQL of the end of a retention window restarted at now
// (a bind parameter): the row's own retention when it keeps one
// (retention_us, exact to the microsecond: an interval times an integer
// below 2^53), else the store's, def (now + TTL, a bind parameter).
func window(now, def string) string {
	return "CASE WHEN retention_us IS NULL THEN " + def + "::timestamptz ELSE " +
		now + "::timestamptz + retention_us * interval '1 microsecond' END"
}
