package pgstore

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tesserix/idempotency/store"
)

// The state column holds store.State's numeric values: 1 pending,
// 2 completed, 3 indeterminate. The statements below name them
// ({pending}, {completed}, {indeterminate}) and spellStates writes them in
// as literals when the statements are built, so the planner sees constants
// (a listing's states must imply the partial index's predicate). Tables
// keep the numbers, so they must never change: these lines stop compiling
// if the contract's values ever do.
var (
	_ = [1]struct{}{}[store.StatePending-1]
	_ = [1]struct{}{}[store.StateCompleted-2]
	_ = [1]struct{}{}[store.StateIndeterminate-3]
)

// stateSQL is a state as the statements spell it: its number.
func stateSQL(st store.State) string { return strconv.Itoa(int(st)) }

// spellStates writes the states named in a statement as their literals.
var spellStates = strings.NewReplacer(
	"{pending}", stateSQL(store.StatePending),
	"{completed}", stateSQL(store.StateCompleted),
	"{indeterminate}", stateSQL(store.StateIndeterminate),
)

// bind turns a statement written with named parameters (@name) into one
// with PostgreSQL's positional parameters: each @name becomes $N, N the
// name's position in names (a statement's paramList, see args.go). It runs
// once, when a store is built, so the statements pgx prepares and caches
// are plain positional SQL. It does not parse SQL: an @ followed by a name
// is a parameter wherever it stands, so the statements hold no other @
// (the quoted table and index names are written in after it). A name used
// that names lacks, a name listed twice, or a listed name never used, is a
// mistake in this package: bind panics on it, and every store built, in
// every test, would.
func bind(sql string, names []string) string {
	pos := make(map[string]int, len(names))
	for i, n := range names {
		if _, dup := pos[n]; dup {
			panic(fmt.Sprintf("pgstore: statement lists its parameter @%s twice", n))
		}
		pos[n] = i + 1
	}
	used := make(map[string]bool, len(names))
	var b strings.Builder
	b.Grow(len(sql))
	for i := 0; i < len(sql); i++ {
		if sql[i] != '@' || i+1 == len(sql) || !identStart(sql[i+1]) {
			b.WriteByte(sql[i])
			continue
		}
		j := i + 1
		for j < len(sql) && identPart(sql[j]) {
			j++
		}
		name := sql[i+1 : j]
		n, ok := pos[name]
		if !ok {
			panic(fmt.Sprintf("pgstore: statement uses @%s, which its parameters %v lack", name, names))
		}
		used[name] = true
		b.WriteString("$" + strconv.Itoa(n))
		i = j - 1
	}
	for _, n := range names {
		if !used[n] {
			panic(fmt.Sprintf("pgstore: statement leaves its parameter @%s unused", n))
		}
	}
	return b.String()
}

func identStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func identPart(c byte) bool  { return identStart(c) || '0' <= c && c <= '9' }

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
	// approve and approveGuarded are the portable mode's approval of a
	// transactional commit, sent before completeTx (which then only
	// fences the completion); empty with every capability. See
	// approveSQL.
	approve, approveGuarded                     string
	resolveComplete, resolveFree, forget, sweep string
	resolveGone                                 string
	cancelClaim, endLease                       string
	countBacklog                                string
	batchClaim, batchRead, batchComplete        string

	// counted says that complete, release and markIndeterminate are plain
	// statements, whose command tag tells how many rows they changed (see
	// buildStatements: without Notify); otherwise each returns its count
	// as a row.
	counted bool

	// claimUpsert and announce are the full claim's statements without
	// Capabilities.Xmax (or Notify): the replacing upsert, and the
	// announcement of what it replaced, sent after it.
	claimUpsert, announce string
}

// completeTxSQL is completeTx's statement, with more CTEs after its
// update. Its parameters are completeTxArgs'.
func completeTxSQL(more string) string {
	return `WITH upd AS (
	UPDATE {t} SET state = {completed}, outcome = @outcome, updated_at = @now, expires_at = {window}
	WHERE tenant = @tenant AND key = @key AND token = @token AND state = {pending} AND expires_at > @now
	RETURNING watched
)` + more + `
SELECT CASE
	WHEN current_setting('` + markSetting + `', true) IS DISTINCT FROM @mark::text
		THEN ('` + txEndedMarker + ` (' || count(*) || ' rows)')::bigint
	WHEN count(*) = 1 THEN 1{notify_watched}
		+ 0 * length(set_config('` + commitSetting + `', @mark::text, true))
	ELSE ('` + fenceMarker + ` (' || count(*) || ' rows)')::bigint END FROM upd`
}

// completeTxFencedSQL is the portable mode's completeTx: the fenced
// completion alone, its parameters completeArgs'. The transaction's mark
// is checked, and the commit approved, by approveSQL, sent before it.
const completeTxFencedSQL = `WITH upd AS (
	UPDATE {t} SET state = {completed}, outcome = @outcome, updated_at = @now, expires_at = {window}
	WHERE tenant = @tenant AND key = @key AND token = @token AND state = {pending} AND expires_at > @now
	RETURNING watched
)
SELECT CASE WHEN count(*) = 1 THEN 1{notify_watched}
	ELSE ('` + fenceMarker + ` (' || count(*) || ' rows)')::bigint END FROM upd`

// approveSQL is the portable mode's approval of a transactional commit,
// with more CTEs before its SELECT (the guard's row deleted). It checks
// the transaction's mark and approves the COMMIT for the commit guard,
// as completeTxSQL does in the statement that completes the record, but
// in a statement of its own that reads no distributed table: on Citus a
// statement on the record's table runs on the worker that holds its
// shard, where the transaction-local settings of the session (the mark
// BEGIN set, the approval the guard's trigger reads at COMMIT, both on
// the coordinator) are not. The failing cast depends on a setting, so the
// planner cannot fold it into an error raised on every call. Its
// parameter is the mark.
func approveSQL(more string) string {
	return more + `SELECT CASE
	WHEN current_setting('` + markSetting + `', true) IS DISTINCT FROM @mark::text
		THEN ('` + txEndedMarker + ` (' || coalesce(current_setting('` + markSetting + `', true), 'no mark') || ')')::bigint
	ELSE 1 + 0 * length(set_config('` + commitSetting + `', @mark::text, true)) END`
}

// claimUpsertSQL is the INSERT … ON CONFLICT of a claim that may replace a
// standing row: it replaces the row only when it has expired (by @now) or
// is pending under exactly the superseded token @supersede. The claim
// statement wraps it in a CTE that reads xmax and answers the row standing;
// a store without xmax or NOTIFY sends it alone (claimUpsert). Indented as
// the CTE holds it, so the default statement stays the text it always was.
const claimUpsertSQL = `	INSERT INTO {t} AS r (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason,
		origin_workflow_id, origin_run_id, origin_activity_type, origin_activity_id, origin_attempt, check_digest, retention_us)
	VALUES (@tenant, @key, {pending}, @holder, @token, @lease_until, @expires_at, @now, @now, NULL, '', @origin_workflow_id, @origin_run_id, @origin_activity_type, @origin_activity_id, @origin_attempt, @check_digest, @retention_us)
	ON CONFLICT (tenant, key) DO UPDATE SET
		state = {pending}, holder = EXCLUDED.holder, token = EXCLUDED.token,
		lease_until = EXCLUDED.lease_until, expires_at = EXCLUDED.expires_at,
		created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,
		outcome = NULL, reason = '', watched = false,
		origin_workflow_id = EXCLUDED.origin_workflow_id, origin_run_id = EXCLUDED.origin_run_id,
		origin_activity_type = EXCLUDED.origin_activity_type, origin_activity_id = EXCLUDED.origin_activity_id,
		origin_attempt = EXCLUDED.origin_attempt,
		resolution_action = 0, resolved_by = '', resolution_reason = '', resolution_reference = '', resolved_at = NULL,
		check_digest = EXCLUDED.check_digest, retention_us = EXCLUDED.retention_us
	WHERE r.expires_at <= @now OR (r.state = {pending} AND r.token = @supersede)`

func buildStatements(table, index, listIndex, guard string, caps Capabilities) statements {
	r := strings.NewReplacer("{t}", table, "{i}", index, "{li}", listIndex, "{g}", guard, "{cols}", columns)
	spellCaps := capabilityTerms(caps)
	// q builds one statement: its states and its capability terms spelled
	// and its parameters bound to p's order first, then the quoted names
	// written in (a quoted name may hold an @ or a brace).
	q := func(sql string, p paramList) string {
		return r.Replace(bind(spellCaps.Replace(spellStates.Replace(sql)), p.names()))
	}
	// n is the notice the statements' parameter lists are built with: it
	// binds the channel and payload only when the store notifies.
	n := notice{silent: !caps.Notify}
	// claim takes the key in one statement. The INSERT's ON CONFLICT
	// arm replaces the row only when it has expired (by @now) or is
	// pending under exactly the superseded token @supersede (0, the
	// "no supersede" value, is never a token). A replaced row (xmax <>
	// 0: the tuple came from an UPDATE, not an INSERT) may have
	// waiters on its old token, so it is announced. When the arm does
	// not fire, the second branch returns the row as it stands, in the
	// same round trip. See Store.Claim for why that branch can come
	// back empty or stale under READ COMMITTED. Parameters: claimArgs.
	//
	// It reads xmax and notifies, so a store without either has none, and
	// sends claimUpsert (and announce) instead.
	var claimSQL string
	if caps.Xmax && caps.Notify {
		claimSQL = q(`WITH ins AS (
`+claimUpsertSQL+`
	RETURNING r.tenant, r.key, r.state, r.holder, r.token, r.lease_until, r.expires_at,
		r.created_at, r.updated_at, r.outcome, r.reason, r.origin_workflow_id, r.origin_run_id,
		r.origin_activity_type, r.origin_activity_id, r.origin_attempt, r.resolution_action, r.resolved_by,
		r.resolution_reason, r.resolution_reference, r.resolved_at, r.check_digest, r.retention_us,
		r.xmax::text <> '0' AS replaced
)
SELECT true AS acquired, {cols},
	CASE WHEN replaced THEN (SELECT count(pg_notify(@channel, @payload))) ELSE 0 END AS notified
FROM ins
UNION ALL
SELECT false, {cols}, 0
FROM {t}
WHERE tenant = @tenant AND key = @key AND NOT EXISTS (SELECT 1 FROM ins)`, claimArgs{notice: n}.params())
	}
	st := statements{
		createTable: q(`CREATE TABLE IF NOT EXISTS {t} (
	tenant      text        NOT NULL,
	key         text        NOT NULL,
	state       smallint    NOT NULL CHECK (state IN ({pending}, {completed}, {indeterminate})),
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
)`, nil),
		// addColumn brings a table made by an earlier version up to date,
		// one column at a time; PostgreSQL 11 and later add a column with a
		// constant default without rewriting rows. %s: name and definition.
		addColumn:   q(`ALTER TABLE {t} ADD COLUMN IF NOT EXISTS %s %s`, nil),
		createIndex: q(`CREATE INDEX IF NOT EXISTS {i} ON {t} (expires_at)`, nil),
		// createListIndex serves the listings of what waits in a tenant
		// (pending, stale, indeterminate), newest or oldest first. It is
		// partial: completed records, the bulk of a table, are not in it,
		// and a completion writes no entry.
		createListIndex: q(`CREATE INDEX IF NOT EXISTS {li} ON {t} (tenant, created_at, key COLLATE "C") WHERE state <> {completed}`, nil),

		// claim: see claimSQL above; empty without Xmax or Notify.
		claim: claimSQL,

		// claimInsert and claimRead are the claim of the common cases,
		// sent together as one batch (claimFast, see claim.go's table of
		// the claim's paths): a fresh key is inserted; a key that stands
		// is left alone and read. Only when the standing row is expired,
		// or pending under the superseded token, does Store.Claim go on
		// to the claim statement above, which replaces it. Parameters:
		// claimInsertArgs and claimReadArgs (the claim's own row, when it
		// inserted one, is not read back).
		claimInsert: q(`INSERT INTO {t} (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason,
	origin_workflow_id, origin_run_id, origin_activity_type, origin_activity_id, origin_attempt, check_digest, retention_us)
VALUES (@tenant, @key, {pending}, @holder, @token, @lease_until, @expires_at, @now, @now, NULL, '', @origin_workflow_id, @origin_run_id, @origin_activity_type, @origin_activity_id, @origin_attempt, @check_digest, @retention_us)
ON CONFLICT (tenant, key) DO NOTHING`, claimInsertArgs{}.params()),
		claimRead: q(`SELECT {cols} FROM {t} WHERE tenant = @tenant AND key = @key AND token <> @own_token`, claimReadArgs{}.params()),

		batchClaim: q(batchClaimSQL, batchClaimArgs{}.params()),
		batchRead:  q(batchReadSQL, batchClaimArgs{}.readParams()),
		batchComplete: q(strings.ReplaceAll(batchCompleteSQL, "{batch_notify}", batchNotify(caps)),
			batchCompleteArgs{notice: n}.params()),

		// Parameters: keyAt.
		lookup: q(`SELECT {cols} FROM {t} WHERE tenant = @tenant AND key = @key AND expires_at > @now`, keyAt{}.params()),
		// watch is a waiter's first read: it marks the record watched, so
		// the statement that settles it announces the change, and returns it.
		// The row lock orders it with that statement: either the waiter
		// reads the settled record, or the settling statement sees the mark.
		// Parameters: keyAt.
		watch: q(`UPDATE {t} SET watched = true WHERE tenant = @tenant AND key = @key AND expires_at > @now
RETURNING {cols}`, keyAt{}.params()),

		// The fenced statements change the row only while it is live and
		// pending under the caller's token, and report how many rows
		// changed. Complete, Release and MarkIndeterminate announce the
		// change in the same statement, so the announcement leaves at the
		// change's commit, but only when a waiter marked the record
		// watched: a NOTIFY takes a database-wide lock at commit, which
		// would serialise every settlement nobody waits for.
		//
		// A renewal restarts the retention window (the record's own, when
		// it keeps one: see {window}; else the store's, ending at
		// @expires_at), so a live holder's record never expires under it.
		// Parameters: renewArgs.
		renew: q(`UPDATE {t} SET lease_until = @lease_until, updated_at = @now,
	expires_at = greatest({window}, @lease_until::timestamptz)
WHERE tenant = @tenant AND key = @key AND token = @token AND state = {pending} AND expires_at > @now
RETURNING lease_until`, renewArgs{}.params()),
		// Parameters: completeArgs.
		complete: q(`WITH upd AS (
	UPDATE {t} SET state = {completed}, outcome = @outcome, updated_at = @now, expires_at = {window}
	WHERE tenant = @tenant AND key = @key AND token = @token AND state = {pending} AND expires_at > @now
	RETURNING watched
)
SELECT count(*){notify_watched} FROM upd`, completeArgs{notice: n}.params()),
		// completeTx is complete run inside a transactional body's
		// transaction (Store.BeginTransaction). The fence is the server's:
		// when no row changed, the statement fails (the text cast below
		// cannot succeed), which aborts the transaction, so no COMMIT can
		// land the body's writes without the completed record. The failing
		// expression depends on the aggregate, so the planner cannot fold
		// it into an error raised on every call. Parameters:
		// completeTxArgs, complete's and the mark.
		//
		// It runs only in the transaction that began (its @mark is the
		// transaction-local setting BEGIN set: a body that ended its
		// transaction with ROLLBACK AND CHAIN runs it in a chained one,
		// which has lost it), and approves the COMMIT that follows it for
		// the commit guard (txguard.go): it sets the commit setting to the
		// mark and, in completeTxGuarded, deletes the guard's row.
		completeTx:        q(completeTxSQL(""), completeTxArgs{completeArgs: completeArgs{notice: n}}.params()),
		completeTxGuarded: q(completeTxSQL(", unguard AS (\n\tDELETE FROM {g} WHERE mark = @mark::text\n)"), completeTxArgs{completeArgs: completeArgs{notice: n}}.params()),
		// Parameters: settleArgs.
		release: q(`WITH del AS (
	DELETE FROM {t}
	WHERE tenant = @tenant AND key = @key AND token = @token AND state = {pending} AND expires_at > @now
	RETURNING watched
)
SELECT count(*){notify_watched} FROM del`, settleArgs{notice: n}.params()),
		// Parameters: markArgs.
		markIndeterminate: q(`WITH upd AS (
	UPDATE {t} SET state = {indeterminate}, reason = @reason, updated_at = @now, expires_at = @expires_at
	WHERE tenant = @tenant AND key = @key AND token = @token AND state = {pending} AND expires_at > @now
	RETURNING watched
)
SELECT count(*){notify_watched} FROM upd`, markArgs{notice: n}.params()),
		// The resolutions change the row only while it is live and
		// indeterminate — or, with @stale, pending with its lease run out
		// at @now (ResolveParams.Stale, which always carries a token) —
		// and, when the fence @token is not 0, claimed under exactly that
		// token: the check and the change are one statement. Parameters:
		// resolveCompleteArgs and resolveFreeArgs.
		resolveComplete: q(`WITH upd AS (
	UPDATE {t} SET state = {completed}, outcome = @outcome, updated_at = @now, expires_at = {window},
		resolution_action = @action, resolved_by = @by, resolution_reason = @reason, resolution_reference = @reference, resolved_at = @now
	WHERE tenant = @tenant AND key = @key AND expires_at > @now AND (@token::bigint = 0 OR token = @token::bigint)
		AND (state = {indeterminate} OR (@stale::boolean AND state = {pending} AND lease_until <= @now))
	RETURNING 1
)
SELECT {notify_count} FROM upd`, resolveCompleteArgs{notice: n}.params()),
		resolveFree: q(`WITH del AS (
	DELETE FROM {t} WHERE tenant = @tenant AND key = @key AND expires_at > @now AND (@token::bigint = 0 OR token = @token::bigint)
		AND (state = {indeterminate} OR (@stale::boolean AND state = {pending} AND lease_until <= @now))
	RETURNING 1
)
SELECT {notify_count} FROM del`, resolveFreeArgs{notice: n}.params()),
		// resolveGone records a person's outcome under a key that has no
		// live record (ResolveParams.RecordIfGone): a completed record,
		// inserted, or replacing an expired row. A live row is left alone
		// and nothing is returned. A replaced row may have waiters, so it is
		// announced. Parameters: resolveGoneArgs.
		resolveGone: q(`WITH ins AS (
	INSERT INTO {t} AS r (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason,
		resolution_action, resolved_by, resolution_reason, resolution_reference, resolved_at, check_digest, retention_us)
	VALUES (@tenant, @key, {completed}, @holder, @token, @now, @expires_at, @now, @now, @outcome, '', @action, @by, @reason, @reference, @now, @check_digest, @retention_us)
	ON CONFLICT (tenant, key) DO UPDATE SET
		state = {completed}, holder = EXCLUDED.holder, token = EXCLUDED.token,
		lease_until = EXCLUDED.lease_until, expires_at = EXCLUDED.expires_at,
		created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,
		outcome = EXCLUDED.outcome, reason = '', watched = false,
		origin_workflow_id = '', origin_run_id = '', origin_activity_type = '', origin_activity_id = '', origin_attempt = 0,
		resolution_action = EXCLUDED.resolution_action, resolved_by = EXCLUDED.resolved_by,
		resolution_reason = EXCLUDED.resolution_reason, resolution_reference = EXCLUDED.resolution_reference,
		resolved_at = EXCLUDED.resolved_at, check_digest = EXCLUDED.check_digest, retention_us = EXCLUDED.retention_us
	WHERE r.expires_at <= @now
	RETURNING {replaced} AS replaced
)
SELECT count(*){notify_replaced} FROM ins`, resolveGoneArgs{notice: n}.params()),
		// forget announces every erased key (with Notify); the payload is
		// computed by the server exactly as payloadFor computes it in Go.
		// Parameters: forgetArgs.
		forget: q(`WITH del AS (DELETE FROM {t} WHERE tenant = @tenant RETURNING key)
SELECT {notify_forget}
FROM del`, forgetArgs{silent: n.silent}.params()),
		// sweep deletes a bounded batch of expired rows: see {sweep} in
		// capabilityTerms. Parameters: sweepArgs.
		sweep: q(`{sweep}`, sweepArgs{}.params()),

		// cancelClaim undoes a claim of a free key whose answer never
		// reached the caller (its context ended, or the connection broke,
		// mid-statement). The token is the one this call generated, so it
		// can only match the claim this call made. Parameters:
		// cancelClaimArgs.
		cancelClaim: q(`WITH del AS (
	DELETE FROM {t} WHERE tenant = @tenant AND key = @key AND token = @token AND state = {pending}
	RETURNING 1
)
SELECT {notify_count} FROM del`, cancelClaimArgs{notice: n}.params()),
		// endLease undoes a takeover whose answer never reached the caller:
		// the claim stays, pending, with its lease ended at @now, so the
		// key is never left free (see claimer.undoClaim). Its waiters are
		// told: the lease they wait on has run out. Parameters: settleArgs.
		endLease: q(`WITH upd AS (
	UPDATE {t} SET lease_until = least(lease_until, @now::timestamptz), updated_at = @now
	WHERE tenant = @tenant AND key = @key AND token = @token AND state = {pending}
	RETURNING watched
)
SELECT count(*){notify_watched} FROM upd`, settleArgs{notice: n}.params()),

		// countBacklog counts, by activity type, the live records that
		// wait for a person: indeterminate ones, and pending ones whose
		// lease ran out at @now. Parameters: backlogArgs.
		countBacklog: q(`SELECT origin_activity_type,
	count(*) FILTER (WHERE state = {indeterminate}), count(*) FILTER (WHERE state = {pending} AND lease_until <= @now)
FROM {t}
WHERE state IN ({pending}, {indeterminate}) AND expires_at > @now
GROUP BY origin_activity_type
HAVING count(*) FILTER (WHERE state = {indeterminate} OR lease_until <= @now) > 0
ORDER BY origin_activity_type COLLATE "C"`, backlogArgs{}.params()),
	}
	if !caps.Notify {
		// Without notifications, all the fenced statements return is how
		// many rows they changed, which their command tag says: as plain
		// statements (no CTE, no aggregate) Citus plans them on its fast
		// path, where a modifying CTE takes its full planner (a completion
		// took twice the coordinator's time, measured). Store.fenced reads
		// their tag.
		st.complete = q(`UPDATE {t} SET state = {completed}, outcome = @outcome, updated_at = @now, expires_at = {window}
WHERE tenant = @tenant AND key = @key AND token = @token AND state = {pending} AND expires_at > @now`, completeArgs{notice: n}.params())
		st.release = q(`DELETE FROM {t}
WHERE tenant = @tenant AND key = @key AND token = @token AND state = {pending} AND expires_at > @now`, settleArgs{notice: n}.params())
		st.markIndeterminate = q(`UPDATE {t} SET state = {indeterminate}, reason = @reason, updated_at = @now, expires_at = @expires_at
WHERE tenant = @tenant AND key = @key AND token = @token AND state = {pending} AND expires_at > @now`, markArgs{notice: n}.params())
		st.counted = true
	}
	if caps.Portable() {
		// The transactional commit in two statements: see approveSQL.
		st.completeTx = q(completeTxFencedSQL, completeArgs{notice: n}.params())
		st.completeTxGuarded = ""
		st.approve = q(approveSQL(""), approveArgs{}.params())
		st.approveGuarded = q(approveSQL("WITH unguard AS (\n\tDELETE FROM {g} WHERE mark = @mark::text\n)\n"), approveArgs{}.params())
	}
	if claimSQL != "" {
		return st
	}
	// Without xmax (or without notifications, which are all the claim
	// statement reads xmax for), the full claim is an upsert alone: it
	// returns the record only when it wrote it, under the token this call
	// sent, and a second statement reads what stands otherwise (claimRead:
	// the call's own token is not there). See claimer.claimReplace.
	st.claimUpsert = q(claimUpsertSQL+`
RETURNING {cols}`, claimArgs{notice: notice{silent: true}}.params())
	if caps.Notify {
		// Parameters: notice.
		st.announce = q(`SELECT pg_notify(@channel, @payload)`, notice{}.params())
	}
	return st
}

// capabilityTerms spells the terms of the statements that differ with
// the store's capabilities: with every capability, exactly the text the
// store has always sent.
//
//   - {notify_watched}: after a count, the term that announces the rows
//     a waiter marked watched; {notify_count}, the count that announces
//     every row; {notify_replaced}, the term that announces the rows
//     resolveGone replaced; {notify_forget}, forget's count that
//     announces every erased key. Without Notify, none announces and the
//     counts are plain.
//   - {replaced}: whether resolveGone's row replaced one (xmax <> 0), or,
//     without Xmax, true for every row it wrote (so one that inserted is
//     announced too: a notification nobody waits for).
//   - {sweep}: Sweep's statement: by ctid, or by primary key.
//   - {window} and {batch_window}: the end of a retention window
//     restarted at @now (see windowSQL); in the portable mode (any
//     capability off) computed with IMMUTABLE functions only, as Citus
//     requires of an UPDATE on a distributed table.
func capabilityTerms(caps Capabilities) *strings.Replacer {
	terms := []string{
		"{notify_watched}", " + 0 * count(CASE WHEN watched THEN pg_notify(@channel, @payload) END)",
		"{notify_count}", "count(pg_notify(@channel, @payload))",
		"{notify_replaced}", " + 0 * count(CASE WHEN replaced THEN pg_notify(@channel, @payload) END)",
		"{notify_forget}", "count(pg_notify(@channel, left(encode(sha256(convert_to(octet_length(@tenant::text)::text || ':' || @tenant::text || del.key, 'UTF8')), 'hex'), 32)))",
		"{replaced}", "r.xmax::text <> '0'",
		// {window} and {batch_window}: see windowSQL.
		"{window}", windowSQL("", false),
		"{batch_window}", windowSQL("r.", false),
		// sweep deletes a bounded batch of expired rows by physical
		// address. SKIP LOCKED leaves rows a claim is replacing right now
		// to that claim; the outer condition is re-checked against any row
		// that changed in between. Expired rows already read as free, so
		// no waiter needs to hear about them.
		"{sweep}", `DELETE FROM {t}
WHERE ctid = ANY (ARRAY(SELECT ctid FROM {t} WHERE expires_at <= @now LIMIT @limit FOR UPDATE SKIP LOCKED))
	AND expires_at <= @now`,
	}
	set := func(term, text string) {
		for i := 0; i < len(terms); i += 2 {
			if terms[i] == term {
				terms[i+1] = text
				return
			}
		}
		panic("pgstore: no capability term " + term)
	}
	if !caps.Notify {
		set("{notify_watched}", "")
		set("{notify_count}", "count(*)")
		set("{notify_replaced}", "")
		set("{notify_forget}", "count(*)")
	}
	if !caps.Xmax {
		set("{replaced}", "true")
	}
	if caps.Portable() {
		set("{window}", windowSQL("", true))
		set("{batch_window}", windowSQL("r.", true))
	}
	if !caps.Ctid {
		// Without ctid: by primary key, a batch read without locks (row
		// locks in a subquery are what distributed engines restrict
		// most); the outer condition is re-checked against a row that
		// changed in between, as above.
		set("{sweep}", `DELETE FROM {t}
WHERE (tenant, key) IN (SELECT tenant, key FROM {t} WHERE expires_at <= @now LIMIT @limit)
	AND expires_at <= @now`)
	}
	return strings.NewReplacer(terms...)
}

// windowSQL is the SQL of the end of a retention window restarted at
// @now: the row's own retention when it keeps one (retention_us, exact to
// the microsecond: an interval times an integer below 2^53), else the
// store's, @expires_at (@now + TTL). row qualifies the row's column ("r."
// in a statement that names the table so, or "").
//
// PostgreSQL adds an interval to a timestamptz with a STABLE function (it
// reads the session's time zone for days and months), which Citus refuses
// in an UPDATE of a distributed table, beside a column and inside a CASE
// ("non-IMMUTABLE functions are not allowed in CASE or COALESCE
// statements", 0A000): it could not evaluate it on the coordinator. With
// portable, the same instant is computed with IMMUTABLE functions only:
// @now read as a UTC timestamp, the microseconds added to it (timestamp +
// interval is IMMUTABLE), and the sum read back as UTC. An interval of
// microseconds alone has no days or months, so both give the same instant,
// to the microsecond.
func windowSQL(row string, portable bool) string {
	end := "@now::timestamptz + " + row + "retention_us * interval '1 microsecond'"
	if portable {
		end = "timezone('UTC', timezone('UTC', @now::timestamptz) + " + row + "retention_us * interval '1 microsecond')"
	}
	return "CASE WHEN " + row + "retention_us IS NULL THEN @expires_at::timestamptz ELSE " + end + " END"
}
