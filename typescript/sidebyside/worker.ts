// The TypeScript worker of the Go side-by-side test
// (integration/typescript_test.go): it runs the EFFECTFUL activity "Book"
// under the interceptor, on the same PostgreSQL table as the Go worker
// beside it. Every execution of its body books into the test's ledger
// table; a flight named FAIL-… books, then fails: its outcome is unknown.
//
// Environment: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TASK_QUEUE,
// PG_URL, PG_SCHEMA (the store's schema, default table), LEDGER_TABLE
// (schema-qualified, quoted by the caller). It prints "ready" once it
// polls, and stops on SIGTERM or SIGINT.

import { NativeConnection, Worker } from '@temporalio/worker';
import { Pool } from 'pg';
import { Kind, PgStore, declare, idempotencyInterceptors } from '../src';

function env(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`sidebyside worker: ${name} is not set`);
  return v;
}

async function main(): Promise<void> {
  const pool = new Pool({ connectionString: env('PG_URL'), max: 4 });
  const store = new PgStore(pool, { schema: env('PG_SCHEMA') });
  const ledger = env('LEDGER_TABLE');
  const connection = await NativeConnection.connect({ address: env('TEMPORAL_ADDRESS') });
  const activities = {
    async Book(req: { flight: string; request_id?: string }): Promise<string> {
      await pool.query(`INSERT INTO ${ledger} (impl, flight) VALUES ('typescript', $1)`, [req.flight]);
      if (req.flight.startsWith('FAIL-')) {
        throw new Error('the connection dropped after the booking was sent');
      }
      return `booked ${req.flight} by typescript`;
    },
  };
  const worker = await Worker.create({
    connection,
    namespace: env('TEMPORAL_NAMESPACE'),
    taskQueue: env('TASK_QUEUE'),
    activities,
    interceptors: {
      activity: [
        idempotencyInterceptors({
          store,
          declarations: [declare('Book', { kind: Kind.EFFECTFUL, keyArguments: ['flight'] })],
          leaseMs: 2000,
          identity: `${process.pid}@sidebyside-ts`,
        }),
      ],
    },
  });
  const stop = () => worker.shutdown();
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  const running = worker.run();
  process.stdout.write('ready\n');
  await running;
  await connection.close();
  await pool.end();
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`sidebyside worker: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
