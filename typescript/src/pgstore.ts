// The PostgreSQL store: the same table, columns, states and statements as
// the Go package pgstore (pgstore/sql.go), so that Go and TypeScript
// workers share records. Times are microseconds since the Unix epoch
// (bigint), as PostgreSQL keeps them; the store's clock is the server's
// (measured, then kept as an offset from the local clock, as Go's
// store.ServerClock does).

import { createHash, randomBytes } from 'node:crypto';
import type { Pool, QueryResultRow } from 'pg';

/** A record's state: the numbers the table keeps (never change them). */
export enum State {
  Pending = 1,
  Completed = 2,
  Indeterminate = 3,
}

/** What a claim or a wait found. */
export enum Status {
  /** The claim is the caller's. */
  Acquired = 1,
  /** Another holder has the key (see leaseExpired). */
  Held = 2,
  /** The key has a recorded outcome. */
  Completed = 3,
  /** The key's outcome is unknown: a person decides. */
  Indeterminate = 4,
  /** The key has no live record (a wait's answer only). */
  Free = 5,
}

/** Microseconds since the Unix epoch. */
export type Micros = bigint;

/** Where a record came from. */
export interface Origin {
  workflowId: string;
  runId: string;
  activityType: string;
  activityId: string;
  attempt: number;
}

/** A row of the table. */
export interface StoreRecord {
  tenant: string;
  key: string;
  state: State;
  holder: string;
  token: bigint;
  leaseUntil: Micros;
  expiresAt: Micros;
  createdAt: Micros;
  updatedAt: Micros;
  /** The recorded outcome: Payloads in protobuf wire form; null while pending. */
  outcome: Buffer | null;
  reason: string;
  origin: Origin;
  resolutionAction: number;
  resolvedBy: string;
  resolutionReason: string;
  resolutionReference: string;
  resolvedAt: Micros | null;
  /** The check digest; "" for none. */
  check: string;
  /** The record's own retention window, microseconds; 0 for the store's TTL. */
  retentionUs: bigint;
}

/** A store's answer to a claim or a wait. */
export interface Result {
  status: Status;
  record?: StoreRecord;
  /** With Held: the holder's lease has run out by the store's clock. */
  leaseExpired?: boolean;
}

/** NotHolderError: a fenced write found the claim no longer the caller's (Go's store.ErrNotHolder). */
export class NotHolderError extends Error {
  constructor(op: string, tenant: string, key: string, token: bigint) {
    super(`pgstore: ${op} on ${JSON.stringify(key)} in tenant ${JSON.stringify(tenant)}: the claim under token ${token} is no longer held`);
    this.name = 'NotHolderError';
  }
}

/** StoreUnavailableError: the store did not answer (Go's store.ErrUnavailable). */
export class StoreUnavailableError extends Error {
  constructor(message: string, readonly cause?: unknown) {
    super(message);
    this.name = 'StoreUnavailableError';
  }
}

/** Options of a {@link PgStore}. */
export interface PgStoreOptions {
  /** The schema; default "public". */
  schema?: string;
  /** The table; default "idempotency_records". */
  table?: string;
  /** How long a record is kept after it was last written when it keeps no retention of its own; default 24 h. */
  ttlMs?: number;
  /** The LISTEN/NOTIFY channel; default derived from schema and table as Go derives it. */
  notifyChannel?: string;
  /** A clock (microseconds) instead of the server's; for tests. */
  clock?: () => Micros;
  /** How often the server clock is measured again; default 10 s. */
  clockSyncMs?: number;
  /** First poll interval of a wait; default 50 ms. */
  pollMs?: number;
  /** Longest poll interval of a wait; default 1 s. */
  maxPollMs?: number;
}

/** Default table, as Go's pgstore.DefaultTable. */
export const DEFAULT_TABLE = 'idempotency_records';
/** Default schema. */
export const DEFAULT_SCHEMA = 'public';
/** Default TTL: 24 hours (Go's store.DefaultTTL). */
export const DEFAULT_TTL_MS = 24 * 3600 * 1000;
/** When an indeterminate record expires: never, in practice (Go's store.NeverExpires). */
export const NEVER_EXPIRES: Micros = BigInt(Date.UTC(2200, 0, 1)) * 1000n;

const COLUMNS =
  'tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason, ' +
  'origin_workflow_id, origin_run_id, origin_activity_type, origin_activity_id, origin_attempt, ' +
  'resolution_action, resolved_by, resolution_reason, resolution_reference, resolved_at, check_digest, retention_us';

const MAX_ATTEMPTS = 10;

function validateIdentifier(field: string, name: string): void {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name)) {
    throw new Error(`pgstore: ${field} ${JSON.stringify(name)} is not an identifier of up to 63 ASCII letters, digits and underscores`);
  }
}

function quote(name: string): string {
  return '"' + name.replace(/"/g, '""') + '"';
}

/** The channel Go's pgstore derives from the table's qualified name. */
export function defaultChannel(schema: string, table: string): string {
  return 'idempotency_' + createHash('sha256').update(schema + '.' + table).digest().subarray(0, 8).toString('hex');
}

/** The payload announcing a change to tenant's key (Go's payloadFor). */
export function payloadFor(tenant: string, key: string): string {
  const t = Buffer.from(tenant, 'utf8');
  return createHash('sha256')
    .update(Buffer.concat([Buffer.from(String(t.length) + ':'), t, Buffer.from(key, 'utf8')]))
    .digest()
    .subarray(0, 16)
    .toString('hex');
}

function indexNameWith(table: string, suffix: string): string {
  if (table.length + suffix.length <= 63) return table + suffix;
  const tag = '_' + createHash('sha256').update(table).digest().subarray(0, 4).toString('hex');
  return table.slice(0, 63 - suffix.length - tag.length) + tag + suffix;
}

/** A fresh fencing token: a random positive 63-bit integer, never 0 (Go's store.NewToken). */
export function newToken(): bigint {
  const t = randomBytes(8).readBigUInt64BE() >> 1n;
  return t === 0n ? 1n : t;
}

/** Formats microseconds as a timestamptz literal. */
export function formatMicros(us: Micros): string {
  const ms = us / 1000n;
  const frac = ((us % 1000000n) + 1000000n) % 1000000n;
  const iso = new Date(Number(ms - (ms % 1000n + 1000n) % 1000n)).toISOString().slice(0, 19);
  return `${iso}.${frac.toString().padStart(6, '0')}Z`;
}

/** Parses PostgreSQL's text form of a timestamptz (DateStyle ISO, any TimeZone). */
export function parseTimestamptz(s: string): Micros {
  if (s === 'infinity') return 9223372036854775807n;
  if (s === '-infinity') return -9223372036854775808n;
  const m = /^(\d{4,})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?(?:([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?)?$/.exec(s);
  if (!m) throw new Error(`pgstore: cannot read the time ${JSON.stringify(s)}`);
  const secs = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]) / 1000;
  let us = BigInt(secs) * 1000000n + BigInt((m[7] ?? '').padEnd(6, '0') || '0');
  if (m[8]) {
    const off = BigInt(+m[9] * 3600 + +(m[10] ?? 0) * 60 + +(m[11] ?? 0)) * 1000000n;
    us = m[8] === '+' ? us - off : us + off;
  }
  return us;
}

/** Text parsers: timestamps and bigints read exactly. */
const exactTypes = {
  getTypeParser(oid: number, format?: string): (v: string) => unknown {
    if (format === 'binary') return (v: string) => v;
    switch (oid) {
      case 1184: // timestamptz
        return (v: string) => parseTimestamptz(v);
      case 20: // int8
        return (v: string) => BigInt(v);
      case 17: // bytea
        return (v: string) => (v.startsWith('\\x') ? Buffer.from(v.slice(2), 'hex') : Buffer.from(v, 'binary'));
      case 21:
      case 23:
        return (v: string) => Number(v);
      case 16:
        return (v: string) => v === 't';
      default:
        return (v: string) => v;
    }
  },
};

function localMicros(): Micros {
  return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000));
}

function rowToRecord(r: QueryResultRow): StoreRecord {
  return {
    tenant: r.tenant,
    key: r.key,
    state: r.state as State,
    holder: r.holder,
    token: r.token,
    leaseUntil: r.lease_until,
    expiresAt: r.expires_at,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    outcome: r.outcome ?? null,
    reason: r.reason,
    origin: {
      workflowId: r.origin_workflow_id,
      runId: r.origin_run_id,
      activityType: r.origin_activity_type,
      activityId: r.origin_activity_id,
      attempt: r.origin_attempt,
    },
    resolutionAction: r.resolution_action,
    resolvedBy: r.resolved_by,
    resolutionReason: r.resolution_reason,
    resolutionReference: r.resolution_reference,
    resolvedAt: r.resolved_at ?? null,
    check: r.check_digest ?? '',
    retentionUs: r.retention_us ?? 0n,
  };
}

/** ResultOf judges a record read at now (Go's store.ResultOf). */
export function resultOf(rec: StoreRecord, now: Micros): Result {
  switch (rec.state) {
    case State.Completed:
      return { status: Status.Completed, record: rec };
    case State.Indeterminate:
      return { status: Status.Indeterminate, record: rec };
    default:
      return { status: Status.Held, record: rec, leaseExpired: now >= rec.leaseUntil };
  }
}

/** What a claim asks for. */
export interface ClaimParams {
  tenant: string;
  key: string;
  holder: string;
  leaseMs: number;
  /** The token of a holder presumed gone to take over; 0n for none. */
  supersede?: bigint;
  check?: string;
  /** The record's own retention; 0 or absent: the store's TTL. */
  retentionMs?: number;
  origin: Origin;
}

/**
 * PgStore keeps records in one PostgreSQL table, shared with the Go
 * library's pgstore on the same table.
 */
export class PgStore {
  readonly schema: string;
  readonly table: string;
  readonly channel: string;
  private readonly t: string;
  private readonly ttlUs: bigint;
  private offset = 0n;
  private syncedAt = -1;
  private syncing: Promise<void> | undefined;
  private readonly pollMs: number;
  private readonly maxPollMs: number;

  constructor(readonly pool: Pool, private readonly opts: PgStoreOptions = {}) {
    this.schema = opts.schema ?? DEFAULT_SCHEMA;
    this.table = opts.table ?? DEFAULT_TABLE;
    validateIdentifier('schema', this.schema);
    validateIdentifier('table', this.table);
    this.channel = opts.notifyChannel ?? defaultChannel(this.schema, this.table);
    validateIdentifier('notifyChannel', this.channel);
    this.t = quote(this.schema) + '.' + quote(this.table);
    this.ttlUs = BigInt(Math.round((opts.ttlMs ?? DEFAULT_TTL_MS) * 1000));
    this.pollMs = opts.pollMs ?? 50;
    this.maxPollMs = opts.maxPollMs ?? 1000;
  }

  private async q(text: string, values: unknown[]): Promise<QueryResultRow[]> {
    try {
      const res = await this.pool.query({ text, values, types: exactTypes });
      return res.rows;
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith('08') && !code.startsWith('57P') && code !== '40001' && code !== '40P01') {
        throw e; // the server refused the statement itself
      }
      throw new StoreUnavailableError(`pgstore: ${(e as Error).message}`, e);
    }
  }

  /** The store's clock, microseconds: the server's. */
  async now(): Promise<Micros> {
    if (this.opts.clock) return this.opts.clock();
    const every = this.opts.clockSyncMs ?? 10000;
    if (this.syncedAt < 0 || performance.now() - this.syncedAt > every) {
      this.syncing ??= this.sync().finally(() => (this.syncing = undefined));
      if (this.syncedAt < 0) await this.syncing;
    }
    return localMicros() + this.offset;
  }

  private async sync(): Promise<void> {
    const before = localMicros();
    const rows = await this.q(`SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS us`, []);
    const after = localMicros();
    this.offset = (rows[0].us as bigint) - (before + after) / 2n;
    this.syncedAt = performance.now();
  }

  /** Creates the schema, table and indexes Go's EnsureSchema creates, if missing. */
  async ensureSchema(): Promise<void> {
    await this.q(`CREATE SCHEMA IF NOT EXISTS ${quote(this.schema)}`, []);
    await this.q(
      `CREATE TABLE IF NOT EXISTS ${this.t} (
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
)`,
      [],
    );
    await this.q(`CREATE INDEX IF NOT EXISTS ${quote(indexNameWith(this.table, '_expires_at_idx'))} ON ${this.t} (expires_at)`, []);
    await this.q(
      `CREATE INDEX IF NOT EXISTS ${quote(indexNameWith(this.table, '_waiting_idx'))} ON ${this.t} (tenant, created_at, key COLLATE "C") WHERE state <> 2`,
      [],
    );
  }

  /**
   * Claims the key: a free (or expired) key, or, with supersede, the key
   * of the holder presumed gone under that token. Otherwise it answers
   * the record that stands.
   */
  async claim(p: ClaimParams): Promise<Result> {
    const supersede = p.supersede ?? 0n;
    let token = newToken();
    while (token === supersede) token = newToken();
    const retentionUs = BigInt(Math.round((p.retentionMs ?? 0) * 1000));
    for (let attempt = 1; ; attempt++) {
      const now = await this.now();
      const leaseUntil = now + BigInt(Math.round(p.leaseMs * 1000));
      let expires = now + (retentionUs > 0n ? retentionUs : this.ttlUs);
      if (expires < leaseUntil) expires = leaseUntil;
      const rows = await this.q(
        `WITH ins AS (
	INSERT INTO ${this.t} AS r (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason,
		origin_workflow_id, origin_run_id, origin_activity_type, origin_activity_id, origin_attempt, check_digest, retention_us)
	VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $7, NULL, '', $8, $9, $10, $11, $12, $13, $14)
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
	WHERE r.expires_at <= $7 OR (r.state = 1 AND r.token = $15)
	RETURNING r.tenant, r.key, r.state, r.holder, r.token, r.lease_until, r.expires_at,
		r.created_at, r.updated_at, r.outcome, r.reason, r.origin_workflow_id, r.origin_run_id,
		r.origin_activity_type, r.origin_activity_id, r.origin_attempt, r.resolution_action, r.resolved_by,
		r.resolution_reason, r.resolution_reference, r.resolved_at, r.check_digest, r.retention_us,
		r.xmax::text <> '0' AS replaced
)
SELECT true AS acquired, ${COLUMNS},
	CASE WHEN replaced THEN (SELECT count(pg_notify($16, $17))) ELSE 0 END AS notified
FROM ins
UNION ALL
SELECT false, ${COLUMNS}, 0
FROM ${this.t}
WHERE tenant = $1 AND key = $2 AND NOT EXISTS (SELECT 1 FROM ins)`,
        [
          p.tenant,
          p.key,
          p.holder,
          token.toString(),
          formatMicros(leaseUntil),
          formatMicros(expires),
          formatMicros(now),
          p.origin.workflowId,
          p.origin.runId,
          p.origin.activityType,
          p.origin.activityId,
          p.origin.attempt,
          p.check ? p.check : null,
          retentionUs > 0n ? retentionUs.toString() : null,
          supersede.toString(),
          this.channel,
          payloadFor(p.tenant, p.key),
        ],
      );
      if (rows.length === 1) {
        const rec = rowToRecord(rows[0]);
        if (rows[0].acquired) return { status: Status.Acquired, record: rec };
        // A row the statement read but did not take cannot be the row its
        // conflict arm judged when the arm would have taken it: a stale
        // snapshot. Run it again with a new one.
        const stale = now >= rec.expiresAt || (supersede !== 0n && rec.state === State.Pending && rec.token === supersede);
        if (!stale) return resultOf(rec, now);
      }
      if (attempt === MAX_ATTEMPTS) {
        throw new StoreUnavailableError(`pgstore: claim: key ${JSON.stringify(p.key)} in tenant ${JSON.stringify(p.tenant)} kept changing under ${MAX_ATTEMPTS} attempts`);
      }
    }
  }

  /** Reads the key's live record, or undefined. */
  async lookup(tenant: string, key: string): Promise<StoreRecord | undefined> {
    const now = await this.now();
    const rows = await this.q(`SELECT ${COLUMNS} FROM ${this.t} WHERE tenant = $1 AND key = $2 AND expires_at > $3`, [
      tenant,
      key,
      formatMicros(now),
    ]);
    return rows.length ? rowToRecord(rows[0]) : undefined;
  }

  /** Extends the lease of the claim under token; NotHolderError when it is no longer the caller's. Returns the new lease end. */
  async renew(tenant: string, key: string, token: bigint, leaseMs: number): Promise<Micros> {
    const now = await this.now();
    const leaseUntil = now + BigInt(Math.round(leaseMs * 1000));
    const rows = await this.q(
      `UPDATE ${this.t} SET lease_until = $4, updated_at = $5,
	expires_at = greatest(${this.window('$5', '$6')}, $4::timestamptz)
WHERE tenant = $1 AND key = $2 AND token = $3 AND state = 1 AND expires_at > $5
RETURNING lease_until`,
      [tenant, key, token.toString(), formatMicros(leaseUntil), formatMicros(now), formatMicros(now + this.ttlUs)],
    );
    if (rows.length === 0) throw new NotHolderError('renew', tenant, key, token);
    return rows[0].lease_until as Micros;
  }

  /** The end of a retention window restarted at now (Go's windowSQL). */
  private window(now: string, expires: string): string {
    return `CASE WHEN retention_us IS NULL THEN ${expires}::timestamptz ELSE ${now}::timestamptz + retention_us * interval '1 microsecond' END`;
  }

  private notifyWatched(): string {
    return ` + 0 * count(CASE WHEN watched THEN pg_notify($5, $6) END)`;
  }

  private async fenced(
    op: string,
    tenant: string,
    key: string,
    token: bigint,
    sql: string,
    extra: (now: Micros) => unknown[],
  ): Promise<void> {
    const now = await this.now();
    const rows = await this.q(sql, [tenant, key, token.toString(), formatMicros(now), this.channel, payloadFor(tenant, key), ...extra(now)]);
    if (BigInt(rows[0].n) === 0n) throw new NotHolderError(op, tenant, key, token);
  }

  /** Records the outcome under the claim; NotHolderError when it is no longer the caller's. */
  async complete(tenant: string, key: string, token: bigint, outcome: Uint8Array | null): Promise<void> {
    await this.fenced(
      'complete',
      tenant,
      key,
      token,
      `WITH upd AS (
	UPDATE ${this.t} SET state = 2, outcome = $7, updated_at = $4, expires_at = ${this.window('$4', '$8')}
	WHERE tenant = $1 AND key = $2 AND token = $3 AND state = 1 AND expires_at > $4
	RETURNING watched
)
SELECT count(*)${this.notifyWatched()} AS n FROM upd`,
      (now) => [Buffer.from(outcome ?? new Uint8Array()), formatMicros(now + this.ttlUs)],
    );
  }

  /** Frees the key held under token. */
  async release(tenant: string, key: string, token: bigint): Promise<void> {
    await this.fenced(
      'release',
      tenant,
      key,
      token,
      `WITH del AS (
	DELETE FROM ${this.t}
	WHERE tenant = $1 AND key = $2 AND token = $3 AND state = 1 AND expires_at > $4
	RETURNING watched
)
SELECT count(*)${this.notifyWatched()} AS n FROM del`,
      () => [],
    );
  }

  /** Marks the claim under token indeterminate, with reason: a person decides. */
  async markIndeterminate(tenant: string, key: string, token: bigint, reason: string): Promise<void> {
    await this.fenced(
      'mark indeterminate',
      tenant,
      key,
      token,
      `WITH upd AS (
	UPDATE ${this.t} SET state = 3, reason = $7, updated_at = $4, expires_at = $8
	WHERE tenant = $1 AND key = $2 AND token = $3 AND state = 1 AND expires_at > $4
	RETURNING watched
)
SELECT count(*)${this.notifyWatched()} AS n FROM upd`,
      () => [reason, formatMicros(NEVER_EXPIRES)],
    );
  }

  /**
   * Waits until the claim under token is no longer pending, or its lease
   * ran out, polling the record; undefined when timeoutMs passed first.
   */
  async wait(tenant: string, key: string, token: bigint, timeoutMs: number): Promise<Result | undefined> {
    const deadline = performance.now() + timeoutMs;
    let poll = this.pollMs;
    for (;;) {
      const rec = await this.lookup(tenant, key);
      const now = await this.now();
      if (!rec) return { status: Status.Free };
      if (rec.state === State.Completed) return { status: Status.Completed, record: rec };
      if (rec.state === State.Indeterminate) return { status: Status.Indeterminate, record: rec };
      if (rec.token !== token || now >= rec.leaseUntil) {
        return { status: Status.Held, record: rec, leaseExpired: now >= rec.leaseUntil };
      }
      const left = deadline - performance.now();
      if (left <= 0) return undefined;
      const untilLease = Number((rec.leaseUntil - now) / 1000n);
      const d = Math.max(1, Math.min(poll, untilLease + 1, left));
      await new Promise((r) => setTimeout(r, d));
      poll = Math.min(poll * 2, this.maxPollMs);
    }
  }
}
