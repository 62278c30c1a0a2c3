// The Go store contract's cases that apply to this store
// (store/storetest: claim, fence, wait, outcome, check), on the real
// PostgreSQL, with a clock the test moves.

import { after, before, describe, test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { Pool } from 'pg';
import { type ClaimParams, type Micros, NotHolderError, type PgStore, State, Status } from '../src/pgstore';
import { freshStore, testPool } from './db';

const LEASE = 10_000; // ms
const SECOND = 1_000_000n; // µs

let pool: Pool;
let store: PgStore & { drop(): Promise<void> };
let clock: Micros = 1_800_000_000n * SECOND; // 2027-01-15, far from the tables' real times
const tenant = 'acme';

function params(key: string, extra: Partial<ClaimParams> = {}): ClaimParams {
  return {
    tenant,
    key,
    holder: 'h1',
    leaseMs: LEASE,
    origin: { workflowId: 'wf', runId: 'run', activityType: 'Book', activityId: '1', attempt: 1 },
    ...extra,
  };
}

async function acquire(key: string, extra: Partial<ClaimParams> = {}) {
  const r = await store.claim(params(key, extra));
  assert.equal(r.status, Status.Acquired);
  return r.record!;
}

before(async () => {
  pool = testPool();
  store = await freshStore(pool, 'contract', { clock: () => clock, pollMs: 10, maxPollMs: 50 });
});

after(async () => {
  await store.drop();
  await pool.end();
});

let n = 0;
const k = (name: string) => `${name}-${n++}`;

describe('Claim', () => {
  test('FreshClaimAcquires', async () => {
    const key = k('fresh');
    const rec = await acquire(key);
    assert.equal(rec.state, State.Pending);
    assert.equal(rec.holder, 'h1');
    assert.ok(rec.token > 0n);
    assert.equal(rec.leaseUntil, clock + BigInt(LEASE) * 1000n);
    assert.equal(rec.createdAt, clock);
  });

  test('SecondClaimSeesHeld', async () => {
    const key = k('second');
    const first = await acquire(key);
    const r = await store.claim(params(key, { holder: 'h2' }));
    assert.equal(r.status, Status.Held);
    assert.equal(r.leaseExpired, false);
    assert.equal(r.record!.token, first.token);
  });

  test('ConcurrentClaimsOneWinner', async () => {
    const key = k('race');
    const rs = await Promise.all(Array.from({ length: 8 }, (_, i) => store.claim(params(key, { holder: `h${i}` }))));
    assert.equal(rs.filter((r) => r.status === Status.Acquired).length, 1);
    assert.equal(rs.filter((r) => r.status === Status.Held).length, 7);
  });

  test('ClaimOnCompletedSeesOutcome', async () => {
    const key = k('done');
    const rec = await acquire(key);
    await store.complete(tenant, key, rec.token, Buffer.from('out'));
    const r = await store.claim(params(key));
    assert.equal(r.status, Status.Completed);
    assert.equal(Buffer.from(r.record!.outcome!).toString(), 'out');
  });

  test('ClaimOnIndeterminateSeesReason', async () => {
    const key = k('ind');
    const rec = await acquire(key);
    await store.markIndeterminate(tenant, key, rec.token, 'body_failed: boom');
    const r = await store.claim(params(key));
    assert.equal(r.status, Status.Indeterminate);
    assert.equal(r.record!.reason, 'body_failed: boom');
  });

  test('ReleaseFreesKey', async () => {
    const key = k('rel');
    const rec = await acquire(key);
    await store.release(tenant, key, rec.token);
    await acquire(key);
  });

  test('LeaseExpiredIsHeldNotAcquired', async () => {
    const key = k('lease');
    await acquire(key);
    clock += BigInt(LEASE) * 1000n;
    const r = await store.claim(params(key, { holder: 'h2' }));
    assert.equal(r.status, Status.Held);
    assert.equal(r.leaseExpired, true);
  });

  test('SupersedeRightTokenTakesOver', async () => {
    const key = k('takeover');
    const rec = await acquire(key);
    clock += BigInt(LEASE) * 1000n;
    const r = await store.claim(params(key, { holder: 'h2', supersede: rec.token }));
    assert.equal(r.status, Status.Acquired);
    assert.notEqual(r.record!.token, rec.token);
    assert.equal(r.record!.holder, 'h2');
    await assert.rejects(store.complete(tenant, key, rec.token, null), NotHolderError);
  });

  test('SupersedeWithinLeaseTakesOver', async () => {
    const key = k('within');
    const rec = await acquire(key);
    const r = await store.claim(params(key, { holder: 'h2', supersede: rec.token }));
    assert.equal(r.status, Status.Acquired);
  });

  test('SupersedeWrongTokenIsHeld', async () => {
    const key = k('wrongtok');
    const rec = await acquire(key);
    const r = await store.claim(params(key, { holder: 'h2', supersede: rec.token + 1n }));
    assert.equal(r.status, Status.Held);
    assert.equal(r.record!.token, rec.token);
  });

  test('SupersedeOnFreeKeyAcquires', async () => {
    await acquire(k('free'), { supersede: 42n });
  });

  test('SupersedeOnCompletedSeesOutcome', async () => {
    const key = k('supdone');
    const rec = await acquire(key);
    await store.complete(tenant, key, rec.token, Buffer.from('x'));
    const r = await store.claim(params(key, { supersede: rec.token }));
    assert.equal(r.status, Status.Completed);
  });

  test('SupersedeOnIndeterminateSeesIndeterminate', async () => {
    const key = k('supind');
    const rec = await acquire(key);
    await store.markIndeterminate(tenant, key, rec.token, 'r');
    const r = await store.claim(params(key, { supersede: rec.token }));
    assert.equal(r.status, Status.Indeterminate);
  });

  test('KeysAreIndependent', async () => {
    await acquire(k('a'));
    await acquire(k('b'));
  });

  test('ExpiredRecordIsFree', async () => {
    const key = k('expired');
    const rec = await acquire(key);
    await store.complete(tenant, key, rec.token, null);
    clock += 25n * 3600n * SECOND; // past the 24 h TTL
    await acquire(key);
  });
});

describe('Fence', () => {
  const ops: Array<[string, (key: string, token: bigint) => Promise<unknown>]> = [
    ['Complete', (key, token) => store.complete(tenant, key, token, Buffer.from('o'))],
    ['Release', (key, token) => store.release(tenant, key, token)],
    ['MarkIndeterminate', (key, token) => store.markIndeterminate(tenant, key, token, 'r')],
    ['Renew', (key, token) => store.renew(tenant, key, token, LEASE)],
  ];
  const situations: Array<[string, (key: string) => Promise<bigint>]> = [
    ['WrongToken', async (key) => (await acquire(key)).token + 1n],
    ['NeverClaimed', async () => 7n],
    [
      'AfterRelease',
      async (key) => {
        const r = await acquire(key);
        await store.release(tenant, key, r.token);
        return r.token;
      },
    ],
    [
      'AfterComplete',
      async (key) => {
        const r = await acquire(key);
        await store.complete(tenant, key, r.token, null);
        return r.token;
      },
    ],
    [
      'AfterMarkIndeterminate',
      async (key) => {
        const r = await acquire(key);
        await store.markIndeterminate(tenant, key, r.token, 'r');
        return r.token;
      },
    ],
    [
      'AfterSupersede',
      async (key) => {
        const r = await acquire(key);
        await acquire(key, { supersede: r.token, holder: 'h2' });
        return r.token;
      },
    ],
    [
      'OtherKeysToken',
      async (key) => {
        await acquire(key);
        return (await acquire(key + '-other')).token;
      },
    ],
  ];
  for (const [opName, op] of ops) {
    for (const [sitName, sit] of situations) {
      test(`${opName}/${sitName}`, async () => {
        const key = k(`fence-${opName}-${sitName}`);
        const token = await sit(key);
        const before = await store.lookup(tenant, key);
        await assert.rejects(op(key, token), NotHolderError);
        assert.deepEqual(await store.lookup(tenant, key), before, 'a refused write changed the record');
      });
    }
  }

  test('RenewExtendsTheLease', async () => {
    const key = k('renew');
    const rec = await acquire(key);
    clock += 5n * SECOND;
    const until = await store.renew(tenant, key, rec.token, LEASE);
    assert.equal(until, clock + BigInt(LEASE) * 1000n);
    clock += 6n * SECOND; // past the first lease, within the renewed one
    const r = await store.claim(params(key, { holder: 'h2' }));
    assert.equal(r.status, Status.Held);
    assert.equal(r.leaseExpired, false);
  });
});

describe('Wait', () => {
  test('CompletedByHolder', async () => {
    const key = k('wait-done');
    const rec = await acquire(key);
    const w = store.wait(tenant, key, rec.token, 5000);
    setTimeout(() => void store.complete(tenant, key, rec.token, Buffer.from('v')), 50);
    const r = await w;
    assert.equal(r!.status, Status.Completed);
    assert.equal(Buffer.from(r!.record!.outcome!).toString(), 'v');
  });

  test('ManyWaitersAllWake', async () => {
    const key = k('wait-many');
    const rec = await acquire(key);
    const ws = Array.from({ length: 5 }, () => store.wait(tenant, key, rec.token, 5000));
    setTimeout(() => void store.complete(tenant, key, rec.token, null), 50);
    for (const r of await Promise.all(ws)) assert.equal(r!.status, Status.Completed);
  });

  test('FreeAfterRelease', async () => {
    const key = k('wait-rel');
    const rec = await acquire(key);
    const w = store.wait(tenant, key, rec.token, 5000);
    setTimeout(() => void store.release(tenant, key, rec.token), 50);
    assert.equal((await w)!.status, Status.Free);
  });

  test('IndeterminateAfterMark', async () => {
    const key = k('wait-mark');
    const rec = await acquire(key);
    const w = store.wait(tenant, key, rec.token, 5000);
    setTimeout(() => void store.markIndeterminate(tenant, key, rec.token, 'r'), 50);
    assert.equal((await w)!.status, Status.Indeterminate);
  });

  test('HeldWhenLeaseRunsOut', async () => {
    const key = k('wait-lease');
    const rec = await acquire(key);
    const w = store.wait(tenant, key, rec.token, 5000);
    setTimeout(() => (clock += BigInt(LEASE) * 1000n), 50);
    const r = (await w)!;
    assert.equal(r.status, Status.Held);
    assert.equal(r.leaseExpired, true);
  });

  test('HeldWhenTakenOver', async () => {
    const key = k('wait-takeover');
    const rec = await acquire(key);
    const w = store.wait(tenant, key, rec.token, 5000);
    setTimeout(() => void store.claim(params(key, { holder: 'h2', supersede: rec.token })), 50);
    const r = (await w)!;
    assert.equal(r.status, Status.Held);
    assert.notEqual(r.record!.token, rec.token);
  });

  test('ReturnsAtOnceWhenNotPendingUnderToken', async () => {
    assert.equal((await store.wait(tenant, k('never'), 7n, 5000))!.status, Status.Free);
  });

  test('TimesOut', async () => {
    const key = k('wait-timeout');
    const rec = await acquire(key);
    assert.equal(await store.wait(tenant, key, rec.token, 100), undefined);
  });
});

describe('Outcome', () => {
  const big = Buffer.alloc(1 << 20);
  for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff;
  const cases: Array<[string, Uint8Array | null, Buffer]> = [
    ['AllByteValues', Buffer.from(Array.from({ length: 256 }, (_, i) => i)), Buffer.from(Array.from({ length: 256 }, (_, i) => i))],
    ['NULBytes', Buffer.from('\x00\x00seat\x0012A\x00', 'binary'), Buffer.from('\x00\x00seat\x0012A\x00', 'binary')],
    ['InvalidUTF8', Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0x80]), Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0x80])],
    ['Text', Buffer.from('{"seat":"12A","price":"€120"}'), Buffer.from('{"seat":"12A","price":"€120"}')],
    ['OneMiB', big, big],
    ['Nil', null, Buffer.alloc(0)],
    ['Empty', new Uint8Array(), Buffer.alloc(0)],
  ];
  for (const [name, outcome, want] of cases) {
    test(name, async () => {
      const key = k('outcome');
      const rec = await acquire(key);
      await store.complete(tenant, key, rec.token, outcome);
      const got = await store.lookup(tenant, key);
      assert.ok(got!.outcome);
      assert.ok(Buffer.from(got!.outcome!).equals(want));
    });
  }
});

describe('Check', () => {
  const check = 'c1:0011223344556677:' + 'ab'.repeat(32);
  test('KeptThroughCompletion', async () => {
    const key = k('check');
    const rec = await acquire(key, { check });
    assert.equal(rec.check, check);
    await store.complete(tenant, key, rec.token, null);
    assert.equal((await store.lookup(tenant, key))!.check, check);
  });
  test('NoneIsEmpty', async () => {
    assert.equal((await acquire(k('nocheck'))).check, '');
  });
  test('HeldAnswersWithIt', async () => {
    const key = k('check-held');
    await acquire(key, { check });
    assert.equal((await store.claim(params(key)))!.record!.check, check);
  });
  test('IndeterminateKeepsIt', async () => {
    const key = k('check-ind');
    const rec = await acquire(key, { check });
    await store.markIndeterminate(tenant, key, rec.token, 'r');
    assert.equal((await store.lookup(tenant, key))!.check, check);
  });
  test('TakeoverReplacesIt', async () => {
    const key = k('check-takeover');
    const rec = await acquire(key, { check });
    const other = 'c1:0011223344556677:' + 'cd'.repeat(32);
    const r = await acquire(key, { check: other, supersede: rec.token });
    assert.equal(r.check, other);
  });
});

describe('Retention', () => {
  test('OwnRetentionKeepsTheRecord', async () => {
    const key = k('retention');
    const rec = await acquire(key, { retentionMs: 48 * 3600 * 1000 });
    assert.equal(rec.retentionUs, 48n * 3600n * SECOND);
    await store.complete(tenant, key, rec.token, null);
    clock += 25n * 3600n * SECOND; // past the store's TTL, within the record's own
    assert.equal((await store.claim(params(key))).status, Status.Completed);
  });
  test('IndeterminateNeverExpires', async () => {
    const key = k('ind-keeps');
    const rec = await acquire(key);
    await store.markIndeterminate(tenant, key, rec.token, 'r');
    clock += 400n * 24n * 3600n * SECOND;
    assert.equal((await store.claim(params(key))).status, Status.Indeterminate);
  });
});
