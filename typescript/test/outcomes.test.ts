// spec/vectors/outcomes.json: outcomes as the Go dispatcher records them.
// Each must decode here: a value's payload handed back byte for byte (the
// worker passes it through), a failure as the error Go recorded; and what
// this package records for the same value must decode to the same value.

import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { ApplicationFailure, defaultPayloadConverter } from '@temporalio/common';
import { decodeOutcome, decodeOutcomeValue, encodeOutcome } from '../src/outcome';
import { readVectors, vectorPath } from './spec';

interface OutcomeVector {
  name: string;
  kind: 'value' | 'failure';
  value_json?: string;
  outcome_hex: string;
  payloads: Array<{ metadata: Record<string, string>; data_hex: string; data_text?: string }>;
  failure?: FailureShape;
}

interface FailureShape {
  message: string;
  source: string;
  type: string;
  non_retryable: boolean;
  details: unknown[];
  cause: FailureShape | null;
}

const file = readVectors<OutcomeVector>('outcomes.json');

function checkFailure(err: unknown, want: FailureShape, where: string): void {
  assert.ok(err instanceof ApplicationFailure, `${where}: want an ApplicationFailure, got ${String(err)}`);
  assert.equal(err.message, want.message, where);
  assert.equal(err.type ?? '', want.type, where);
  assert.equal(Boolean(err.nonRetryable), want.non_retryable, where);
  const details = want.details.map((d) => {
    const p = d as { data_text?: string; data_hex?: string };
    return p.data_text !== undefined ? JSON.parse(p.data_text) : d;
  });
  assert.deepEqual(err.details ?? [], details, where);
  if (want.cause) checkFailure(err.cause, want.cause, `${where} cause`);
  else assert.equal(err.cause, undefined, where);
}

test('outcomes.json', { skip: file ? false : `no ${vectorPath('outcomes.json')}` }, async (t) => {
  for (const v of file!.vectors) {
    await t.test(v.name, () => {
      const outcome = Buffer.from(v.outcome_hex, 'hex');
      const d = decodeOutcome(outcome);
      if (v.kind === 'failure') {
        assert.ok(d.failure, 'want a failure');
        checkFailure(d.failure, v.failure!, v.name);
        return;
      }
      if (v.payloads.length === 0) {
        assert.equal(d.payload, undefined);
        assert.equal(decodeOutcomeValue(outcome), undefined);
        assert.equal(encodeOutcome(undefined).length, 0, 'no result records an empty outcome');
        return;
      }
      const want = v.payloads[0];
      assert.ok(d.payload);
      assert.equal(Buffer.from(d.payload.data ?? []).toString('hex'), want.data_hex);
      for (const [k, val] of Object.entries(want.metadata)) {
        assert.equal(Buffer.from(d.payload.metadata![k]).toString(), val);
      }
      if (v.value_json !== undefined) {
        const value = JSON.parse(v.value_json);
        // binary/null (a nil pointer) reads as undefined here, null in Go.
        assert.deepEqual(decodeOutcomeValue(outcome) ?? null, value);
        // What this package records for the value decodes to it as well,
        // byte for byte where JSON gives it one spelling.
        const mine = encodeOutcome(value);
        assert.deepEqual(decodeOutcomeValue(mine) ?? null, value);
        if (Number.isSafeInteger(value) || typeof value !== 'object' || value === null) {
          if (!(typeof value === 'number' && !Number.isSafeInteger(value) && Number.isInteger(value))) {
            assert.equal(Buffer.from(mine).toString('hex'), v.outcome_hex, 'the same bytes as Go records');
          }
        }
      } else if (want.metadata.encoding === 'binary/plain') {
        const value = defaultPayloadConverter.fromPayload(d.payload) as Uint8Array;
        assert.equal(Buffer.from(value).toString('hex'), want.data_hex);
        assert.equal(Buffer.from(encodeOutcome(value)).toString('hex'), v.outcome_hex, 'the same bytes as Go records');
      }
    });
  }
});
