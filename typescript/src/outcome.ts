// Outcomes as the Go dispatcher records them (interceptor/activity_codec.go,
// activity_holder.go): a temporal.api.common.v1.Payloads in protobuf wire
// form; a definite failure is one payload of encoding
// "binary/x-idempotency-failure" holding a temporal.api.failure.v1.Failure.

import {
  DefaultFailureConverter,
  RawValue,
  defaultPayloadConverter,
  type Payload,
  type PayloadConverter,
} from '@temporalio/common';
import { temporal } from '@temporalio/proto';

/** The encoding that marks a recorded definite failure. */
export const FAILURE_ENCODING = 'binary/x-idempotency-failure';

const failureConverter = new DefaultFailureConverter();

/**
 * Encodes value as the dispatcher records an outcome: the payloads of it,
 * in protobuf wire form. undefined (an activity that returns nothing)
 * records nothing, an empty outcome, as Go records a nil result; null is a
 * binary/null payload, as Go records a nil pointer. With the default
 * converter, JSON is escaped as Go's encoding/json escapes it (<, >, &,
 * U+2028, U+2029), so a string records the bytes Go records.
 */
export function encodeOutcome(value: unknown, converter: PayloadConverter = defaultPayloadConverter): Uint8Array {
  if (value === undefined) return new Uint8Array();
  let p: Payload;
  if (value === null) {
    p = { metadata: { encoding: Buffer.from('binary/null') } };
  } else {
    p = converter.toPayload(value);
    const enc = p.metadata?.encoding ? Buffer.from(p.metadata.encoding).toString() : '';
    if (converter === defaultPayloadConverter && enc === 'json/plain' && p.data) {
      p = { ...p, data: Buffer.from(goEscape(Buffer.from(p.data).toString('utf8'))) };
    }
  }
  return temporal.api.common.v1.Payloads.encode({ payloads: [p] }).finish();
}

/** Escapes JSON text as Go's encoding/json does (HTML-safe); the characters only appear inside strings. */
function goEscape(json: string): string {
  return json.replace(/[<>&\u2028\u2029]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

/** Encodes err as a recorded definite failure. */
export function encodeFailure(err: unknown, converter: PayloadConverter = defaultPayloadConverter): Uint8Array {
  const f = failureConverter.errorToFailure(err, converter);
  const data = temporal.api.failure.v1.Failure.encode(f).finish();
  const p: Payload = { metadata: { encoding: Buffer.from(FAILURE_ENCODING) }, data };
  return temporal.api.common.v1.Payloads.encode({ payloads: [p] }).finish();
}

/** OutcomeUnreadableError: a recorded outcome that cannot be decoded. */
export class OutcomeUnreadableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OutcomeUnreadableError';
  }
}

/** A decoded outcome: the recorded payload (undefined for an empty outcome), or the recorded failure. */
export type DecodedOutcome = { payload: Payload | undefined; failure?: undefined } | { payload?: undefined; failure: Error };

/** Decodes a recorded outcome. */
export function decodeOutcome(outcome: Uint8Array | null, converter: PayloadConverter = defaultPayloadConverter): DecodedOutcome {
  if (!outcome || outcome.length === 0) return { payload: undefined };
  let ps: temporal.api.common.v1.Payloads;
  try {
    ps = temporal.api.common.v1.Payloads.decode(outcome);
  } catch (e) {
    throw new OutcomeUnreadableError(`not Payloads in protobuf wire form: ${(e as Error).message}`);
  }
  const n = ps.payloads.length;
  if (n === 0) return { payload: undefined };
  if (n > 1) throw new OutcomeUnreadableError(`${n} payloads where an activity returns one`);
  const p = ps.payloads[0] as Payload;
  const enc = p.metadata?.encoding ? Buffer.from(p.metadata.encoding).toString() : '';
  if (enc === FAILURE_ENCODING) {
    let f: temporal.api.failure.v1.Failure;
    try {
      f = temporal.api.failure.v1.Failure.decode(p.data ?? new Uint8Array());
    } catch (e) {
      throw new OutcomeUnreadableError(`a recorded failure: ${(e as Error).message}`);
    }
    return { failure: failureConverter.failureToError(f, converter) };
  }
  return { payload: p };
}

/** Decodes a recorded outcome into a value (throws the recorded failure). */
export function decodeOutcomeValue(outcome: Uint8Array | null, converter: PayloadConverter = defaultPayloadConverter): unknown {
  const d = decodeOutcome(outcome, converter);
  if (d.failure) throw d.failure;
  return d.payload === undefined ? undefined : converter.fromPayload(d.payload);
}

/** The answer handed back to the SDK: the recorded payload untouched, which the worker's converter passes through (and its codecs encode). */
export function answerOf(d: DecodedOutcome): unknown {
  if (d.failure) throw d.failure;
  return d.payload === undefined ? undefined : RawValue.fromPayload(d.payload);
}
