// Key derivation (v1:, k1:) and check digests (c1:, c2:), as the Go
// package keyspace derives them (derive.go, secret.go, check.go).

import { createHash, createHmac } from 'node:crypto';
import {
  ByteWriter,
  Encoder,
  EncodingError,
  TAG_ABSENT,
  TAG_OBJECT,
  TAG_OBJECT_END,
  compareUtf8,
  normalize,
  writeKey,
} from './canonical';

/** The version every unkeyed key starts with. */
export const VERSION = 'v1';
/** The version of a key derived under a secret. */
export const KEYED_VERSION = 'k1';
/** The version of an unkeyed check digest. */
export const CHECK_VERSION = 'c1';
/** The version of a check digest derived under a secret. */
export const KEYED_CHECK_VERSION = 'c2';
/** The fewest bytes a secret may have. */
export const MIN_SECRET_LENGTH = 32;
/** The largest generation a secret may have. */
export const MAX_SECRET_GENERATION = 1 << 20;

const DOMAIN = 'github.com/tesserix/idempotency/keyspace ' + VERSION;
const CHECK_DOMAIN = 'github.com/tesserix/idempotency/keyspace check ' + CHECK_VERSION;
const FINGERPRINT_INPUT = 'fingerprint of an idempotency key secret, layout 1';

/** KeyInputError is a malformed input (Go's keyspace.ErrInvalidInput). */
export class KeyInputError extends Error {
  constructor(readonly field: string, reason: string) {
    super(`idempotency: invalid input: ${field} ${reason}`);
    this.name = 'KeyInputError';
  }
}

/** MissingArgumentError: a key argument the call does not carry (Go's keyspace.ErrMissingArgument). */
export class MissingArgumentError extends Error {
  constructor(readonly argument: string) {
    super(`idempotency: key argument ${JSON.stringify(argument)} is missing from the arguments`);
    this.name = 'MissingArgumentError';
  }
}

/** ValueError: a key argument's value has no canonical form (Go's keyspace.ErrUnencodable). */
export class ValueError extends Error {
  constructor(readonly argument: string, readonly cause: EncodingError) {
    super(`idempotency: key argument ${JSON.stringify(argument)} cannot be encoded: ${cause.message}`);
    this.name = 'ValueError';
  }
}

/**
 * Secret is a deployment secret of a generation: keys and checks derived
 * under it are HMAC-SHA-256 (k1:, c2:). Its bytes are never printed.
 */
export class Secret {
  private readonly key: Buffer;

  /** A secret of generation (1 to 2^20) made of key (32 bytes or more). */
  constructor(readonly generation: number, key: Uint8Array) {
    if (!Number.isInteger(generation) || generation < 1 || generation > MAX_SECRET_GENERATION) {
      throw new KeyInputError('Secret.Generation', `want 1 to ${MAX_SECRET_GENERATION}, got ${generation}`);
    }
    if (key.length < MIN_SECRET_LENGTH) {
      throw new KeyInputError('Secret.Key', `want at least ${MIN_SECRET_LENGTH} bytes, got ${key.length}`);
    }
    this.key = Buffer.from(key);
  }

  /** The HMAC-SHA-256 of b under the secret. */
  sum(b: Uint8Array): Buffer {
    return createHmac('sha256', this.key).update(b).digest();
  }

  /** "f1:" and the hex of the HMAC of a fixed string: names the bytes without revealing them. */
  fingerprint(): string {
    return 'f1:' + this.sum(Buffer.from(FINGERPRINT_INPUT)).toString('hex');
  }

  /** Names the generation only. */
  toString(): string {
    return `Secret(generation ${this.generation})`;
  }

  /** Names the generation only. */
  toJSON(): string {
    return this.toString();
  }
}

/** KeyInput is what a key is derived from. */
export interface KeyInput {
  /** The tenant; required. */
  tenant: string;
  /** The workflow run the call's key is scoped by; required. */
  run: string;
  /** The activity type's name; required. */
  activity: string;
  /** The arguments by name (an object); null or undefined carries none. */
  arguments: Record<string, unknown> | null | undefined;
  /** The names of the arguments that identify the effect. */
  keyArguments: readonly string[];
  /** The secret the key is derived under (k1:); absent: v1:. */
  secret?: Secret | null;
}

interface ArgName {
  norm: string;
  name: string;
}

function sortedNames(list: readonly string[], field: string): ArgName[] {
  const names = list.map((name) => {
    if (name === '') throw new KeyInputError(field, 'a key argument name is empty');
    return { norm: normalize(name), name };
  });
  names.sort((a, b) => compareUtf8(a.norm, b.norm));
  for (let i = 1; i < names.length; i++) {
    const a = names[i - 1];
    const b = names[i];
    if (a.norm === b.norm) {
      if (a.name === b.name) throw new KeyInputError(field, `name ${JSON.stringify(a.name)} appears twice`);
      throw new KeyInputError(
        field,
        `names ${JSON.stringify(a.name)} and ${JSON.stringify(b.name)} are equal after NFC normalisation`,
      );
    }
  }
  return names;
}

function requireScope(tenant: string, run: string, activity: string): void {
  if (!tenant) throw new KeyInputError('Tenant', 'must not be empty');
  if (!run) throw new KeyInputError('Run', 'must not be empty');
  if (!activity) throw new KeyInputError('Activity', 'must not be empty');
}

function lookup(args: Record<string, unknown>, n: ArgName): unknown {
  if (Object.prototype.hasOwnProperty.call(args, n.name) && args[n.name] !== undefined) {
    let ascii = true;
    for (const k of Object.keys(args)) {
      if (/[^\x00-\x7f]/.test(k)) {
        ascii = false;
        break;
      }
    }
    if (ascii) return args[n.name];
  }
  let found: unknown;
  let name = '';
  let hits = 0;
  for (const k of Object.keys(args)) {
    if (args[k] === undefined) continue;
    if (normalize(k) === n.norm) {
      if (++hits > 1) {
        throw new ValueError(
          n.name,
          new EncodingError(
            'nfc-duplicate-member',
            `the arguments hold both ${JSON.stringify(name)} and ${JSON.stringify(k)}, which are equal after NFC normalisation`,
          ),
        );
      }
      found = args[k];
      name = k;
    }
  }
  if (hits === 0) throw new MissingArgumentError(n.name);
  return found;
}

function encodeNamed(enc: Encoder, w: ByteWriter, args: Record<string, unknown>, n: ArgName): void {
  const v = lookup(args, n);
  writeKey(w, n.norm);
  try {
    enc.value(v);
  } catch (e) {
    if (e instanceof EncodingError) throw new ValueError(n.name, e);
    throw e;
  }
}

/** The canonical bytes a key is the digest of (exported for the vectors' tests). */
export function keyBytes(input: KeyInput): Uint8Array {
  requireScope(input.tenant, input.run, input.activity);
  const names = sortedNames(input.keyArguments, 'KeyArguments');
  const w = new ByteWriter();
  w.field(DOMAIN);
  w.field(input.tenant);
  w.field(input.run);
  w.field(input.activity);
  w.byte(TAG_OBJECT);
  const enc = new Encoder(w);
  const args = input.arguments;
  if (args === null || args === undefined) {
    if (names.length > 0) throw new MissingArgumentError(input.keyArguments[0]);
  } else {
    for (const n of names) encodeNamed(enc, w, args, n);
  }
  w.byte(TAG_OBJECT_END);
  return w.result();
}

/** Derives the idempotency key of input: "v1:" and the hex SHA-256 of its canonical bytes, or, under a secret, "k1:" and the hex HMAC-SHA-256. */
export function deriveKey(input: KeyInput): string {
  const b = keyBytes(input);
  if (input.secret) return KEYED_VERSION + ':' + input.secret.sum(b).toString('hex');
  return VERSION + ':' + createHash('sha256').update(b).digest('hex');
}

/** CheckInput is what a check digest is derived from. */
export interface CheckInput {
  tenant: string;
  run: string;
  activity: string;
  /** The arguments by name. */
  arguments: Record<string, unknown> | null | undefined;
  /** The checked arguments' names; at least one. */
  names: readonly string[];
  /** The secret the check is derived under (c2:); absent: c1:. */
  secret?: Secret | null;
}

/**
 * Derives the check digest of the checked arguments: "c1:" (or "c2:"), the
 * first 8 bytes of the SHA-256 of the names, ":", and the digest of the
 * values (an absent one written as absent).
 */
export function deriveCheck(input: CheckInput): string {
  requireScope(input.tenant, input.run, input.activity);
  if (input.names.length === 0) throw new KeyInputError('Names', 'must name at least one checked argument');
  const names = sortedNames(input.names, 'Names');
  const nb = new ByteWriter();
  nb.field(CHECK_DOMAIN);
  for (const n of names) nb.field(n.norm);
  const namesSum = createHash('sha256').update(nb.result()).digest().subarray(0, 8).toString('hex');

  const w = new ByteWriter();
  w.field(CHECK_DOMAIN);
  w.field(input.tenant);
  w.field(input.run);
  w.field(input.activity);
  w.byte(TAG_OBJECT);
  const enc = new Encoder(w);
  for (const n of names) {
    const mark = w.length;
    try {
      if (input.arguments === null || input.arguments === undefined) throw new MissingArgumentError(n.name);
      encodeNamed(enc, w, input.arguments, n);
    } catch (e) {
      if (!(e instanceof MissingArgumentError)) throw e;
      w.truncate(mark);
      writeKey(w, n.norm);
      w.byte(TAG_ABSENT);
    }
  }
  w.byte(TAG_OBJECT_END);
  const b = w.result();
  if (input.secret) return KEYED_CHECK_VERSION + ':' + namesSum + ':' + input.secret.sum(b).toString('hex');
  return CHECK_VERSION + ':' + namesSum + ':' + createHash('sha256').update(b).digest('hex');
}

/** The part of a check that names its arguments ("c1:" and 16 hex digits), or "" for a malformed one. */
function checkNames(c: string): string {
  const len = 3 + 16 + 1 + 64;
  if (c.length !== len || !(c.startsWith('c1:') || c.startsWith('c2:')) || c[19] !== ':') return '';
  return c.slice(0, 19);
}

/** Whether two checks digest the same argument names (and can be compared). */
export function checksComparable(a: string, b: string): boolean {
  const n = checkNames(a);
  return n !== '' && n === checkNames(b);
}

/** Whether two comparable checks differ: the call's checked arguments are not the record's. */
export function checksDiffer(a: string, b: string): boolean {
  return checksComparable(a, b) && a !== b;
}
