// The error types a Go workflow routes by (activity/indeterminate.go,
// activity/notrun.go, activity/mismatch.go, decision/errors.go): the same
// type strings, retryability and details.

import { ApplicationFailure, RawValue } from '@temporalio/common';

/** The indeterminate outcome's type (Go's activity.ErrorTypeIndeterminateOutcome): non-retryable. */
export const ERROR_TYPE_INDETERMINATE_OUTCOME = 'IndeterminateOutcomeError';
/** The store did not answer; nothing ran (Go's activity.ErrorTypeStoreUnavailable): retryable. */
export const ERROR_TYPE_STORE_UNAVAILABLE = 'IdempotencyStoreUnavailable';
/** Checked arguments differ from the record's (Go's activity.ErrorTypeArgumentsMismatch): non-retryable. */
export const ERROR_TYPE_ARGUMENTS_MISMATCH = 'IdempotencyArgumentsMismatch';
/** No key could be derived for an IDEMPOTENT call: retryable. */
export const ERROR_TYPE_KEY_NOT_DERIVABLE = 'IdempotencyKeyNotDerivable';
/** A recorded outcome cannot be decoded: non-retryable. */
export const ERROR_TYPE_OUTCOME_UNREADABLE = 'IdempotencyOutcomeUnreadable';
/** The tenant cannot be stored: non-retryable. */
export const ERROR_TYPE_INVALID_TENANT = 'IdempotencyInvalidTenant';
/** No tenant: non-retryable when it travels with the call. */
export const ERROR_TYPE_NO_TENANT = 'IdempotencyNoTenant';
/** The workflow's keys are derived under a secret this worker does not hold: retryable. */
export const ERROR_TYPE_UNKNOWN_KEY_SECRET = 'IdempotencyUnknownKeySecret';

/** Why an outcome is unknown (Go's activity.Reason). */
export type Reason = 'body_failed' | 'key_not_derivable' | 'store_unavailable' | 'holder_lost' | 'recorded';

/** The details of an indeterminate outcome, with Go's JSON names (activity.IndeterminateOutcome). */
export interface IndeterminateOutcome {
  activity: string;
  tenant?: string;
  key?: string;
  reason: Reason;
  body_entered: boolean;
  effect_may_have_landed: boolean;
  workflow_id?: string;
  run_id?: string;
  activity_id?: string;
  cause?: string;
  /** The fencing token of the record standing (int64: written as an exact JSON integer). */
  token?: bigint;
  check?: string;
  /** Nanoseconds (Go's time.Duration). */
  retention?: number;
  probe?: boolean;
}

/** JSON of a details object, with a bigint written as an exact integer. */
function detailsPayload(o: object): RawValue {
  const json = JSON.stringify(o, (_k, v) => (typeof v === 'bigint' ? `\u0000bigint:${v}` : v)).replace(
    /"\\u0000bigint:(-?\d+)"/g,
    '$1',
  );
  return RawValue.fromPayload({ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from(json) });
}

function dropEmpty<T extends object>(o: T): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) {
    if (v === undefined || v === '' || v === 0 || v === 0n || v === false) {
      if (k === 'body_entered' || k === 'effect_may_have_landed' || k === 'reason' || k === 'activity') out[k] = v;
      continue;
    }
    out[k] = v;
  }
  return out as T;
}

function summary(o: IndeterminateOutcome): string {
  const known = o.body_entered
    ? 'this attempt ran the body, so the effect may have landed'
    : o.effect_may_have_landed
      ? 'this attempt did not run the body, but an earlier holder of the key may have applied the effect'
      : 'no attempt ran the body, so no effect was applied';
  let msg = `indeterminate outcome of activity ${JSON.stringify(o.activity)}`;
  if (o.key) msg += ` (tenant ${JSON.stringify(o.tenant ?? '')}, key ${o.key})`;
  return msg + `: ${o.reason}; ${known}; it will not be retried`;
}

/** The non-retryable indeterminate error, as Go's activity.NewIndeterminateError makes it. */
export function indeterminateError(o: IndeterminateOutcome, cause?: Error): ApplicationFailure {
  const details = { ...o };
  if (cause && !details.cause) details.cause = cause.message;
  const message = cause ? summary(details) : details.cause ? `${summary(details)}: ${details.cause}` : summary(details);
  return ApplicationFailure.create({
    message,
    type: ERROR_TYPE_INDETERMINATE_OUTCOME,
    nonRetryable: true,
    details: [detailsPayload(dropEmpty(details))],
    cause,
  });
}

/** The details of a call not run because the store did not answer (Go's activity.NotRun). */
export interface NotRun {
  activity: string;
  tenant?: string;
  key?: string;
  reason: Reason;
  body_entered: false;
  effect_may_have_landed: false;
  may_retry: true;
  workflow_id?: string;
  run_id?: string;
  activity_id?: string;
  cause?: string;
}

/** The retryable not-run error (Go's activity.NewNotRunError). */
export function notRunError(n: Omit<NotRun, 'body_entered' | 'effect_may_have_landed' | 'may_retry'>, cause?: Error): ApplicationFailure {
  const d: NotRun = { ...n, body_entered: false, effect_may_have_landed: false, may_retry: true };
  if (cause && !d.cause) d.cause = cause.message;
  let msg = `activity ${JSON.stringify(d.activity)} was not run`;
  if (d.key) msg += ` (tenant ${JSON.stringify(d.tenant ?? '')}, key ${d.key})`;
  msg += `: ${d.reason}; this attempt ran nothing and applied no effect, so the call may be retried: the claim decides then`;
  return ApplicationFailure.create({
    message: cause ? msg : d.cause ? `${msg}: ${d.cause}` : msg,
    type: ERROR_TYPE_STORE_UNAVAILABLE,
    nonRetryable: false,
    details: [detailsPayload(d)],
    cause,
  });
}

/** The details of an arguments mismatch (Go's activity.ArgumentsMismatch). */
export interface ArgumentsMismatch {
  activity: string;
  tenant: string;
  key: string;
  arguments: string[];
  found: 'completed' | 'waited' | 'indeterminate' | 'takeover';
  record_workflow_id?: string;
  record_run_id?: string;
  workflow_id?: string;
  run_id?: string;
  activity_id?: string;
}

/** The non-retryable arguments-mismatch error (Go's activity.NewArgumentsMismatchError). */
export function argumentsMismatchError(m: ArgumentsMismatch): ApplicationFailure {
  let msg =
    `activity ${JSON.stringify(m.activity)} was called with other values of its checked arguments (${m.arguments.join(', ')}) ` +
    `than the call that made the record of key ${m.key} (tenant ${JSON.stringify(m.tenant)}, ${m.found}`;
  if (m.record_workflow_id) msg += `, made by workflow ${JSON.stringify(m.record_workflow_id)} run ${JSON.stringify(m.record_run_id ?? '')}`;
  msg += '); the record does not answer it and it will not be retried';
  return ApplicationFailure.create({
    message: msg,
    type: ERROR_TYPE_ARGUMENTS_MISMATCH,
    nonRetryable: true,
    details: [detailsPayload(dropEmpty(m))],
  });
}

const noEffect = Symbol('idempotency.noEffect');

/**
 * noEffect marks err as a failure that applied no effect: an EFFECTFUL
 * activity's key is freed instead of marked indeterminate, and err is
 * thrown on as it is (Go's activity.NoEffect).
 */
export function noEffectError<E extends Error>(err: E): E {
  (err as unknown as Record<symbol, boolean>)[noEffect] = true;
  return err;
}

/** Whether err was marked with {@link noEffectError}. */
export function isNoEffect(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as Record<symbol, unknown>)[noEffect] === true;
}
