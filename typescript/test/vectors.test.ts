// The specification's vectors of the canonical encoding, keys and checks:
// the Go code wrote them; this package must give the same bytes.

import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { EncodingError, JsonNumber, canonical, parseJson } from '../src/canonical';
import { KeyInputError, MissingArgumentError, Secret, ValueError, deriveCheck, deriveKey, keyBytes } from '../src/keys';
import { readVectors, vectorPath } from './spec';

/** Reads value_json as the vector's "numbers" mode says: float64 (JSON.parse's numbers) or exact. */
function readValue(text: string, numbers: string): unknown {
  const v = parseJson(text, { lastMemberWins: numbers !== 'exact' });
  return numbers === 'exact' ? v : toFloat(v);
}

function toFloat(v: unknown): unknown {
  if (v instanceof JsonNumber) return Number(v.text);
  if (Array.isArray(v)) return v.map(toFloat);
  if (v !== null && typeof v === 'object') {
    const o: Record<string, unknown> = Object.create(null);
    for (const [k, x] of Object.entries(v)) o[k] = toFloat(x);
    return o;
  }
  return v;
}

/** The error class a thrown error stands for, as the vectors name them. */
function errorClass(e: unknown): string {
  if (e instanceof ValueError) return e.cause.class;
  if (e instanceof EncodingError) return e.class;
  if (e instanceof MissingArgumentError) return 'missing-argument';
  if (e instanceof KeyInputError) return 'invalid-input';
  throw e;
}

function secretOf(s: { generation: number; secret_hex: string } | null): Secret | null {
  return s ? new Secret(s.generation, Buffer.from(s.secret_hex, 'hex')) : null;
}

interface CanonicalVector {
  name: string;
  numbers: string;
  value_json: string;
  canonical_hex?: string;
  error?: string;
}

const canonicalFile = readVectors<CanonicalVector>('canonical.json');
test('canonical.json', { skip: canonicalFile ? false : `no ${vectorPath('canonical.json')}` }, async (t) => {
  for (const v of canonicalFile!.vectors) {
    await t.test(v.name, () => {
      let got: string;
      try {
        got = Buffer.from(canonical(readValue(v.value_json, v.numbers))).toString('hex');
      } catch (e) {
        assert.equal(errorClass(e), v.error, String(e));
        return;
      }
      assert.equal(v.error, undefined, `encoded ${got} where the vector wants the error ${v.error}`);
      assert.equal(got, v.canonical_hex);
    });
  }
});

interface KeyVector {
  name: string;
  tenant: string;
  run: string;
  activity: string;
  numbers: string;
  arguments_json: string;
  key_arguments: string[];
  secret: { generation: number; secret_hex: string } | null;
  encoding_hex?: string;
  key?: string;
  error?: string;
}

const keysFile = readVectors<KeyVector>('keys.json');
test('keys.json', { skip: keysFile ? false : `no ${vectorPath('keys.json')}` }, async (t) => {
  for (const v of keysFile!.vectors) {
    await t.test(v.name, () => {
      const input = {
        tenant: v.tenant,
        run: v.run,
        activity: v.activity,
        arguments: readValue(v.arguments_json, v.numbers) as Record<string, unknown>,
        keyArguments: v.key_arguments,
        secret: secretOf(v.secret),
      };
      let key: string;
      try {
        key = deriveKey(input);
      } catch (e) {
        assert.equal(errorClass(e), v.error, String(e));
        return;
      }
      assert.equal(v.error, undefined, `derived ${key} where the vector wants the error ${v.error}`);
      if (v.encoding_hex !== undefined) assert.equal(Buffer.from(keyBytes(input)).toString('hex'), v.encoding_hex);
      assert.equal(key, v.key);
    });
  }
});

interface CheckVector {
  name: string;
  tenant: string;
  run: string;
  activity: string;
  numbers: string;
  arguments_json: string;
  check_arguments: string[];
  secret: { generation: number; secret_hex: string } | null;
  check?: string;
  error?: string;
}

const checksFile = readVectors<CheckVector>('checks.json');
test('checks.json', { skip: checksFile ? false : `no ${vectorPath('checks.json')}` }, async (t) => {
  for (const v of checksFile!.vectors) {
    await t.test(v.name, () => {
      let check: string;
      try {
        check = deriveCheck({
          tenant: v.tenant,
          run: v.run,
          activity: v.activity,
          arguments: readValue(v.arguments_json, v.numbers) as Record<string, unknown>,
          names: v.check_arguments,
          secret: secretOf(v.secret),
        });
      } catch (e) {
        assert.equal(errorClass(e), v.error, String(e));
        return;
      }
      assert.equal(v.error, undefined, `derived ${check} where the vector wants the error ${v.error}`);
      assert.equal(check, v.check);
    });
  }
});
