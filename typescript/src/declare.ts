// Declarations: what each activity is (READ_ONLY, IDEMPOTENT, EFFECTFUL)
// and which of its arguments identify its effect, as Go's activity.Declare
// has them (activity/declare.go).

import { MissingArgumentError, Secret, deriveCheck, deriveKey } from './keys';

/** What an activity is. */
export enum Kind {
  /** Reads only: nothing is claimed or recorded; retried freely. */
  READ_ONLY = 'READ_ONLY',
  /** Running it twice is harmless but wasteful: deduplicated, and its key freed on failure. */
  IDEMPOTENT = 'IDEMPOTENT',
  /** Its effect must happen at most once: deduplicated; a failure after the body began is indeterminate. */
  EFFECTFUL = 'EFFECTFUL',
}

/** A declaration's policy. Choose exactly one of keyArguments, keyAllArguments, oncePerRun for IDEMPOTENT and EFFECTFUL. */
export interface Policy {
  kind: Kind;
  /** The names of the arguments that identify one effect. */
  keyArguments?: string[];
  /** Key on every argument: the list of them, under the name "arguments". */
  keyAllArguments?: boolean;
  /** One effect per run: the activity's name alone is the key. */
  oncePerRun?: boolean;
  /**
   * The names of the activity's positional parameters, in order. Required
   * when key or check arguments are named and the activity takes them
   * positionally; without it, the names are read as members of the one
   * object argument (as Go reads a struct parameter's JSON fields).
   */
  params?: string[];
  /** Arguments that do not enter the key but must match the record's (a c1: digest). */
  checkArguments?: string[];
  /** ApplicationFailure types that are definite outcomes: recorded and answered to every duplicate (EFFECTFUL only). */
  definiteErrors?: string[];
  /** How long the record is kept, ms; 0: the store's TTL. */
  retentionMs?: number;
}

/** DeclarationError: an invalid declaration. */
export class DeclarationError extends Error {
  constructor(activity: string, reason: string) {
    super(`idempotency: declaration of activity ${JSON.stringify(activity)}: ${reason}`);
    this.name = 'DeclarationError';
  }
}

/** The name a KeyAllArguments declaration keys the list of its arguments under. */
const ALL_ARGUMENTS = 'arguments';

function firstDuplicate(names: readonly string[]): string | undefined {
  const seen = new Set<string>();
  for (const n of names) {
    if (seen.has(n)) return n;
    seen.add(n);
  }
  return undefined;
}

/** Declaration: one activity type's policy, checked. */
export class Declaration {
  private readonly argIndex: Map<string, number> | undefined;

  /** Declares the activity registered under name. */
  constructor(readonly name: string, readonly policy: Readonly<Policy>) {
    const p = policy;
    const fail = (reason: string): never => {
      throw new DeclarationError(name, reason);
    };
    if (!name) fail('the activity has no name');
    if (!Object.values(Kind).includes(p.kind)) fail(`unknown kind ${String(p.kind)}`);
    const keys = p.keyArguments ?? [];
    const checks = p.checkArguments ?? [];
    const params = p.params ?? [];
    let dup = firstDuplicate(keys);
    if (dup !== undefined) fail(`argument ${JSON.stringify(dup)}: named twice in keyArguments`);
    dup = firstDuplicate(checks);
    if (dup !== undefined) fail(`argument ${JSON.stringify(dup)}: named twice in checkArguments`);
    for (const c of checks) {
      if (c === '') fail('checkArguments holds an empty name');
      if (keys.includes(c)) fail(`argument ${JSON.stringify(c)}: named in both keyArguments and checkArguments`);
    }
    dup = firstDuplicate(params);
    if (dup !== undefined) fail(`argument ${JSON.stringify(dup)}: named twice in params`);
    if (params.includes('')) fail('params holds an empty name');
    if ((p.retentionMs ?? 0) < 0) fail('retentionMs must not be negative');
    if (p.definiteErrors?.length && p.kind !== Kind.EFFECTFUL) fail(`definiteErrors applies to EFFECTFUL activities only, not ${p.kind}`);
    if (p.kind === Kind.READ_ONLY) {
      if (checks.length) fail('a READ_ONLY activity keeps no record to check arguments against');
      if (p.retentionMs) fail('a READ_ONLY activity keeps no record to retain');
      if (p.keyAllArguments || p.oncePerRun || keys.length) fail('a READ_ONLY activity has no key');
      this.argIndex = undefined;
      return;
    }
    const n = Number(keys.length > 0) + Number(!!p.keyAllArguments) + Number(!!p.oncePerRun);
    if (n === 0) {
      fail(
        'names no key arguments, which would make every call of the activity in a run one key; name the arguments that identify one effect (keyArguments), ' +
          'or key on every argument (keyAllArguments), or say that one effect per run is meant (oncePerRun)',
      );
    }
    if (n > 1) fail('keyArguments, keyAllArguments and oncePerRun are three ways to say what the key is: choose one');
    if (p.keyAllArguments && checks.length) fail('with keyAllArguments every argument is in the key already: there is nothing left to check');
    if (params.length) {
      this.argIndex = new Map();
      for (const k of [...keys, ...checks]) {
        const i = params.indexOf(k);
        if (i < 0) fail(`argument ${JSON.stringify(k)}: not a parameter of the activity (params: ${params.join(', ')})`);
        this.argIndex.set(k, i);
      }
    } else if (keys.length === 0 && checks.length === 0) {
      this.argIndex = new Map();
    } else {
      this.argIndex = undefined; // read from the one object argument
    }
    Object.freeze(this.policy);
  }

  /** The activity's kind. */
  get kind(): Kind {
    return this.policy.kind;
  }

  /** Whether err is a definite outcome of this activity (an ApplicationFailure of a type in definiteErrors). */
  isDefinite(err: unknown): boolean {
    const types = this.policy.definiteErrors;
    if (!types?.length || typeof err !== 'object' || err === null) return false;
    const e = err as { name?: string; type?: unknown };
    return e.name === 'ApplicationFailure' && typeof e.type === 'string' && types.includes(e.type);
  }

  /** What the keyspace reads names from: the one object argument, or an object of the named positional arguments. */
  private argumentsOf(args: readonly unknown[], names: readonly string[]): Record<string, unknown> {
    if (this.argIndex === undefined) {
      const a = args[0];
      if (a === undefined || a === null) return {};
      if (typeof a !== 'object' || Array.isArray(a)) {
        throw new MissingArgumentError(names[0] ?? '');
      }
      return a as Record<string, unknown>;
    }
    const m: Record<string, unknown> = {};
    for (const k of names) {
      const i = this.argIndex.get(k);
      // An argument the JSON converter sent as null arrives as undefined.
      if (i !== undefined && i < args.length) m[k] = args[i] === undefined ? null : args[i];
    }
    return m;
  }

  /** The key of a call of this activity with args, in tenant and run (v1:, or k1: under secret). */
  key(tenant: string, run: string, args: readonly unknown[], secret?: Secret | null): string {
    const base = { tenant, run, activity: this.name, secret };
    if (this.policy.keyAllArguments) {
      return deriveKey({
        ...base,
        arguments: { [ALL_ARGUMENTS]: args.map((a) => (a === undefined ? null : a)) },
        keyArguments: [ALL_ARGUMENTS],
      });
    }
    const keys = this.policy.keyArguments ?? [];
    if (this.argIndex === undefined && args.length === 0 && keys.length > 0) throw new MissingArgumentError(keys[0]);
    return deriveKey({ ...base, arguments: this.argumentsOf(args, keys), keyArguments: keys });
  }

  /** The check digest of a call's checked arguments; "" when none are declared. */
  check(tenant: string, run: string, args: readonly unknown[], secret?: Secret | null): string {
    const names = this.policy.checkArguments ?? [];
    if (names.length === 0) return '';
    return deriveCheck({ tenant, run, activity: this.name, arguments: this.argumentsOf(args, names), names, secret });
  }
}

/** Declares an activity. */
export function declare(name: string, policy: Policy): Declaration {
  return new Declaration(name, policy);
}

/** A READ_ONLY activity. */
export function readOnly(name: string): Declaration {
  return new Declaration(name, { kind: Kind.READ_ONLY });
}

/** An IDEMPOTENT activity keyed on keyArguments, its positional parameters named by params (or, params empty, members of its one object argument). */
export function idempotent(name: string, params: string[], ...keyArguments: string[]): Declaration {
  return new Declaration(name, { kind: Kind.IDEMPOTENT, params, keyArguments });
}

/** An EFFECTFUL activity keyed on keyArguments, its positional parameters named by params (or, params empty, members of its one object argument). */
export function effectful(name: string, params: string[], ...keyArguments: string[]): Declaration {
  return new Declaration(name, { kind: Kind.EFFECTFUL, params, keyArguments });
}
