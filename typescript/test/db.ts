// The test database: PostgreSQL at IDEMPOTENCY_TEST_PG (default
// postgres://postgres@127.0.0.1:5432/test), each test file in a table of
// its own in the schema ts_idempotency, so Go tests running at the same
// time never meet these records.

import { Pool } from 'pg';
import { PgStore, type PgStoreOptions } from '../src/pgstore';

/** The connection string of the test database. */
export const pgURL = process.env.IDEMPOTENCY_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432/test';

/** The schema every TypeScript test table is made in. */
export const testSchema = 'ts_idempotency';

/** A pool on the test database. */
export function testPool(): Pool {
  return new Pool({ connectionString: pgURL, max: 8 });
}

let seq = 0;

/** A fresh table's name, unique to this process. */
export function freshTable(prefix: string): string {
  return `${prefix}_${process.pid}_${Date.now().toString(36)}_${seq++}`;
}

/** A store on a fresh table, its schema made; drop() removes the table. */
export async function freshStore(pool: Pool, prefix: string, opts: PgStoreOptions = {}): Promise<PgStore & { drop(): Promise<void> }> {
  const table = freshTable(prefix);
  const store = new PgStore(pool, { schema: testSchema, table, ...opts }) as PgStore & { drop(): Promise<void> };
  await store.ensureSchema();
  store.drop = async () => {
    await pool.query(`DROP TABLE IF EXISTS "${testSchema}"."${table}"`);
  };
  return store;
}
