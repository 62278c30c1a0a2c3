package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultReplicaAckTimeout is how long a claim waits for replicas to
// acknowledge it when [Options.ReplicaAcks] is set and
// [Options.ReplicaAckTimeout] is zero.
const DefaultReplicaAckTimeout = time.Second

// ErrNotReplicated is returned by [Store.Claim] when [Options.ReplicaAcks]
// replicas did not acknowledge an acquired claim within
// [Options.ReplicaAckTimeout]. The claim has been taken back (as far as the
// master still answers) as the store contract's rule for an uncertain
// claim says: a claim of a free key is deleted, so the caller may claim
// again later; a takeover is left standing with its lease ended, so the
// key is never left free and the next claim finds its holder presumed
// gone. It matches store.ErrUnavailable: the interceptor retries the claim
// and never runs the body on a claim a failover could lose.
var ErrNotReplicated = errors.New("redisstore: claim not acknowledged by enough replicas")

// validateReplicas checks and defaults the replica options of o.
func (o Options) validateReplicas() (Options, error) {
	switch {
	case o.ReplicaAcks < 0:
		return o, optionError("ReplicaAcks", "must not be negative")
	case o.ReplicaAckTimeout < 0:
		return o, optionError("ReplicaAckTimeout", "must not be negative")
	case o.ReplicaAckTimeout > 0 && o.ReplicaAckTimeout < time.Millisecond:
		return o, optionError("ReplicaAckTimeout", "must be at least a millisecond (WAIT counts milliseconds)")
	}
	if o.ReplicaAcks > 0 {
		o.ReplicaAckTimeout = cmp.Or(o.ReplicaAckTimeout, DefaultReplicaAckTimeout)
	}
	return o, nil
}

// runClaim runs the claim script (the claim's uncommon path). With
// ReplicaAcks set it runs it on the master that owns the record, followed
// by WAIT on the same connection (WAIT counts the writes of its own
// connection), and refuses an acquired claim that too few replicas
// acknowledged: it takes it back and returns ErrNotReplicated.
func (c *claim) runClaim(ctx context.Context, a claimArgs) (any, error) {
	s, keys := c.s, c.keys
	args := a.params().argv()
	if s.replicaAcks == 0 {
		return run(ctx, s.client, claimScript, keys, args...)
	}
	node, err := nodeFor(ctx, s.client, keys[0])
	if err != nil {
		return nil, err
	}
	var (
		eval *redis.Cmd
		wait *redis.Cmd
	)
	for range 2 {
		pipe := node.Pipeline()
		eval = pipe.EvalSha(ctx, claimScript.Hash(), keys, args...)
		// Pipeliner has no Wait: the client's ReadTimeout must outlast
		// ReplicaAckTimeout (go-redis's default of 3 s outlasts the default).
		wait = pipe.Do(ctx, "wait", s.replicaAcks, s.replicaAckTimeout.Milliseconds())
		_, _ = pipe.Exec(ctx)
		if err := eval.Err(); err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			break
		}
		if err := claimScript.Load(ctx, node).Err(); err != nil {
			return nil, err
		}
	}
	v, err := eval.Result()
	if err != nil {
		return nil, nodeError(ctx, s.client, err)
	}
	if reply, ok := v.([]any); !ok || len(reply) == 0 || reply[0] != claimAcquired {
		return v, nil
	}
	acks, werr := wait.Int64()
	if werr == nil && acks >= int64(s.replicaAcks) {
		return v, nil
	}
	// Not known to be on enough replicas: a failover now would lose it.
	// Take it back, so that a retry can claim again. A takeover is not
	// deleted: it replaced a lost holder's pending record, and deleting it
	// would free a key whose effect may have landed; its lease is ended
	// instead (undoClaimScript), which is what a replica that missed the
	// takeover holds too: a pending claim whose holder is presumed gone.
	c.undoClaim(ctx, node)
	if werr != nil {
		return nil, fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, werr)
	}
	return nil, fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, acks, s.replicaAcks, s.replicaAckTimeout)
}

// errSlotMoved marks a MOVED or ASK reply on the replica-acknowledged path,
// which talks to one node and does not follow redirections.
var errSlotMoved = errors.New("hash slot moved")

func movedOrAsk(err error) bool {
	return redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")
}

// replicaUnavailable reports the replies of a Cluster or a replicated
// Redis in flux that mean "not now": too few replicas acknowledged a claim,
// a master configured with min-replicas-to-write refuses a write
// (NOREPLICAS), or a slot answered MOVED or ASK past the client's
// redirections (a failover whose nodes do not yet agree). None of them ran
// the command.
func replicaUnavailable(err error) bool {
	return errors.Is(err, ErrNotReplicated) || errors.Is(err, errSlotMoved) ||
		movedOrAsk(err) || redis.HasErrorPrefix(err, "NOREPLICAS")
}
