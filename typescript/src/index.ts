// @tesserix/idempotency: Temporal activities safe to retry, for TypeScript
// workers, on the same PostgreSQL records as the Go library
// github.com/tesserix/idempotency. See README.md.

export * from './canonical';
export * from './keys';
export * from './declare';
export * from './errors';
export * from './outcome';
export * from './pgstore';
export * from './interceptor';
