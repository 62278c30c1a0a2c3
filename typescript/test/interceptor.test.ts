// The interceptor on the real PostgreSQL, driven with activity contexts of
// the test's own: every body books into a ledger the test owns, so what
// ran is counted, not assumed.

import { after, before, describe, test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { Pool } from 'pg';
import type { Context } from '@temporalio/activity';
import { ApplicationFailure, RawValue, defaultPayloadConverter } from '@temporalio/common';
import { Kind, declare, effectful, idempotent, readOnly } from '../src/declare';
import { noEffectError } from '../src/errors';
import { KEY_SECRET_HEADER, RUN_SCOPE_HEADER, TENANT_HEADER, idempotencyInterceptors, type IdempotencyOptions } from '../src/interceptor';
import { type PgStore, State } from '../src/pgstore';
import { freshStore, testPool } from './db';

let pool: Pool;
let store: PgStore & { drop(): Promise<void> };

before(async () => {
  pool = testPool();
  store = await freshStore(pool, 'interceptor', { pollMs: 10, maxPollMs: 50 });
});

after(async () => {
  await store.drop();
  await pool.end();
});

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let seq = 0;

interface Call {
  activity: string;
  args: unknown[];
  run?: string;
  tenant?: string | null;
  headers?: Record<string, unknown>;
  activityId?: string;
  attempt?: number;
}

/** An activity context of the test's own. */
function fakeContext(c: Call, heartbeats: { n: number }): Context {
  const ac = new AbortController();
  return {
    info: {
      activityId: c.activityId ?? `act-${seq++}`,
      activityType: c.activity,
      attempt: c.attempt ?? 1,
      isLocal: false,
      workflowExecution: { workflowId: 'wf-1', runId: c.run ?? 'run-1' },
      namespace: 'default',
      taskQueue: 'q',
      heartbeatTimeoutMs: undefined,
    },
    heartbeat: () => {
      heartbeats.n++;
    },
    cancellationSignal: ac.signal,
  } as unknown as Context;
}

function runner(extra: Partial<IdempotencyOptions> = {}) {
  const factory = idempotencyInterceptors({
    store,
    leaseMs: 2000,
    waitHeartbeatMs: 50,
    identity: 'ts-test',
    declarations: [
      effectful('Book', ['flight', 'request_id'], 'flight'),
      idempotent('Sync', ['account'], 'account'),
      readOnly('Read'),
      declare('Charge', { kind: Kind.EFFECTFUL, keyArguments: ['order'], checkArguments: ['amount'] }),
      declare('Pay', { kind: Kind.EFFECTFUL, params: ['order'], keyArguments: ['order'], definiteErrors: ['CardDeclined'] }),
    ],
    ...extra,
  });
  const heartbeats = { n: 0 };
  const call = async (c: Call, body: (...args: unknown[]) => Promise<unknown>) => {
    const headers: Record<string, unknown> = { ...(c.headers ?? {}) };
    if (c.tenant !== null) headers[TENANT_HEADER] = defaultPayloadConverter.toPayload(c.tenant ?? 'acme');
    const inbound = factory(fakeContext(c, heartbeats)).inbound!;
    const out = await inbound.execute!({ args: c.args, headers: headers as never }, async (input) => body(...input.args));
    return out instanceof RawValue ? defaultPayloadConverter.fromPayload(out.payload) : out;
  };
  return { call, heartbeats };
}

function failureOf(e: unknown): ApplicationFailure {
  assert.ok(e instanceof ApplicationFailure, `want an ApplicationFailure, got ${String(e)}`);
  return e;
}

/** The details of an indeterminate error, as Go reads them (JSON). */
function detailsOf(f: ApplicationFailure): Record<string, unknown> {
  const d = f.details![0];
  assert.ok(d instanceof RawValue);
  return JSON.parse(Buffer.from(d.payload.data!).toString()) as Record<string, unknown>;
}

describe('EFFECTFUL', () => {
  test('books once: a duplicate is answered from the record', async () => {
    const { call } = runner();
    const ledger: string[] = [];
    const body = async (flight: unknown) => {
      ledger.push(String(flight));
      return { booking: `B-${String(flight)}`, seats: [1, 2] };
    };
    const run = `run-${seq++}`;
    const first = await call({ activity: 'Book', args: ['BA117', 'r-1'], run }, body);
    const second = await call({ activity: 'Book', args: ['BA117', 'r-2'], run }, body);
    assert.deepEqual(first, { booking: 'B-BA117', seats: [1, 2] });
    assert.deepEqual(second, first);
    assert.deepEqual(ledger, ['BA117']);
    const third = await call({ activity: 'Book', args: ['BA118', 'r-1'], run }, body);
    assert.deepEqual(third, { booking: 'B-BA118', seats: [1, 2] });
    assert.deepEqual(ledger, ['BA117', 'BA118']);
  });

  test('the key is the one Go derives, and the record holds it completed', async () => {
    const { call } = runner();
    const run = `run-${seq++}`;
    await call({ activity: 'Book', args: ['BA117', 'r-1'], run }, async () => 'ok');
    const { deriveKey } = await import('../src/keys');
    const key = deriveKey({ tenant: 'acme', run, activity: 'Book', arguments: { flight: 'BA117' }, keyArguments: ['flight'] });
    const rec = await store.lookup('acme', key);
    assert.equal(rec?.state, State.Completed);
    assert.equal(rec?.origin.activityType, 'Book');
    assert.match(rec!.holder, /^[0-9a-f]{16}:1:ts-test$/);
  });

  test('a concurrent duplicate waits, heartbeating, and gets the first one\'s answer', async () => {
    const { call, heartbeats } = runner();
    const ledger: string[] = [];
    const body = async (flight: unknown) => {
      ledger.push(String(flight));
      await sleep(400);
      return 'booked';
    };
    const run = `run-${seq++}`;
    const a = call({ activity: 'Book', args: ['LH1', 'r'], run }, body);
    await sleep(50);
    const b = call({ activity: 'Book', args: ['LH1', 'r'], run }, body);
    assert.deepEqual(await Promise.all([a, b]), ['booked', 'booked']);
    assert.deepEqual(ledger, ['LH1']);
    assert.ok(heartbeats.n >= 2, `the waiter heartbeat ${heartbeats.n} times`);
  });

  test('the lease is renewed while the body runs: a duplicate waits past it', async () => {
    const { call } = runner({ leaseMs: 300 });
    const ledger: string[] = [];
    const body = async () => {
      ledger.push('x');
      await sleep(1000);
      return 1;
    };
    const run = `run-${seq++}`;
    const a = call({ activity: 'Book', args: ['AF1', 'r'], run }, body);
    await sleep(50);
    const b = call({ activity: 'Book', args: ['AF1', 'r'], run }, body);
    assert.deepEqual(await Promise.all([a, b]), [1, 1]);
    assert.equal(ledger.length, 1);
  });

  test('a failure after the body began is indeterminate: non-retryable, Go\'s type and details; a duplicate does not run', async () => {
    const { call } = runner();
    const ledger: string[] = [];
    const run = `run-${seq++}`;
    const err = await call({ activity: 'Book', args: ['UA9', 'r'], run }, async () => {
      ledger.push('UA9');
      throw new Error('connection reset after the charge');
    }).then(
      () => assert.fail('want an error'),
      (e) => e,
    );
    const f = failureOf(err);
    assert.equal(f.type, 'IndeterminateOutcomeError');
    assert.equal(f.nonRetryable, true);
    const d = detailsOf(f);
    assert.equal(d.reason, 'body_failed');
    assert.equal(d.body_entered, true);
    assert.equal(d.effect_may_have_landed, true);
    assert.equal(d.tenant, 'acme');
    assert.match(String(d.key), /^v1:[0-9a-f]{64}$/);
    assert.equal(typeof d.token, 'number'); // written as an integer (exact in the payload's text)
    const rec = await store.lookup('acme', String(d.key));
    assert.equal(rec?.state, State.Indeterminate);
    assert.match(rec!.reason, /^body_failed: connection reset/);
    // The token in the payload's text is the record's, to the last digit.
    const text = Buffer.from((f.details![0] as RawValue).payload.data!).toString();
    assert.ok(text.includes(`"token":${rec!.token}`), text);

    const again = await call({ activity: 'Book', args: ['UA9', 'r'], run }, async () => {
      ledger.push('again');
      return 'no';
    }).then(
      () => assert.fail('want an error'),
      (e) => e,
    );
    const g = failureOf(again);
    assert.equal(g.type, 'IndeterminateOutcomeError');
    assert.equal(detailsOf(g).reason, 'recorded');
    assert.equal(detailsOf(g).body_entered, false);
    assert.deepEqual(ledger, ['UA9']);
  });

  test('a failure marked noEffect frees the key', async () => {
    const { call } = runner();
    const ledger: string[] = [];
    const run = `run-${seq++}`;
    await assert.rejects(
      call({ activity: 'Book', args: ['KL1', 'r'], run }, async () => {
        ledger.push('1');
        throw noEffectError(new Error('refused before sending'));
      }),
      /refused before sending/,
    );
    assert.equal(await call({ activity: 'Book', args: ['KL1', 'r'], run }, async () => (ledger.push('2'), 'ok')), 'ok');
    assert.deepEqual(ledger, ['1', '2']);
  });

  test('a holder whose lease ran out: the key is marked indeterminate, the body not entered', async () => {
    const { call } = runner();
    const run = `run-${seq++}`;
    const { deriveKey } = await import('../src/keys');
    const key = deriveKey({ tenant: 'acme', run, activity: 'Book', arguments: { flight: 'QF1' }, keyArguments: ['flight'] });
    await store.claim({
      tenant: 'acme',
      key,
      holder: 'gone:1:worker',
      leaseMs: 50,
      origin: { workflowId: 'wf', runId: run, activityType: 'Book', activityId: '9', attempt: 1 },
    });
    await sleep(100);
    const ledger: string[] = [];
    const err = await call({ activity: 'Book', args: ['QF1', 'r'], run }, async () => ledger.push('ran')).then(
      () => assert.fail('want an error'),
      (e) => e,
    );
    const f = failureOf(err);
    assert.equal(f.type, 'IndeterminateOutcomeError');
    assert.equal(detailsOf(f).reason, 'holder_lost');
    assert.equal(detailsOf(f).body_entered, false);
    assert.equal((await store.lookup('acme', key))?.state, State.Indeterminate);
    assert.deepEqual(ledger, []);
  });

  test('a definite failure is recorded and answered to every duplicate', async () => {
    const { call } = runner();
    const run = `run-${seq++}`;
    const ledger: string[] = [];
    const body = async () => {
      ledger.push('pay');
      throw ApplicationFailure.create({ message: 'card declined', type: 'CardDeclined', nonRetryable: true, details: ['insufficient funds'] });
    };
    await assert.rejects(call({ activity: 'Pay', args: ['o-1'], run }, body), /card declined/);
    const err = await call({ activity: 'Pay', args: ['o-1'], run }, body).then(
      () => assert.fail('want an error'),
      (e) => e,
    );
    const f = failureOf(err);
    assert.equal(f.type, 'CardDeclined');
    assert.equal(f.message, 'card declined');
    assert.deepEqual(f.details, ['insufficient funds']);
    assert.deepEqual(ledger, ['pay']);
  });

  test('checked arguments that differ from the record\'s are refused', async () => {
    const { call } = runner();
    const run = `run-${seq++}`;
    assert.equal(await call({ activity: 'Charge', args: [{ order: 'o-7', amount: 100 }], run }, async () => 'charged'), 'charged');
    assert.equal(await call({ activity: 'Charge', args: [{ order: 'o-7', amount: 100.0 }], run }, async () => 'twice'), 'charged');
    const err = await call({ activity: 'Charge', args: [{ order: 'o-7', amount: 200 }], run }, async () => 'twice').then(
      () => assert.fail('want an error'),
      (e) => e,
    );
    const f = failureOf(err);
    assert.equal(f.type, 'IdempotencyArgumentsMismatch');
    assert.equal(f.nonRetryable, true);
  });

  test('the run-scope header scopes the key', async () => {
    const { call } = runner();
    const ledger: string[] = [];
    const body = async () => (ledger.push('x'), 'ok');
    const scope = `orig-${seq++}`;
    const headers = { [RUN_SCOPE_HEADER]: defaultPayloadConverter.toPayload(scope) };
    await call({ activity: 'Book', args: ['NZ1', 'r'], run: `reset-a-${seq}`, headers }, body);
    await call({ activity: 'Book', args: ['NZ1', 'r'], run: `reset-b-${seq}`, headers }, body);
    assert.deepEqual(ledger, ['x']);
  });
});

describe('IDEMPOTENT', () => {
  test('a failure frees the key: the retry runs the body', async () => {
    const { call } = runner();
    const run = `run-${seq++}`;
    const ledger: number[] = [];
    await assert.rejects(
      call({ activity: 'Sync', args: ['acc-1'], run }, async () => {
        ledger.push(1);
        throw new Error('flaky');
      }),
      /flaky/,
    );
    assert.equal(await call({ activity: 'Sync', args: ['acc-1'], run }, async () => (ledger.push(2), 'synced')), 'synced');
    assert.equal(await call({ activity: 'Sync', args: ['acc-1'], run }, async () => (ledger.push(3), 'again')), 'synced');
    assert.deepEqual(ledger, [1, 2]);
  });

  test('takes over a holder whose lease ran out and runs the body', async () => {
    const { call } = runner();
    const run = `run-${seq++}`;
    const { deriveKey } = await import('../src/keys');
    const key = deriveKey({ tenant: 'acme', run, activity: 'Sync', arguments: { account: 'acc-9' }, keyArguments: ['account'] });
    await store.claim({
      tenant: 'acme',
      key,
      holder: 'gone:1:worker',
      leaseMs: 50,
      origin: { workflowId: 'wf', runId: run, activityType: 'Sync', activityId: '9', attempt: 1 },
    });
    await sleep(100);
    assert.equal(await call({ activity: 'Sync', args: ['acc-9'], run }, async () => 'ran'), 'ran');
    assert.equal((await store.lookup('acme', key))?.state, State.Completed);
  });
});

describe('refusals', () => {
  test('READ_ONLY and undeclared activities run untouched', async () => {
    const { call } = runner();
    const ledger: string[] = [];
    await call({ activity: 'Read', args: [1] }, async () => ledger.push('r'));
    await call({ activity: 'Read', args: [1] }, async () => ledger.push('r'));
    await call({ activity: 'Other', args: [1], tenant: null }, async () => ledger.push('o'));
    assert.deepEqual(ledger, ['r', 'r', 'o']);
  });

  test('no tenant: non-retryable IdempotencyNoTenant, nothing run', async () => {
    const { call } = runner();
    const err = await call({ activity: 'Book', args: ['X', 'r'], tenant: null }, async () => assert.fail('ran')).then(
      () => assert.fail('want an error'),
      (e) => e,
    );
    const f = failureOf(err);
    assert.equal(f.type, 'IdempotencyNoTenant');
    assert.equal(f.nonRetryable, true);
  });

  test('a key-secret header: refused, retryable, with IdempotencyUnknownKeySecret', async () => {
    const { call } = runner();
    const headers = { [KEY_SECRET_HEADER]: defaultPayloadConverter.toPayload(1) };
    const err = await call({ activity: 'Book', args: ['X', 'r'], headers }, async () => assert.fail('ran')).then(
      () => assert.fail('want an error'),
      (e) => e,
    );
    const f = failureOf(err);
    assert.equal(f.type, 'IdempotencyUnknownKeySecret');
    assert.equal(f.nonRetryable, false);
  });

  test('EFFECTFUL without its key argument: indeterminate with nothing run (key_not_derivable)', async () => {
    const { call } = runner();
    const err = await call({ activity: 'Book', args: [] }, async () => assert.fail('ran')).then(
      () => assert.fail('want an error'),
      (e) => e,
    );
    const f = failureOf(err);
    assert.equal(f.type, 'IndeterminateOutcomeError');
    assert.equal(detailsOf(f).reason, 'key_not_derivable');
    assert.equal(detailsOf(f).effect_may_have_landed, false);
  });

  test('IDEMPOTENT with an unencodable key argument: retryable IdempotencyKeyNotDerivable', async () => {
    const { call } = runner();
    const err = await call({ activity: 'Sync', args: [2 ** 60] }, async () => assert.fail('ran')).then(
      () => assert.fail('want an error'),
      (e) => e,
    );
    const f = failureOf(err);
    assert.equal(f.type, 'IdempotencyKeyNotDerivable');
    assert.equal(f.nonRetryable, false);
  });
});
