// The canonical encoding of argument values, as the Go package keyspace
// writes it (keyspace/encode.go): the bytes a key and a check digest are
// the SHA-256 (or, under a secret, the HMAC-SHA-256) of. Two spellings of
// one JSON payload (members in another order, strings in another Unicode
// normal form, 2 for 2.0) encode to the same bytes; anything else differs.

/** Tags of the canonical encoding (keyspace/encode.go). */
const TAG_NULL = 0x6e; // 'n'
const TAG_FALSE = 0x66; // 'f'
const TAG_TRUE = 0x74; // 't'
const TAG_NUMBER = 0x64; // 'd'
const TAG_STRING = 0x73; // 's'
const TAG_LIST = 0x5b; // '['
const TAG_LIST_END = 0x5d; // ']'
/** Opens an object. */
export const TAG_OBJECT = 0x7b; // '{'
/** Closes an object. */
export const TAG_OBJECT_END = 0x7d; // '}'
/** Stands for a checked argument the call does not carry (check digests only). */
export const TAG_ABSENT = 0x78; // 'x'

/** How deep values may nest. */
const MAX_DEPTH = 10000;
/** The largest exponent a number's text may carry. */
const MAX_EXPONENT = 1 << 30;
/** 2^53: from here neighbouring integers share a float64. */
const EXACT_FLOAT_LIMIT = 2 ** 53;

/**
 * JsonNumber is a JSON number kept as its text, so that integers beyond
 * 2^53 and long fractions keep every digit (Go's json.Number). parseJson
 * gives them; pass one as an argument value to key on the exact number.
 */
export class JsonNumber {
  /** The number's JSON text. */
  constructor(readonly text: string) {}
  /** The JSON text. */
  toString(): string {
    return this.text;
  }
  /** The JSON text, so JSON.stringify writes the number as it came. */
  toJSON(): unknown {
    return Number(this.text);
  }
}

/** EncodingError is a value with no canonical form; `class` names why (SPEC.md's error classes). */
export class EncodingError extends Error {
  /** A short class: "nan", "unsafe-integer-float", "duplicate-member", "nfc-duplicate-member", "depth", "cycle", "number", "type". */
  readonly class: string;
  constructor(cls: string, message: string) {
    super(message);
    this.name = 'EncodingError';
    this.class = cls;
  }
}

/** ByteWriter is a growable byte buffer. */
export class ByteWriter {
  private buf = new Uint8Array(256);
  private n = 0;

  private grow(k: number): void {
    if (this.n + k <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.n + k) size *= 2;
    const b = new Uint8Array(size);
    b.set(this.buf.subarray(0, this.n));
    this.buf = b;
  }

  /** Appends one byte. */
  byte(b: number): void {
    this.grow(1);
    this.buf[this.n++] = b;
  }

  /** Appends bytes. */
  bytes(b: Uint8Array): void {
    this.grow(b.length);
    this.buf.set(b, this.n);
    this.n += b.length;
  }

  /** Appends an unsigned varint (Go's binary.AppendUvarint). */
  uvarint(x: bigint | number): void {
    let v = BigInt(x);
    while (v >= 0x80n) {
      this.byte(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.byte(Number(v));
  }

  /** Appends a signed zig-zag varint (Go's binary.AppendVarint). */
  varint(x: bigint | number): void {
    const v = BigInt(x);
    this.uvarint(v >= 0n ? v << 1n : ((-v) << 1n) - 1n);
  }

  /** Appends a length-prefixed field: uvarint(len) and the UTF-8 bytes of s, unchanged. */
  field(s: string | Uint8Array): void {
    const b = typeof s === 'string' ? utf8(s) : s;
    this.uvarint(b.length);
    this.bytes(b);
  }

  /** Length so far. */
  get length(): number {
    return this.n;
  }

  /** Cuts back to length n. */
  truncate(n: number): void {
    this.n = n;
  }

  /** The bytes written. */
  result(): Uint8Array {
    return this.buf.slice(0, this.n);
  }
}

const encoder = new TextEncoder();

/** UTF-8 of s; a lone surrogate becomes U+FFFD, as Go's encoding/json does with invalid bytes. */
export function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}

/** The canonical form of a string or name: valid Unicode, NFC. */
export function normalize(s: string): string {
  // toWellFormed replaces lone surrogates with U+FFFD (Node 20).
  const wf = (s as unknown as { toWellFormed?: () => string }).toWellFormed?.() ?? s;
  return wf.normalize('NFC');
}

/** Compares two strings by their UTF-8 bytes, as Go's strings.Compare does. */
export function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** Writes a string (already normalised) with its tag. */
export function writeKey(w: ByteWriter, norm: string): void {
  w.byte(TAG_STRING);
  w.field(norm);
}

function writeZero(w: ByteWriter): void {
  w.byte(TAG_NUMBER);
  w.byte(0x2b);
  w.byte(0);
  w.byte(0);
}

function writeDecimal(w: ByteWriter, neg: boolean, digits: string, exp: bigint): void {
  w.byte(TAG_NUMBER);
  w.byte(neg ? 0x2d : 0x2b);
  w.field(digits);
  w.varint(exp);
}

/** Parses JSON number text into sign, significand digits (no leading or trailing zeros) and exponent. */
function parseNumber(s: string): { neg: boolean; digits: string; exp: bigint } {
  const m = /^(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?)([0-9]+))?$/.exec(s);
  if (!m) throw new EncodingError('number', `${JSON.stringify(s)} is not a valid JSON number`);
  const neg = m[1] === '-';
  const frac = m[3] ?? '';
  let e10 = 0n;
  if (m[5] !== undefined) {
    const digitsOfExp = m[5].replace(/^0+/, '') || '0';
    if (digitsOfExp.length > 11 || BigInt(digitsOfExp) > BigInt(MAX_EXPONENT)) {
      throw new EncodingError('number', `${JSON.stringify(s)} is not a valid JSON number: exponent out of range`);
    }
    e10 = BigInt(digitsOfExp);
    if (m[4] === '-') e10 = -e10;
  }
  let all = (m[2] + frac).replace(/^0+/, '');
  const trimmed = all.replace(/0+$/, '');
  if (trimmed === '') return { neg: false, digits: '', exp: 0n };
  const trailing = all.length - trimmed.length;
  all = trimmed;
  return { neg, digits: all, exp: e10 - BigInt(frac.length) + BigInt(trailing) };
}

function writeNumberText(w: ByteWriter, s: string): void {
  const { neg, digits, exp } = parseNumber(s);
  if (digits === '') {
    writeZero(w);
    return;
  }
  writeDecimal(w, neg, digits, exp);
}

function writeBigInt(w: ByteWriter, x: bigint): void {
  if (x === 0n) {
    writeZero(w);
    return;
  }
  writeNumberText(w, x.toString());
}

/** Writes a float64 as Go's keyspace does: integral as its exact integer (refused from 2^53), fractional as its shortest decimal. */
function writeFloat(w: ByteWriter, f: number): void {
  if (!Number.isFinite(f)) throw new EncodingError('nan', `${f} has no canonical form`);
  if (f === 0) {
    writeZero(w);
    return;
  }
  if (Number.isInteger(f)) {
    if (f >= EXACT_FLOAT_LIMIT || f <= -EXACT_FLOAT_LIMIT) {
      throw new EncodingError(
        'unsafe-integer-float',
        `the integral number ${f} is 2^53 or more in magnitude: it may stand for several integers on the wire, so it has no exact key (pass a bigint or a JsonNumber)`,
      );
    }
    writeBigInt(w, BigInt(f));
    return;
  }
  // JavaScript writes the shortest decimal that reads back as the same
  // float64, as Go's strconv 'e', -1 does.
  writeNumberText(w, f.toExponential().replace('e+', 'e'));
}

function writeTime(w: ByteWriter, d: Date): void {
  const ms = d.getTime();
  if (!Number.isFinite(ms)) throw new EncodingError('type', 'an invalid Date has no canonical form');
  const y = d.getUTCFullYear();
  if (y < 0 || y > 9999) throw new EncodingError('type', `time ${d.toISOString()} is in a year outside 0–9999`);
  // RFC 3339 with the fraction's trailing zeros dropped, as Go's RFC3339Nano.
  let iso = d.toISOString(); // 2006-01-02T15:04:05.000Z
  iso = iso.replace(/\.(\d*?)0*Z$/, (_m, frac: string) => (frac ? `.${frac}Z` : 'Z'));
  writeKey(w, iso);
}

function isPlainObject(v: object): v is Record<string, unknown> {
  const p = Object.getPrototypeOf(v);
  return p === Object.prototype || p === null;
}

/** Encoder writes values in the canonical encoding. */
export class Encoder {
  private depth = 0;
  private readonly path = new Set<object>();

  constructor(readonly w: ByteWriter) {}

  /** Writes one value. undefined is null, as the JSON payload converter makes it. */
  value(v: unknown): void {
    switch (typeof v) {
      case 'undefined':
        this.w.byte(TAG_NULL);
        return;
      case 'boolean':
        this.w.byte(v ? TAG_TRUE : TAG_FALSE);
        return;
      case 'string':
        writeKey(this.w, normalize(v));
        return;
      case 'number':
        writeFloat(this.w, v);
        return;
      case 'bigint':
        writeBigInt(this.w, v);
        return;
      case 'object':
        break;
      default:
        throw new EncodingError('type', `a value of type ${typeof v} has no canonical form`);
    }
    if (v === null) {
      this.w.byte(TAG_NULL);
      return;
    }
    if (v instanceof JsonNumber) {
      if (v.text === '') writeZero(this.w);
      else writeNumberText(this.w, v.text);
      return;
    }
    if (v instanceof Date) {
      writeTime(this.w, v);
      return;
    }
    if (v instanceof Uint8Array) {
      writeKey(this.w, Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64'));
      return;
    }
    if (this.depth >= MAX_DEPTH) {
      throw new EncodingError('depth', `values nested deeper than ${MAX_DEPTH} levels have no canonical form`);
    }
    if (this.path.has(v)) throw new EncodingError('cycle', 'cycle: a value contains itself, which has no canonical form');
    this.depth++;
    this.path.add(v);
    try {
      if (Array.isArray(v)) {
        this.w.byte(TAG_LIST);
        for (const x of v) this.value(x);
        this.w.byte(TAG_LIST_END);
        return;
      }
      if (v instanceof Map) {
        const o: Record<string, unknown> = {};
        for (const [k, x] of v) {
          if (typeof k !== 'string') throw new EncodingError('type', "a map's keys must be strings");
          o[k] = x;
        }
        this.object(o);
        return;
      }
      const json = (v as { toJSON?: () => unknown }).toJSON;
      if (!isPlainObject(v) && typeof json === 'function') {
        this.value(json.call(v));
        return;
      }
      this.object(v as Record<string, unknown>);
    } finally {
      this.path.delete(v);
      this.depth--;
    }
  }

  /** Writes an object: members (undefined ones left out, as JSON leaves them) by NFC name, in UTF-8 byte order. */
  object(o: Record<string, unknown>): void {
    const members: Array<{ norm: string; key: string; val: unknown }> = [];
    for (const key of Object.keys(o)) {
      const val = o[key];
      if (val === undefined) continue;
      members.push({ norm: normalize(key), key, val });
    }
    members.sort((a, b) => compareUtf8(a.norm, b.norm));
    for (let i = 1; i < members.length; i++) {
      if (members[i - 1].norm === members[i].norm) {
        throw new EncodingError(
          'nfc-duplicate-member',
          `map keys ${JSON.stringify(members[i - 1].key)} and ${JSON.stringify(members[i].key)} are equal after NFC normalisation, so the map has no canonical form`,
        );
      }
    }
    this.w.byte(TAG_OBJECT);
    for (const m of members) {
      writeKey(this.w, m.norm);
      this.value(m.val);
    }
    this.w.byte(TAG_OBJECT_END);
  }
}

/** The canonical encoding of one value on its own (what canonical.json's vectors give). */
export function canonical(v: unknown): Uint8Array {
  const w = new ByteWriter();
  new Encoder(w).value(v);
  return w.result();
}

/**
 * Parses JSON text keeping every number as a {@link JsonNumber} and refusing
 * an object that names a member twice (Go's decodeJSON), so that the values
 * it gives encode exactly as Go encodes the same text. With lastMemberWins,
 * a member named twice keeps its last value, as JSON.parse and Go's
 * decoding into map[string]any do.
 */
export function parseJson(text: string, options: { lastMemberWins?: boolean } = {}): unknown {
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i])) i++;
  };
  const fail = (what: string): never => {
    throw new SyntaxError(`invalid JSON at offset ${i}: ${what}`);
  };
  const str = (): string => {
    // JSON.parse reads one string literal exactly.
    const start = i;
    i++;
    while (i < text.length && text[i] !== '"') {
      if (text[i] === '\\') i++;
      i++;
    }
    if (i >= text.length) fail('unterminated string');
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const val = (): unknown => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const o: Record<string, unknown> = Object.create(null);
      const seen = new Set<string>();
      ws();
      if (text[i] === '}') {
        i++;
        return o;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('expected a member name');
        const k = str();
        if (seen.has(k) && !options.lastMemberWins) throw new EncodingError('duplicate-member', `an object names the member ${JSON.stringify(k)} twice`);
        seen.add(k);
        ws();
        if (text[i] !== ':') fail('expected :');
        i++;
        o[k] = val();
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return o;
        }
        fail('expected , or }');
      }
    }
    if (c === '[') {
      i++;
      const a: unknown[] = [];
      ws();
      if (text[i] === ']') {
        i++;
        return a;
      }
      for (;;) {
        a.push(val());
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return a;
        }
        fail('expected , or ]');
      }
    }
    if (c === '"') return str();
    if (text.startsWith('true', i)) {
      i += 4;
      return true;
    }
    if (text.startsWith('false', i)) {
      i += 5;
      return false;
    }
    if (text.startsWith('null', i)) {
      i += 4;
      return null;
    }
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i));
    if (!m || m[0] === '' || m[0] === '-') fail('unexpected character');
    i += m![0].length;
    return new JsonNumber(m![0]);
  };
  const v = val();
  ws();
  if (i !== text.length) fail('trailing characters');
  return v;
}
