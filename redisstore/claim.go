package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/internal/backoff"
	"github.com/tesserix/idempotency/store"
)

// Claim's paths. A claim computes its values once (newClaim: the clock,
// the token, the expiries, the keys, the packed record) and takes one of
// three paths. All three write the same packed record (record.go), and
// answer alike: acquired, or the live record that holds the key.
//
//	path       what it is               taken when                   what it sends
//	---------  -----------------------  ---------------------------  ------------------------------
//	MULTI      claimFast: one           no takeover (Supersede 0),   MULTI
//	           transaction, no script   and IndexOnlyWhatWaits off   SET rec value NX GET PX ttl
//	                                    (or its marker's write not   ZADD age NX now key
//	                                    acknowledged by replicas)    [PEXPIRE age ms NX, PEXPIRE
//	                                                                 age ms GT: once a minute per
//	                                                                 tenant and process]
//	                                                                 EXEC
//	SET-only   claimSet: one command,   no takeover, and             SET rec value NX GET PX ttl
//	           no age index entry       IndexOnlyWhatWaits on        (after SET P:unindexed, once
//	                                                                 a minute: markUnindexed)
//	script     claimByScript:           a takeover (Supersede set);  EVALSHA claimScript over rec
//	           claimScript reads the    or MULTI / SET-only found a  and age, its arguments named
//	           record and decides in    record expired but still in  by claimArgs (args.go)
//	           Redis                    Redis, or a record hash of
//	                                    the previous layout
//	                                    (WRONGTYPE)
//
// A MULTI that wrote the record but found the key already in the age index
// (an entry a Sweep has not yet dropped) rescores it (ZADD XX GT). With
// Options.ReplicaAcks each path runs on the master that owns the record,
// followed by WAIT on the same connection (claimFastReplicated, claimSet,
// runClaim), and an acquired claim too few replicas acknowledged is taken
// back and answered ErrNotReplicated. A claim whose answer was lost to a
// timeout is taken back too. Taking back (undoClaim) deletes a claim of a
// free key and ends a takeover's lease, never freeing the key.

// Claim implements [store.Store.Claim]. Its common path runs no script:
// one MULTI holds SET NX GET PX, which writes the packed record when the
// key is free and otherwise answers the record that holds it, and ZADD NX
// of the key to the tenant's age index (claimFast); with
// Options.IndexOnlyWhatWaits, SET NX GET PX alone (claimSet). A takeover (Supersede
// set), and a record the MULTI cannot answer from (expired but still in
// Redis, a takeover's, or a record hash of the previous layout), go to
// claimScript.
func (s *Store) Claim(ctx context.Context, p store.ClaimParams) (store.Result, error) {
	if err := p.Validate(); err != nil {
		return store.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Result{}, translate(ctx, "claim", err)
	}
	var c claim
	if err := s.newClaim(ctx, p, &c); err != nil {
		return store.Result{}, err
	}
	if p.Supersede == 0 {
		// A takeover finds the key held: it goes straight to the script.
		prev, err := c.claimFast(ctx)
		if res, done, err := c.judgeFast(ctx, prev, err); done {
			return res, err
		}
	}
	return c.claimByScript(ctx)
}

// claim is one Claim's values, computed once for either of its paths.
type claim struct {
	s               *Store // the store it claims in
	p               store.ClaimParams
	now, lease, exp stamp
	ttl, ageTTL     string // milliseconds
	token           int64
	tok             string // token, as Redis keeps it
	keys            []string
	origin          string // p.Origin as JSON; "" for none
	value           string // the packed record claimFast writes
	pub, channel    string // how a change is announced
}

// newClaim fills c, the caller's (a claim kept off the heap), for p.
func (s *Store) newClaim(ctx context.Context, p store.ClaimParams, c *claim) error {
	*c = claim{s: s, p: p, now: s.now(ctx), token: store.NewToken()}
	c.lease = c.now.add(p.Lease)
	window := store.RetentionOr(keptRetention(p.Retention), s.ttl)
	c.exp, c.ttl = expiryWithin(c.now, c.lease, window)
	c.ageTTL = indexTTLWithin(c.ttl, window)
	c.tok = strconv.FormatInt(c.token, 10)
	c.keys = s.keys.recordAndAgeKeys(p.Tenant, p.Key)
	if p.Origin != (store.Origin{}) {
		b, err := json.Marshal(p.Origin)
		if err != nil {
			return fmt.Errorf("redisstore: claim: encoding the origin: %w", err)
		}
		c.origin = string(b)
	}
	c.value = packClaim(c.tok, c.lease, c.exp, c.now, p.Retention.Microseconds(), p.Holder, p.Check, c.origin)
	c.pub, c.channel = s.notes.publisher(ctx, p.Tenant)
	return nil
}

// acquired is the answer of a claim that now holds the key.
func (c *claim) acquired() store.Result {
	return store.Result{Status: store.StatusAcquired, Record: store.Record{
		Tenant:     c.p.Tenant,
		Key:        c.p.Key,
		State:      store.StatePending,
		Holder:     c.p.Holder,
		Token:      c.token,
		LeaseUntil: c.lease.time(),
		ExpiresAt:  c.exp.time(),
		CreatedAt:  c.now.time(),
		UpdatedAt:  c.now.time(),
		Origin:     c.p.Origin,
		Check:      c.p.Check,
		Retention:  keptRetention(c.p.Retention),
	}}
}

// judgeFast turns claimFast's answer into the claim's, or (done false)
// leaves the claim to the script: a record expired but still in Redis, or
// a record hash of the previous layout.
func (c *claim) judgeFast(ctx context.Context, prev string, err error) (store.Result, bool, error) {
	switch {
	case err == nil && prev == "":
		return c.acquired(), true, nil
	case err == nil:
		r, perr := parsePacked("claim", c.p.Tenant, c.p.Key, prev)
		if perr != nil {
			return store.Result{}, true, perr
		}
		if !c.now.time().Before(r.ExpiresAt) {
			return store.Result{}, false, nil // expired but still in Redis
		}
		if r.State == store.StatePending && r.Token == c.token {
			return c.acquired(), true, nil // this claim, sent again after a lost answer
		}
		return resultOf(r, c.now), true, nil
	case isWrongType(err):
		return store.Result{}, false, nil // the previous layout: the script reads it
	}
	if timedOut(ctx, err) {
		// The MULTI may have run: take back a claim nobody will use.
		c.undoClaim(ctx, c.s.client)
	}
	return store.Result{}, true, translate(ctx, "claim", err)
}

// claimByScript claims through claimScript: a takeover, or a record the
// fast path cannot answer from.
func (c *claim) claimByScript(ctx context.Context) (store.Result, error) {
	v, err := c.runClaim(ctx, claimArgs{
		announce:   announce{pubcmd: c.pub, channel: c.channel},
		now:        c.now.arg(),
		holder:     c.p.Holder,
		token:      c.tok,
		leaseUntil: c.lease.arg(),
		exp:        c.exp.arg(),
		supersede:  strconv.FormatInt(c.p.Supersede, 10),
		ttlMs:      c.ttl,
		member:     c.p.Key,
		ageTTLMs:   c.ageTTL,
		origin:     c.origin,
		check:      c.p.Check,
		ret:        retentionArg(c.p.Retention),
	})
	if err != nil {
		if timedOut(ctx, err) {
			// The script may have run: take back a claim nobody will use.
			// The undo removes only what the claim created: a claim of a
			// free key leaves none behind; a takeover is left standing
			// with its lease ended, never freeing the key.
			c.undoClaim(ctx, c.s.client)
		}
		return store.Result{}, translate(ctx, "claim", err)
	}
	reply, ok := v.([]any)
	if !ok || len(reply) == 0 {
		return store.Result{}, fmt.Errorf("redisstore: claim: unexpected reply %T", v)
	}
	if status, _ := reply[0].(string); status == claimAcquired {
		return c.acquired(), nil
	}
	held, _ := reply[len(reply)-1].(string)
	r, err := parsePacked("claim", c.p.Tenant, c.p.Key, held)
	if err != nil {
		return store.Result{}, err
	}
	return resultOf(r, c.now), nil
}

// parsePacked builds the Record of tenant's key from the packed record v
// that op read.
func parsePacked(op, tenant, key, v string) (store.Record, error) {
	m, err := unpack(v)
	if err != nil {
		return store.Record{}, fmt.Errorf("redisstore: %s: tenant %q key %q: %w", op, tenant, key, err)
	}
	r, err := parseRecord(tenant, key, m)
	if err != nil {
		return store.Record{}, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return r, nil
}

// isWrongType reports Redis's answer to a string command on a record hash
// of the previous layout.
func isWrongType(err error) bool {
	return redis.HasErrorPrefix(err, "WRONGTYPE")
}

// undoClaim takes back, on c, the claim made under token if it was made
// (undoClaimScript): a claim of a free key is deleted, a takeover's lease
// is ended. The token is the one this Claim generated, so the undo can only
// touch the claim it made. It is best effort: when it fails too, the claim
// stays as it landed until its lease runs out, which frees nothing either.
// The store package's documentation says why a takeover's lease is ended
// rather than the superseded record restored.
func (c *claim) undoClaim(ctx context.Context, node redis.Scripter) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backoff.CleanupTimeout)
	defer cancel()
	a := releaseArgs{
		fence:  fence{announce: announce{pubcmd: c.pub, channel: c.channel}, now: c.s.now(ctx).arg(), token: c.tok},
		member: c.p.Key,
	}
	_ = undoClaimScript.Run(ctx, node, c.keys, a.params().argv()...).Err()
}

// claimFast is the claim's common path: one MULTI of
//
//	SET rec value NX GET PX ttl     write the packed record if the key is free,
//	                                and answer the value it holds otherwise
//	ZADD age NX now member          list it (a duplicate's entry is kept)
//
// and, once a minute per tenant and process (ageExtensions), PEXPIRE NX and
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
func (c *claim) claimFast(ctx context.Context) (string, error) {
	s := c.s
	keys, member, value, now, ttl, ageTTL := c.keys, c.p.Key, c.value, c.now, c.ttl, c.ageTTL
	if s.sparse {
		// The prefix says it holds unindexed records before it does. When
		// too few replicas acknowledge that, the claim lists itself, as
		// without the option: no record is ever missing from both.
		err := s.markUnindexed(ctx, now)
		if err == nil {
			return c.claimSet(ctx)
		}
		if !errors.Is(err, ErrNotReplicated) {
			return "", err
		}
	}
	extend, extendMs := s.ageExtended.due(keys[1], now, ageTTL)
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
			refreshTopology(ctx, s.client, err)
			s.ageExtended.forget(keys[1], extend)
			return "", err
		}
		if err == nil {
			return prev, nil
		}
		if n, err := zadd.Int64(); err == nil && n == 0 {
			rescore(ctx, s.client, keys[1], member, now)
		}
		return "", nil
	}
	return c.claimFastReplicated(ctx, extend, queue)
}

// claimFastReplicated is claimFast with ReplicaAcks: the MULTI on the
// master that owns the record, then WAIT on the same connection.
func (c *claim) claimFastReplicated(ctx context.Context, extend bool,
	queue func(redis.Pipeliner) (set, zadd *redis.Cmd)) (string, error) {
	s := c.s
	keys, member, now := c.keys, c.p.Key, c.now
	node, err := nodeFor(ctx, s.client, keys[0])
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
		s.ageExtended.forget(keys[1], extend)
		return "", nodeError(ctx, s.client, err)
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
		rescore(ctx, node, keys[1], member, now)
	}
	return "", c.replicated(ctx, node, wait)
}

// replicated judges the WAIT that followed a claim of a free key on node:
// nil when enough replicas acknowledged it. Otherwise the claim is not
// known to be on enough replicas, and a failover now would lose it: it
// takes it back, so that a retry can claim again (it claimed a free key:
// nothing of a lost holder's is at stake), and returns ErrNotReplicated.
func (c *claim) replicated(ctx context.Context, node redis.Scripter, wait *redis.Cmd) error {
	s := c.s
	acks, werr := wait.Int64()
	if werr == nil && acks >= int64(s.replicaAcks) {
		return nil
	}
	c.undoClaim(ctx, node)
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
func (c *claim) claimSet(ctx context.Context) (string, error) {
	s := c.s
	keys, value, ttl := c.keys, c.value, c.ttl
	if s.replicaAcks == 0 {
		prev, err := s.client.Do(ctx, "set", keys[0], value, "nx", "get", "px", ttl).Text()
		switch err {
		case nil:
			return prev, nil
		case redis.Nil:
			return "", nil
		}
		refreshTopology(ctx, s.client, err)
		return "", err
	}
	node, err := nodeFor(ctx, s.client, keys[0])
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
		return "", nodeError(ctx, s.client, err)
	}
	return "", c.replicated(ctx, node, wait)
}

// rescore moves member's entry in the age index to now, unless a later
// claim already moved it further.
func rescore(ctx context.Context, c redis.Cmdable, age, member string, now stamp) {
	_ = c.ZAddArgs(ctx, age, redis.ZAddArgs{XX: true, GT: true, Members: []redis.Z{{Score: float64(now), Member: member}}}).Err()
}

// ageExtensions holds, by age index key, until when (store-clock unix
// microseconds) a Store last made sure the index lives (claimFast).
type ageExtensions struct {
	m sync.Map
}

// due reports whether a claim at now must extend the age index age to
// ageTTL milliseconds: when this Store has not extended it far enough
// already. It then records the extension as made, and returns the time to
// live to set: ageTTL and a minute of slack, so that the claims of the
// next minute skip it.
func (a *ageExtensions) due(age string, now stamp, ageTTL string) (bool, string) {
	ms, _ := strconv.ParseInt(ageTTL, 10, 64) // Formatted by indexTTLWithin.
	want := int64(now) + ms*1000
	if v, ok := a.m.Load(age); ok && v.(int64) >= want {
		return false, ""
	}
	a.m.Store(age, want+60_000_000)
	return true, strconv.FormatInt(ms+60_000, 10)
}

// forget undoes due's record of an extension that may not have
// been made.
func (a *ageExtensions) forget(age string, extended bool) {
	if extended {
		a.m.Delete(age)
	}
}
