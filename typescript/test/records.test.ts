// spec/vectors/records-postgres.json: each scenario's steps run on this
// store, on a fresh table, with the store's clock set to each step's time;
// each step's answer, and the row the table holds at the end (read as
// PostgreSQL's text of every column, in UTC), must be what the Go store
// gives. Scenarios with a person's decision (resolve) are the operator's
// (idempotencyctl, in Go): this package does not resolve, so they skip.

import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { Pool } from 'pg';
import { type Micros, NotHolderError, type PgStore, type Result, Status } from '../src/pgstore';

// A placeholder ({{tokenN}}) a claim's answer binds stands for the token
// the store drew; one used before any answer bound it stands for a token
// no claim holds.
import { freshStore, testPool } from './db';
import { readVectors, vectorPath } from './spec';

interface Step {
  op: string;
  at?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
}

interface RecordVector {
  name: string;
  about: string;
  tenant: string;
  key: string;
  steps: Step[];
  record: Record<string, string | null> | null;
}

const file = readVectors<RecordVector>('records-postgres.json');

let pool: Pool;
let store: PgStore & { drop(): Promise<void> };
let clock: Micros = 0n;

before(async () => {
  if (!file) return;
  pool = testPool();
  store = await freshStore(pool, 'records', { clock: () => clock });
});

after(async () => {
  if (!file) return;
  await store.drop();
  await pool.end();
});

const statusNames: Record<number, string> = {
  [Status.Acquired]: 'acquired',
  [Status.Held]: 'held',
  [Status.Completed]: 'completed',
  [Status.Indeterminate]: 'indeterminate',
  [Status.Free]: 'free',
};

function micros(iso: string): Micros {
  return BigInt(Date.parse(iso)) * 1000n;
}

/** The table's row as PostgreSQL's text of every column, in UTC. */
async function rowText(tenant: string, key: string): Promise<Record<string, string | null> | null> {
  const c = await pool.connect();
  try {
    await c.query(`SET TIME ZONE 'UTC'`);
    const cols = (
      await c.query(
        `SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`,
        [store.schema, store.table],
      )
    ).rows.map((r) => r.column_name as string);
    const res = await c.query({
      text: `SELECT ${cols.map((n) => `"${n}"::text AS "${n}"`).join(', ')} FROM "${store.schema}"."${store.table}" WHERE tenant = $1 AND key = $2`,
      values: [tenant, key],
    });
    return res.rows.length ? (res.rows[0] as Record<string, string | null>) : null;
  } finally {
    c.release();
  }
}

test('records-postgres.json', { skip: file ? false : `no ${vectorPath('records-postgres.json')}` }, async (t) => {
  for (const v of file!.vectors) {
    const skip = v.steps.some((s) => s.op === 'resolve') ? 'a person\'s decision (resolve) is the Go operator\'s, not this package\'s' : false;
    await t.test(v.name, { skip }, async () => {
      const tokens = new Map<string, bigint>();
      const token = (ref: unknown): bigint => {
        const s = String(ref);
        const m = /^\{\{(token\d+)\}\}$/.exec(s);
        if (!m) return BigInt(s);
        let tok = tokens.get(m[1]);
        if (tok === undefined) {
          // A token no claim answered with: another token than any record's.
          tok = 4242424242n + BigInt(tokens.size);
          tokens.set(m[1], tok);
        }
        return tok;
      };
      const bindOrCheck = (ref: unknown, got: bigint) => {
        const m = /^\{\{(token\d+)\}\}$/.exec(String(ref));
        if (!m) return assert.equal(got, BigInt(String(ref)));
        const have = tokens.get(m[1]);
        if (have === undefined) tokens.set(m[1], got);
        else assert.equal(got, have, `token ${m[1]}`);
      };
      for (const [i, s] of v.steps.entries()) {
        const where = `step ${i} (${s.op})`;
        if (s.at) clock = micros(s.at);
        const p = s.params ?? {};
        const want = s.result ?? {};
        let res: Result | undefined;
        let leaseUntil: Micros | undefined;
        let err: unknown;
        try {
          switch (s.op) {
            case 'advance':
              if (!s.at) clock += BigInt(p.ms as number) * 1000n;
              continue;
            case 'claim': {
              const o = (p.origin ?? {}) as Record<string, unknown>;
              res = await store.claim({
                tenant: v.tenant,
                key: v.key,
                holder: String(p.holder),
                leaseMs: p.lease_ms as number,
                supersede: p.supersede !== undefined ? token(p.supersede) : 0n,
                check: (p.check as string) ?? '',
                retentionMs: (p.retention_ms as number) ?? 0,
                origin: {
                  workflowId: (o.workflow_id as string) ?? '',
                  runId: (o.run_id as string) ?? '',
                  activityType: (o.activity_type as string) ?? '',
                  activityId: (o.activity_id as string) ?? '',
                  attempt: (o.attempt as number) ?? 0,
                },
              });
              break;
            }
            case 'complete':
              await store.complete(v.tenant, v.key, token(p.token), Buffer.from(String(p.outcome_hex ?? ''), 'hex'));
              break;
            case 'release':
              await store.release(v.tenant, v.key, token(p.token));
              break;
            case 'mark_indeterminate':
              await store.markIndeterminate(v.tenant, v.key, token(p.token), String(p.reason));
              break;
            case 'renew':
              leaseUntil = await store.renew(v.tenant, v.key, token(p.token), p.lease_ms as number);
              break;
            default:
              assert.fail(`${where}: unknown op`);
          }
        } catch (e) {
          err = e;
        }
        if (want.error !== undefined) {
          assert.equal(want.error, 'not_holder', `${where}: unknown error class`);
          assert.ok(err instanceof NotHolderError, `${where}: want not_holder, got ${String(err)}`);
          continue;
        }
        if (err) throw err;
        if (res) {
          assert.equal(statusNames[res.status], want.status, where);
          if (want.token !== undefined) bindOrCheck(want.token, res.record!.token);
          if (want.lease_expired !== undefined) assert.equal(res.leaseExpired, want.lease_expired, where);
          if (want.outcome_hex !== undefined) {
            assert.equal(Buffer.from(res.record!.outcome ?? []).toString('hex'), want.outcome_hex, where);
          }
        }
        if (want.lease_until !== undefined) assert.equal(leaseUntil, micros(String(want.lease_until)), where);
      }
      const got = await rowText(v.tenant, v.key);
      if (v.record === null) {
        assert.equal(got, null);
        return;
      }
      const wantRow: Record<string, string | null> = {};
      for (const [col, val] of Object.entries(v.record)) {
        const m = val === null ? null : /^\{\{(token\d+)\}\}$/.exec(val);
        wantRow[col] = m ? String(tokens.get(m[1])) : val;
      }
      assert.deepEqual(got, wantRow);
    });
  }
});
