// The activity interceptor: the Go dispatcher's claim state machine
// (interceptor/activity_call.go, activity_body.go, activity_settle.go,
// activity_end.go) for TypeScript activities, on the same records.

import { createHash } from 'node:crypto';
import type { Context } from '@temporalio/activity';
import { ApplicationFailure, defaultPayloadConverter, type Payload, type PayloadConverter } from '@temporalio/common';
import type { ActivityExecuteInput, ActivityInboundCallsInterceptor, ActivityInterceptorsFactory, Next } from '@temporalio/worker';
import { Declaration, Kind } from './declare';
import {
  ERROR_TYPE_INVALID_TENANT,
  ERROR_TYPE_KEY_NOT_DERIVABLE,
  ERROR_TYPE_NO_TENANT,
  ERROR_TYPE_OUTCOME_UNREADABLE,
  ERROR_TYPE_UNKNOWN_KEY_SECRET,
  type Reason,
  argumentsMismatchError,
  indeterminateError,
  isNoEffect,
  notRunError,
} from './errors';
import { checksDiffer } from './keys';
import { OutcomeUnreadableError, answerOf, decodeOutcome, encodeFailure, encodeOutcome } from './outcome';
import { NotHolderError, PgStore, type Result, Status, type StoreRecord } from './pgstore';

/** The header the workflow's tenant travels in (Go's interceptor.TenantHeader). */
export const TENANT_HEADER = 'idempotency-tenant';
/** The header naming the run a call's key is scoped by (Go's interceptor.RunScopeHeader). */
export const RUN_SCOPE_HEADER = 'idempotency-run-scope';
/** The header naming the generation of the secret the workflow's keys are derived under (Go's interceptor.KeySecretHeader). */
export const KEY_SECRET_HEADER = 'idempotency-key-secret';

/** Default lease: 10 s (Go's DefaultLease). */
export const DEFAULT_LEASE_MS = 10_000;
/** Default wait heartbeat: 5 s (Go's DefaultWaitHeartbeat). */
export const DEFAULT_WAIT_HEARTBEAT_MS = 5_000;
/** Default claim retry while the store is down: 15 s (Go's DefaultClaimRetry). */
export const DEFAULT_CLAIM_RETRY_MS = 15_000;

/** Options of the interceptor. */
export interface IdempotencyOptions {
  /** The store the claims are kept in. */
  store: PgStore;
  /** The activities' declarations; an activity without one runs untouched. */
  declarations: Declaration[];
  /** How long a claim holds before a waiting duplicate may presume its holder gone; renewed every third of it while the body runs. */
  leaseMs?: number;
  /** How often a waiting duplicate heartbeats (at most half the activity's heartbeat timeout). */
  waitHeartbeatMs?: number;
  /** How long a claim is retried while the store does not answer, before the call ends not run (retryable). */
  claimRetryMs?: number;
  /** This worker's identity, in the holder of its claims; default pid@hostname. */
  identity?: string;
  /** The tenant of a call whose workflow carries none in its header; unset: such a call is refused. */
  defaultTenant?: string;
  /** The converter outcomes are recorded with; default the SDK's default payload converter (what Go's default data converter writes). */
  payloadConverter?: PayloadConverter;
}

function headerString(headers: Record<string, Payload>, name: string): string | undefined {
  const p = headers[name];
  if (!p) return undefined;
  const v = defaultPayloadConverter.fromPayload<unknown>(p);
  if (typeof v !== 'string') throw new Error(`idempotency: the ${name} header does not hold a string`);
  return v;
}

/** The holder name of an execution attempt: "<execution digest>:<attempt>:<identity>", as Go's holderName. */
export function holderName(info: Context['info'], identity: string): string {
  const h = createHash('sha256');
  if (info.isLocal) h.update('local\x00');
  const fields = [info.workflowExecution?.workflowId ?? '', info.workflowExecution?.runId ?? '', info.activityId];
  if (!info.workflowExecution) fields.push(info.activityRunId ?? '');
  for (const s of fields) {
    const b = Buffer.from(s, 'utf8');
    h.update(String(b.length));
    h.update(':');
    h.update(b);
  }
  return h.digest().subarray(0, 8).toString('hex') + ':' + String(info.attempt) + ':' + identity;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The interceptors factory to give the worker:
 * `Worker.create({ interceptors: { activity: [idempotencyInterceptors(opts)] }, ... })`.
 */
export function idempotencyInterceptors(opts: IdempotencyOptions): ActivityInterceptorsFactory {
  const byName = new Map<string, Declaration>();
  for (const d of opts.declarations) {
    if (byName.has(d.name)) throw new Error(`idempotency: activity ${JSON.stringify(d.name)} is declared twice`);
    byName.set(d.name, d);
  }
  const resolved: Required<Omit<IdempotencyOptions, 'defaultTenant'>> & { defaultTenant?: string } = {
    leaseMs: DEFAULT_LEASE_MS,
    waitHeartbeatMs: DEFAULT_WAIT_HEARTBEAT_MS,
    claimRetryMs: DEFAULT_CLAIM_RETRY_MS,
    identity: `${process.pid}@${require('node:os').hostname()}`,
    payloadConverter: defaultPayloadConverter,
    ...opts,
  };
  if (resolved.leaseMs < 30) throw new Error('idempotency: leaseMs must be 30 or more');
  return (ctx: Context) => ({ inbound: new IdempotencyInbound(ctx, resolved, byName) });
}

type ResolvedOptions = Required<Omit<IdempotencyOptions, 'defaultTenant'>> & { defaultTenant?: string };

/** The inbound interceptor of one activity execution. */
export class IdempotencyInbound implements ActivityInboundCallsInterceptor {
  constructor(
    private readonly ctx: Context,
    private readonly opts: ResolvedOptions,
    private readonly decls: Map<string, Declaration>,
  ) {}

  async execute(input: ActivityExecuteInput, next: Next<ActivityInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    const decl = this.decls.get(this.ctx.info.activityType);
    if (!decl || decl.kind === Kind.READ_ONLY) return next(input);
    return new Execution(this.ctx, this.opts, decl).run(input, next);
  }
}

/** One activity execution going through the dispatcher. */
class Execution {
  private tenant = '';
  private key = '';
  private check = '';
  private holder = '';
  private token = 0n;

  constructor(
    private readonly ctx: Context,
    private readonly opts: ResolvedOptions,
    private readonly decl: Declaration,
  ) {}

  private get info() {
    return this.ctx.info;
  }

  async run(input: ActivityExecuteInput, next: Next<ActivityInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    this.prepare(input);
    // acquire: the claim loop.
    let lost: StoreRecord | undefined;
    let waited = false;
    let res = await this.claimWithRetry(lost);
    for (;;) {
      if (res.status === Status.Acquired) {
        this.token = res.record!.token;
        break;
      }
      if (res.status === Status.Completed || res.status === Status.Indeterminate) {
        return this.answered(res, waited);
      }
      if (res.status === Status.Free) {
        lost = undefined;
        res = await this.claimWithRetry(lost);
        continue;
      }
      // Held.
      const rec = res.record!;
      if (!res.leaseExpired) {
        lost = undefined;
        waited = true;
        const w = await this.waitFor(rec.token);
        if (w.status === Status.Held && !w.leaseExpired) {
          res = await this.claimWithRetry(lost); // another holder now: judge it afresh
        } else {
          res = w;
        }
        continue;
      }
      if (this.mismatched(rec)) return this.answered(res, false);
      // The holder is gone: its lease ran out. Take the key over.
      lost = rec;
      res = await this.claimWithRetry(lost);
    }
    if (lost && this.decl.kind === Kind.EFFECTFUL) {
      // Its effect may have landed: the key is marked, the body not entered.
      const cause = new Error(`holder ${JSON.stringify(lost.holder)} stopped answering without recording an outcome`);
      await this.markIndeterminate('holder_lost', cause);
      throw this.indeterminate('holder_lost', false, cause);
    }
    return this.runBody(input, next);
  }

  /** Resolves the tenant, the run, the key, the check and the holder, or throws what the call ends with. */
  private prepare(input: ActivityExecuteInput): void {
    const headers = input.headers ?? {};
    let tenant: string | undefined;
    try {
      tenant = headerString(headers, TENANT_HEADER);
    } catch (e) {
      throw this.misconfigured(ERROR_TYPE_NO_TENANT, (e as Error).message);
    }
    tenant ||= this.opts.defaultTenant;
    if (!tenant) {
      throw this.misconfigured(
        ERROR_TYPE_NO_TENANT,
        `no tenant could be resolved for the execution: the workflow carries no tenant (the ${TENANT_HEADER} header); ` +
          'start it with a tenant on a client that carries the plugin, or set defaultTenant on this worker',
      );
    }
    if (Buffer.byteLength(tenant) > 256 || tenant.includes('\x00')) {
      throw this.misconfigured(ERROR_TYPE_INVALID_TENANT, `the tenant cannot be stored: ${JSON.stringify(tenant.slice(0, 64))}`);
    }
    this.tenant = tenant;
    let run = this.info.workflowExecution?.runId ?? '';
    try {
      const scope = headerString(headers, RUN_SCOPE_HEADER);
      if (scope !== undefined) {
        if (scope === '') throw new Error(`idempotency: the ${RUN_SCOPE_HEADER} header is empty`);
        run = scope;
      }
    } catch (e) {
      throw this.notDeduplicable(e as Error);
    }
    if (!run) throw this.notDeduplicable(new Error('idempotency: the execution belongs to no workflow run'));
    if (headers[KEY_SECRET_HEADER]) {
      // Keys derived under a secret (k1:) are not claimed by this package
      // yet: the call is refused before anything runs, retryably, as Go
      // refuses a generation its worker lacks.
      const gen = (() => {
        try {
          return String(defaultPayloadConverter.fromPayload<unknown>(headers[KEY_SECRET_HEADER]));
        } catch {
          return '?';
        }
      })();
      throw ApplicationFailure.create({
        message:
          `idempotency: activity ${JSON.stringify(this.decl.name)} was not run: the workflow's keys are derived under the secret of generation ${gen}, ` +
          'and this TypeScript worker does not derive keys under key secrets (k1:) yet: run the activity on a Go worker that holds the secret',
        type: ERROR_TYPE_UNKNOWN_KEY_SECRET,
        nonRetryable: false,
      });
    }
    try {
      this.key = this.decl.key(tenant, run, input.args);
      this.check = this.decl.check(tenant, run, input.args);
    } catch (e) {
      throw this.notDeduplicable(e as Error);
    }
    this.holder = holderName(this.info, this.opts.identity);
  }

  private misconfigured(type: string, why: string): ApplicationFailure {
    return ApplicationFailure.create({
      message: `idempotency: activity ${JSON.stringify(this.decl.name)} was not run: ${why}`,
      type,
      nonRetryable: true,
    });
  }

  /** A call no key can be derived for: IDEMPOTENT gets a retryable error, EFFECTFUL the indeterminate one (nothing ran). */
  private notDeduplicable(cause: Error): ApplicationFailure {
    if (this.decl.kind === Kind.EFFECTFUL) return this.indeterminate('key_not_derivable', false, cause);
    return ApplicationFailure.create({
      message: `idempotency: activity ${JSON.stringify(this.decl.name)} was not run: key_not_derivable: ${cause.message}`,
      type: ERROR_TYPE_KEY_NOT_DERIVABLE,
      nonRetryable: false,
      cause,
    });
  }

  private indeterminate(reason: Reason, entered: boolean, cause?: Error): ApplicationFailure {
    const w = this.info.workflowExecution;
    return indeterminateError(
      {
        activity: this.decl.name,
        tenant: this.tenant,
        key: this.key,
        reason,
        body_entered: entered,
        effect_may_have_landed: entered || reason !== 'key_not_derivable',
        workflow_id: w?.workflowId,
        run_id: w?.runId,
        activity_id: this.info.activityId,
        token: this.token,
        check: this.check,
        retention: (this.decl.policy.retentionMs ?? 0) * 1e6,
      },
      cause,
    );
  }

  private mismatched(rec: StoreRecord): boolean {
    return this.check !== '' && checksDiffer(this.check, rec.check);
  }

  /** Ends a call the record answered: deduplicated, mismatched, or indeterminate. */
  private answered(res: Result, waited: boolean): unknown {
    const rec = res.record!;
    if (this.mismatched(rec)) {
      const w = this.info.workflowExecution;
      throw argumentsMismatchError({
        activity: this.decl.name,
        tenant: this.tenant,
        key: this.key,
        arguments: [...(this.decl.policy.checkArguments ?? [])],
        found:
          res.status === Status.Held ? 'takeover' : waited ? 'waited' : res.status === Status.Indeterminate ? 'indeterminate' : 'completed',
        record_workflow_id: rec.origin.workflowId,
        record_run_id: rec.origin.runId,
        workflow_id: w?.workflowId,
        run_id: w?.runId,
        activity_id: this.info.activityId,
      });
    }
    if (res.status === Status.Completed) {
      try {
        return answerOf(decodeOutcome(rec.outcome, this.opts.payloadConverter));
      } catch (e) {
        if (!(e instanceof OutcomeUnreadableError)) throw e;
        throw ApplicationFailure.create({
          message: `idempotency: the recorded outcome of ${JSON.stringify(this.decl.name)} (key ${this.key}) cannot be decoded: ${e.message}`,
          type: ERROR_TYPE_OUTCOME_UNREADABLE,
          nonRetryable: true,
        });
      }
    }
    this.token = rec.token;
    throw this.indeterminate('recorded', false, new Error(rec.reason));
  }

  /** Claims, retrying while the store does not answer (claimRetryMs), heartbeating; then ends the call not run. */
  private async claimWithRetry(lost: StoreRecord | undefined): Promise<Result> {
    const until = Date.now() + this.opts.claimRetryMs;
    let pause = 50;
    for (;;) {
      try {
        return await this.opts.store.claim({
          tenant: this.tenant,
          key: this.key,
          holder: this.holder,
          leaseMs: this.opts.leaseMs,
          supersede: lost?.token ?? 0n,
          check: this.check,
          retentionMs: this.decl.policy.retentionMs ?? 0,
          origin: {
            workflowId: this.info.workflowExecution?.workflowId ?? '',
            runId: this.info.workflowExecution?.runId ?? '',
            activityType: this.info.activityType,
            activityId: this.info.activityId,
            attempt: this.info.attempt,
          },
        });
      } catch (e) {
        if (Date.now() + pause >= until || this.ctx.cancellationSignal.aborted) {
          const w = this.info.workflowExecution;
          throw notRunError(
            {
              activity: this.decl.name,
              tenant: this.tenant,
              key: this.key,
              reason: 'store_unavailable',
              workflow_id: w?.workflowId,
              run_id: w?.runId,
              activity_id: this.info.activityId,
            },
            new Error(`idempotency: activity ${JSON.stringify(this.decl.name)} was not run: the store did not answer: ${(e as Error).message}`),
          );
        }
        this.heartbeat();
        await sleep(pause);
        pause = Math.min(pause * 2, 2000);
      }
    }
  }

  private heartbeat(): void {
    try {
      this.ctx.heartbeat();
    } catch {
      // A context without heartbeats (tests) has nobody to tell.
    }
  }

  /** Waits for the live holder under token to settle, or its lease to run out, heartbeating as it goes. */
  private async waitFor(token: bigint): Promise<Result> {
    let every = this.opts.waitHeartbeatMs;
    const hb = this.info.heartbeatTimeoutMs;
    if (hb && hb / 2 < every) every = hb / 2;
    for (;;) {
      if (this.ctx.cancellationSignal.aborted) throw this.ctx.cancellationSignal.reason ?? new Error('cancelled');
      let res: Result | undefined;
      try {
        res = await this.opts.store.wait(this.tenant, this.key, token, every);
      } catch (e) {
        // The store did not answer: claim again, which retries and ends not run.
        this.heartbeat();
        return this.claimWithRetry(undefined);
      }
      if (res) return res;
      this.heartbeat();
    }
  }

  /** Runs the body under the claim, renewing its lease, and settles the claim with what it returned. */
  private async runBody(input: ActivityExecuteInput, next: Next<ActivityInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    let superseded: Error | undefined;
    let renewing: Promise<unknown> = Promise.resolve();
    const timer = setInterval(() => {
      renewing = this.opts.store.renew(this.tenant, this.key, this.token, this.opts.leaseMs).catch((e) => {
        if (e instanceof NotHolderError) {
          superseded = e;
          clearInterval(timer);
        }
      });
    }, Math.max(10, Math.floor(this.opts.leaseMs / 3)));
    let result: unknown;
    let err: unknown;
    let failed = false;
    try {
      result = await next(input);
    } catch (e) {
      err = e;
      failed = true;
    } finally {
      clearInterval(timer);
      await renewing;
    }
    const effectful = this.decl.kind === Kind.EFFECTFUL;
    if (superseded) {
      // The key is another caller's now: nothing may be recorded under it.
      if (failed && effectful && !this.decl.isDefinite(err) && !isNoEffect(err)) {
        throw this.indeterminate('holder_lost', true, new Error(`idempotency: the claim was taken over by another caller: ${errText(err)}`));
      }
      if (failed) throw err;
      return result;
    }
    if (failed) {
      if (this.decl.isDefinite(err)) {
        await this.complete(encodeFailure(err, this.opts.payloadConverter));
        throw err;
      }
      if (effectful && !isNoEffect(err)) {
        const cause = err instanceof Error ? err : new Error(errText(err));
        await this.markIndeterminate('body_failed', cause);
        throw this.indeterminate('body_failed', true, cause);
      }
      await this.release();
      throw err;
    }
    let outcome: Uint8Array;
    try {
      outcome = encodeOutcome(result, this.opts.payloadConverter);
    } catch (e) {
      const cause = new Error(`idempotency: encoding the result of ${this.decl.name}: ${errText(e)}`);
      if (effectful) {
        await this.markIndeterminate('body_failed', cause);
        throw this.indeterminate('body_failed', true, cause);
      }
      await this.release();
      throw cause;
    }
    await this.complete(outcome);
    return result;
  }

  /** Records the outcome under the claim, retrying briefly; the result stands even if the store stays down. */
  private async complete(outcome: Uint8Array): Promise<void> {
    for (let attempt = 0; attempt < 3; attempt++) {
      if (attempt > 0) await sleep(100 * attempt);
      try {
        await this.opts.store.complete(this.tenant, this.key, this.token, outcome);
        return;
      } catch (e) {
        if (e instanceof NotHolderError) {
          // An earlier attempt may have landed with its answer lost.
          return;
        }
      }
    }
  }

  private async release(): Promise<void> {
    try {
      await this.opts.store.release(this.tenant, this.key, this.token);
    } catch {
      // The claim stays pending until its lease runs out; a retry waits for that.
    }
  }

  private async markIndeterminate(reason: Reason, cause: Error): Promise<void> {
    for (let attempt = 0; attempt < 3; attempt++) {
      if (attempt > 0) await sleep(100 * attempt);
      try {
        await this.opts.store.markIndeterminate(this.tenant, this.key, this.token, `${reason}: ${cause.message}`);
        return;
      } catch (e) {
        if (e instanceof NotHolderError) return;
      }
    }
  }
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
