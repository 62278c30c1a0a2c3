package activity

import (
	"context"

	"github.com/tesserix/idempotency/keyspace"
)

type keyContextKey struct{}

// Key returns the idempotency key of the execution running under ctx and
// whether there is one. The dispatcher puts it there before the body runs;
// pass it to a downstream that has an Idempotency-Key header of its own.
// Activities without a policy, READ_ONLY activities and executions whose key
// could not be derived have none.
func Key(ctx context.Context) (keyspace.Key, bool) {
	k, ok := ctx.Value(keyContextKey{}).(keyspace.Key)
	return k, ok && k != ""
}

// WithKey returns a copy of ctx carrying key, as the dispatcher does before
// it runs an activity's body. Tests use it to run a body directly.
func WithKey(ctx context.Context, key keyspace.Key) context.Context {
	return context.WithValue(ctx, keyContextKey{}, key)
}
