package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// claimFast is the claim's common path: one MULTI of
//
//	SET rec value NX GET PX ttl     write the packed record if the key is free,
//	                                and answer the value it holds otherwise
//	ZADD age NX now member          list it (a duplicate's entry is kept)
//
// and, once a minute per tenant and process (ageDue), PEXPIRE NX and
// PEXPIRE GT, which keep the age index alive at least ageTTL without ever
// shortening it. It returns "" when it wrote the record, the packed value
// that stopped it otherwise, and Redis's WRONGTYPE error when the key holds
// a record hash of the previous layout. A claim that wrote the record but
// found the key already in the age index (an entry left by a record Redis
// expired before a Sweep dropped it) rescores that entry with ZADD XX GT,
// which never moves an entry a later claim set.
//
// With ReplicaAcks it runs on the master that owns the record, followed by
// WAIT on the same connection, and takes back a claim too few replicas
// acknowledged (ErrNotReplicated).
//
// With Options.IndexOnlyWhatWaits it is claimSet, after markUnindexed.
func (s *Store) claimFast(ctx context.Context, keys []string, member, token, value string,
	now stamp, ttl, ageTTL, pub, channel string) (string, error) {
	if s.sparse {
		// The prefix says it holds unindexed records before it does. When
		// too few replicas acknowledge that, the claim lists itself, as
		// without the option: no record is ever missing from both.
		err := s.markUnindexed(ctx, now)
		if err == nil {
			return s.claimSet(ctx, keys, member, token, value, ttl, pub, channel)
		}
		if !errors.Is(err, ErrNotReplicated) {
			return "", err
		}
	}
	extend, extendMs := s.ageDue(keys[1], now, ageTTL)
	// queue adds the MULTI's commands to pipe; within a MULTI a command's
	// own reply is only "QUEUED", and EXEC's holds theirs.
	queue := func(pipe redis.Pipeliner) (set, zadd *redis.Cmd) {
		set = pipe.Do(ctx, "set", keys[0], value, "nx", "get", "px", ttl)
		zadd = pipe.Do(ctx, "zadd", keys[1], "nx", now.arg(), member)
		if extend {
			pipe.Do(ctx, "pexpire", keys[1], extendMs, "nx")
			pipe.Do(ctx, "pexpire", keys[1], extendMs, "gt")
		}
		return set, zadd
	}
	if s.replicaAcks == 0 {
		var set, zadd *redis.Cmd
		_, _ = s.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			set, zadd = queue(pipe)
			return nil
		})
		prev, err := set.Text()
		if err != nil && err != redis.Nil {
			s.refreshTopology(ctx, err)
			s.forgetAgeDue(keys[1], extend)
			return "", err
		}
		if err == nil {
			return prev, nil
		}
		if n, err := zadd.Int64(); err == nil && n == 0 {
			s.rescore(ctx, s.client, keys[1], member, now)
		}
		return "", nil
	}
	return s.claimFastReplicated(ctx, keys, member, token, now, extend, queue, pub, channel)
}

// claimFastReplicated is claimFast with ReplicaAcks: the MULTI on the
// master that owns the record, then WAIT on the same connection.
func (s *Store) claimFastReplicated(ctx context.Context, keys []string, member, token string, now stamp,
	extend bool, queue func(redis.Pipeliner) (set, zadd *redis.Cmd), pub, channel string) (string, error) {
	node, err := s.nodeFor(ctx, keys[0])
	if err != nil {
		return "", err
	}
	pipe := node.Pipeline()
	pipe.Do(ctx, "multi")
	queue(pipe)
	exec := pipe.Do(ctx, "exec")
	// Pipeliner has no Wait: the client's ReadTimeout must outlast
	// ReplicaAckTimeout (go-redis's default of 3 s outlasts the default).
	wait := pipe.Do(ctx, "wait", s.replicaAcks, s.replicaAckTimeout.Milliseconds())
	_, _ = pipe.Exec(ctx)
	v, err := exec.Result()
	if err != nil {
		s.forgetAgeDue(keys[1], extend)
		return "", s.nodeError(ctx, err)
	}
	reply, _ := v.([]any)
	if len(reply) < 2 {
		return "", fmt.Errorf("unexpected EXEC reply %v", v)
	}
	switch r := reply[0].(type) {
	case nil:
	case string:
		return r, nil
	case error:
		return "", r
	default:
		return "", fmt.Errorf("unexpected SET reply %T", r)
	}
	if n, ok := reply[1].(int64); ok && n == 0 {
		s.rescore(ctx, node, keys[1], member, now)
	}
	return "", s.replicated(ctx, node, wait, keys, member, token, pub, channel)
}

// replicated judges the WAIT that followed a claim of a free key on node:
// nil when enough replicas acknowledged it. Otherwise the claim is not
// known to be on enough replicas, and a failover now would lose it: it
// takes it back, so that a retry can claim again (it claimed a free key:
// nothing of a lost holder's is at stake), and returns ErrNotReplicated.
func (s *Store) replicated(ctx context.Context, node redis.Scripter, wait *redis.Cmd,
	keys []string, member, token, pub, channel string) error {
	acks, werr := wait.Int64()
	if werr == nil && acks >= int64(s.replicaAcks) {
		return nil
	}
	s.undoClaim(ctx, node, keys, member, token, pub, channel)
	if werr != nil {
		return fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, werr)
	}
	return fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, acks, s.replicaAcks, s.replicaAckTimeout)
}

// claimSet is claimFast with Options.IndexOnlyWhatWaits: the one command
//
//	SET rec value NX GET PX ttl
//
// with no MULTI and no age index entry (a claim of a free key is not yet
// something an operator looks for: see the option). Its answer is
// claimFast's. With ReplicaAcks it runs on the master that owns the
// record, followed by WAIT on the same connection, as claimFastReplicated.
func (s *Store) claimSet(ctx context.Context, keys []string, member, token, value, ttl,
	pub, channel string) (string, error) {
	if s.replicaAcks == 0 {
		prev, err := s.client.Do(ctx, "set", keys[0], value, "nx", "get", "px", ttl).Text()
		switch err {
		case nil:
			return prev, nil
		case redis.Nil:
			return "", nil
		}
		s.refreshTopology(ctx, err)
		return "", err
	}
	node, err := s.nodeFor(ctx, keys[0])
	if err != nil {
		return "", err
	}
	pipe := node.Pipeline()
	set := pipe.Do(ctx, "set", keys[0], value, "nx", "get", "px", ttl)
	// See claimFastReplicated on the ReadTimeout WAIT needs.
	wait := pipe.Do(ctx, "wait", s.replicaAcks, s.replicaAckTimeout.Milliseconds())
	_, _ = pipe.Exec(ctx)
	prev, err := set.Text()
	switch {
	case err == nil:
		return prev, nil
	case err != redis.Nil:
		return "", s.nodeError(ctx, err)
	}
	return "", s.replicated(ctx, node, wait, keys, member, token, pub, channel)
}

// rescore moves member's entry in the age index to now, unless a later
// claim already moved it further.
func (s *Store) rescore(ctx context.Context, c redis.Cmdable, age, member string, now stamp) {
	_ = c.ZAddArgs(ctx, age, redis.ZAddArgs{XX: true, GT: true, Members: []redis.Z{{Score: float64(now), Member: member}}}).Err()
}

// ageDue reports whether a claim at now must extend the age index age to
// ageTTL milliseconds: when this Store has not extended it far enough
// already. It then records the extension as made, and returns the time to
// live to set: ageTTL and a minute of slack, so that the claims of the
// next minute skip it.
func (s *Store) ageDue(age string, now stamp, ageTTL string) (bool, string) {
	ms, _ := strconv.ParseInt(ageTTL, 10, 64) // Formatted by indexTTLWithin.
	want := int64(now) + ms*1000
	if v, ok := s.ageExtended.Load(age); ok && v.(int64) >= want {
		return false, ""
	}
	s.ageExtended.Store(age, want+60_000_000)
	return true, strconv.FormatInt(ms+60_000, 10)
}

// forgetAgeDue undoes ageDue's record of an extension that may not have
// been made.
func (s *Store) forgetAgeDue(age string, extended bool) {
	if extended {
		s.ageExtended.Delete(age)
	}
}

// nodeError is an error of the replica-acknowledged path, which talks to
// one node and follows no redirection: after a failover or a resharding
// (MOVED, ASK, a dead node) it lets the next claim find the slot's new
// owner.
func (s *Store) nodeError(ctx context.Context, err error) error {
	if c, ok := s.client.(*redis.ClusterClient); ok {
		c.ReloadState(ctx)
	}
	if movedOrAsk(err) {
		return fmt.Errorf("%w: %w", errSlotMoved, err)
	}
	return err
}

// readFields reads the record at key, in either layout, as its fields by
// name; nil when there is none.
func (s *Store) readFields(ctx context.Context, c redis.Cmdable, key string) (map[string]string, error) {
	v, err := c.Get(ctx, key).Result()
	switch {
	case err == redis.Nil:
		return nil, nil
	case isWrongType(err):
		m, err := c.HGetAll(ctx, key).Result()
		if err != nil || len(m) == 0 {
			return nil, err
		}
		return m, nil
	case err != nil:
		return nil, err
	}
	return unpack(v)
}
