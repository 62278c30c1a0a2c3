// Where the specification's vectors are: IDEMPOTENCY_SPEC_DIR, else ../spec
// beside this package (the repository's spec/ folder).

import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';

/** The spec folder the tests read. */
export const specDir = path.resolve(process.env.IDEMPOTENCY_SPEC_DIR ?? path.join(__dirname, '..', '..', '..', 'spec'));

/** A vector file's contents. */
export interface VectorFile<V> {
  version: number;
  generated_by: string;
  vectors: V[];
}

/** Reads spec/vectors/<name>, or undefined when the file is not there. */
export function readVectors<V>(name: string): VectorFile<V> | undefined {
  const p = path.join(specDir, 'vectors', name);
  if (!existsSync(p)) return undefined;
  return JSON.parse(readFileSync(p, 'utf8')) as VectorFile<V>;
}

/** The path of spec/vectors/<name>. */
export function vectorPath(name: string): string {
  return path.join(specDir, 'vectors', name);
}
