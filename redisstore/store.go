package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/internal/backoff"
	"github.com/tesserix/idempotency/store"
)

// Store is a [store.Store] kept in Redis. It is safe for concurrent use, and
// any number of Stores in any number of processes may share one Redis (or
// Sentinel group, or Cluster) under the same prefix.
//
// Create one with [New] and stop it with [Store.Close]. The Store does not
// own the client: closing the client is the caller's business.
type Store struct {
	client  redis.UniversalClient
	prefix  string
	channel string
	ttl     time.Duration
	clock   store.Clock
	server  *store.ServerClock // follows Redis's clock, unless Options.Clock was given
	poll    time.Duration
	noPoll  bool // tests only: wake on notifications alone
	// listBudget bounds the age index entries one List call walks.
	listBudget int

	replicaAcks       int           // Options.ReplicaAcks
	replicaAckTimeout time.Duration // Options.ReplicaAckTimeout
	sparse            bool          // Options.IndexOnlyWhatWaits

	// life ends when the Store is closed; the subscriber runs under it.
	life   context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	closed  bool

	// startMu serialises starting and stopping subscriptions; subs holds
	// them by channel: the one channel of classic pub/sub, or one per
	// tenant with sharded pub/sub (see wait.go).
	startMu sync.Mutex
	subs    map[string]*subscription

	// shardMode is how changes are announced: modeUnknown until the first
	// call that needs it asks the server (publisher).
	shardMode atomic.Int32

	// ageExtended holds, by age index key, until when (store-clock unix
	// microseconds) this Store last made sure the index lives (claimFast).
	ageExtended sync.Map

	// markedUntil is until when (store-clock unix microseconds) this
	// Store trusts its last write of P:unindexed (markUnindexed).
	markedUntil atomic.Int64
}

var _ store.Store = (*Store)(nil)

// New returns a Store on client, which may be a single-node client, a
// Sentinel failover client or a Cluster client. It validates opts and returns
// an error naming the first malformed field; it does not contact Redis.
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	return newStore(client, opts, store.SystemClock{})
}

// newStore is New with the local clock the server clock corrects.
func newStore(client redis.UniversalClient, opts Options, local store.Clock) (*Store, error) {
	if client == nil {
		return nil, &store.OptionsError{Field: "redisstore.New client", Reason: "must not be nil"}
	}
	var server *store.ServerClock
	if opts.Clock == nil {
		server = store.NewServerClock(local, 0, func(ctx context.Context) (time.Time, error) {
			return client.Time(ctx).Result()
		})
		opts.Clock = server
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	life, cancel := context.WithCancel(context.Background())
	return &Store{
		client:  client,
		prefix:  opts.Prefix,
		channel: opts.Prefix + ":events",
		ttl:     opts.TTL,
		clock:   opts.Clock,
		server:  server,
		poll:    opts.PollInterval,
		life:    life,
		cancel:  cancel,
		waiters: make(map[string]map[chan struct{}]struct{}),
		subs:    make(map[string]*subscription),

		replicaAcks:       opts.ReplicaAcks,
		replicaAckTimeout: opts.ReplicaAckTimeout,
		sparse:            opts.IndexOnlyWhatWaits,

		listBudget: listBudget,
	}, nil
}

// Close stops the Store's notification subscriber and wakes every Wait in
// progress, which then polls until it returns. Other methods keep working
// after Close as long as the client does. Close is idempotent and does not
// close the client.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()

	s.startMu.Lock()
	subs := s.subs
	s.subs = make(map[string]*subscription)
	s.startMu.Unlock()
	for _, sub := range subs {
		sub.stop()
	}
	s.broadcast()
	return nil
}

// stamp is a moment of the store's clock at the precision the records keep.
type stamp int64

func (s *Store) now(ctx context.Context) stamp {
	if s.server != nil {
		s.server.SyncIfStale(ctx)
	}
	return stamp(s.clock.Now().UnixMicro())
}

func (t stamp) add(d time.Duration) stamp { return t + stamp(d.Microseconds()) }
func (t stamp) arg() string               { return strconv.FormatInt(int64(t), 10) }
func (t stamp) time() time.Time           { return time.UnixMicro(int64(t)).UTC() }

// expiry returns when a record written at now expires (the retention window,
// never before the lease ends) and the physical TTL, in milliseconds, Redis
// gets for it.
func (s *Store) expiry(now, leaseUntil stamp) (exp stamp, ttlMillis string) {
	return s.expiryWithin(now, leaseUntil, s.ttl)
}

// expiryWithin is expiry under the retention window window.
func (s *Store) expiryWithin(now, leaseUntil stamp, window time.Duration) (exp stamp, ttlMillis string) {
	exp = max(now.add(window), leaseUntil)
	ms := (int64(exp-now)+999)/1000 + physicalMargin.Milliseconds()
	return exp, strconv.FormatInt(ms, 10)
}

// indexTTL is the physical TTL, in milliseconds, a claim or a renewal whose
// record got ttlMillis keeps the tenant's index alive for at least: one
// physical record lifetime after the record's own (the retention window,
// rounded up, plus the margin). The Complete that ends the claim can only
// come while the record exists, and gives it at most that lifetime again,
// so it finds the index alive past the record's new expiry and need not
// touch the index.
func (s *Store) indexTTL(ttlMillis string) string {
	return s.indexTTLWithin(ttlMillis, s.ttl)
}

// indexTTLWithin is indexTTL for a record whose retention window is
// retention.
func (s *Store) indexTTLWithin(ttlMillis string, retention time.Duration) string {
	ms, _ := strconv.ParseInt(ttlMillis, 10, 64) // Formatted by expiry.
	window := (retention.Microseconds()+999)/1000 + physicalMargin.Milliseconds()
	return strconv.FormatInt(ms+window, 10)
}

func (s *Store) run(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, error) {
	v, err := script.Run(ctx, s.client, keys, args...).Result()
	s.refreshTopology(ctx, err)
	return v, err
}

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
		prev, err := s.claimFast(ctx, c.keys, p.Key, c.tok, c.value, c.now, c.ttl, c.ageTTL, c.pub, c.channel)
		if res, done, err := s.judgeFast(ctx, &c, prev, err); done {
			return res, err
		}
	}
	return s.claimByScript(ctx, &c)
}

// claim is one Claim's values, computed once for either of its paths.
type claim struct {
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
	*c = claim{p: p, now: s.now(ctx), token: store.NewToken()}
	c.lease = c.now.add(p.Lease)
	window := store.RetentionOr(keptRetention(p.Retention), s.ttl)
	c.exp, c.ttl = s.expiryWithin(c.now, c.lease, window)
	c.ageTTL = s.indexTTLWithin(c.ttl, window)
	c.tok = strconv.FormatInt(c.token, 10)
	c.keys = s.recordAndAgeKeys(p.Tenant, p.Key)
	if p.Origin != (store.Origin{}) {
		b, err := json.Marshal(p.Origin)
		if err != nil {
			return fmt.Errorf("redisstore: claim: encoding the origin: %w", err)
		}
		c.origin = string(b)
	}
	c.value = packClaim(c.tok, c.lease, c.exp, c.now, p.Retention.Microseconds(), p.Holder, p.Check, c.origin)
	c.pub, c.channel = s.publisher(ctx, p.Tenant)
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
func (s *Store) judgeFast(ctx context.Context, c *claim, prev string, err error) (store.Result, bool, error) {
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
		s.undoClaim(ctx, s.client, c.keys, c.p.Key, c.tok, c.pub, c.channel)
	}
	return store.Result{}, true, translate(ctx, "claim", err)
}

// claimByScript claims through claimScript: a takeover, or a record the
// fast path cannot answer from.
func (s *Store) claimByScript(ctx context.Context, c *claim) (store.Result, error) {
	v, err := s.runClaim(ctx, c.keys, claimArgs{
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
			s.undoClaim(ctx, s.client, c.keys, c.p.Key, c.tok, c.pub, c.channel)
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
func (s *Store) undoClaim(ctx context.Context, c redis.Scripter, keys []string, member, token, pub, channel string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backoff.CleanupTimeout)
	defer cancel()
	a := releaseArgs{
		fence:  fence{announce: announce{pubcmd: pub, channel: channel}, now: s.now(ctx).arg(), token: token},
		member: member,
	}
	_ = undoClaimScript.Run(ctx, c, keys, a.params().argv()...).Err()
}

// keptRetention is retention as the store keeps it: to the microsecond.
func keptRetention(retention time.Duration) time.Duration {
	return retention.Truncate(time.Microsecond)
}

// retentionArg is the "ret" field of a record keeping retention: its
// microseconds, or "" for none.
func retentionArg(retention time.Duration) string {
	if us := retention.Microseconds(); us > 0 {
		return strconv.FormatInt(us, 10)
	}
	return ""
}

// resultOf answers a claim or a wait that found the live record r at now
// (store.ResultOf).
func resultOf(r store.Record, now stamp) store.Result { return store.ResultOf(r, now.time()) }

// fenced runs one of the fenced scripts, with the arguments args returns
// for the fence (the announcement, now and token), and maps any reply but
// fenceApplied to ErrNotHolder.
func (s *Store) fenced(ctx context.Context, op, tenant, key string, token int64, now stamp, script *redis.Script, args func(fence) paramList) error {
	if err := ctx.Err(); err != nil {
		return translate(ctx, op, err)
	}
	pub, channel := s.publisher(ctx, tenant)
	f := fence{announce: announce{pubcmd: pub, channel: channel}, now: now.arg(), token: strconv.FormatInt(token, 10)}
	v, err := s.run(ctx, script, s.recordAndAgeKeys(tenant, key), args(f).argv()...)
	if err != nil {
		return translate(ctx, op, err)
	}
	if n, _ := v.(int64); n != fenceApplied {
		return fmt.Errorf("redisstore: %s tenant %q key %q token %d: %w", op, tenant, key, token, store.ErrNotHolder)
	}
	return nil
}

// Renew implements [store.Store.Renew]. The retention window restarts too,
// and never ends before the new lease.
func (s *Store) Renew(ctx context.Context, p store.RenewParams) (time.Time, error) {
	if err := p.Validate(); err != nil {
		return time.Time{}, err
	}
	now := s.now(ctx)
	lease := now.add(p.Lease)
	exp, ttl := s.expiry(now, lease)
	err := s.fenced(ctx, "renew", p.Tenant, p.Key, p.Token, now, renewScript, func(f fence) paramList {
		return renewArgs{fence: f, leaseUntil: lease.arg(), storeExp: exp.arg(), storeTTLMs: ttl, storeAgeTTLMs: s.indexTTL(ttl), member: p.Key}.params()
	})
	if err != nil {
		return time.Time{}, err
	}
	return lease.time(), nil
}

// Complete implements [store.Store.Complete].
func (s *Store) Complete(ctx context.Context, p store.CompleteParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	now := s.now(ctx)
	exp, ttl := s.expiry(now, now)
	return s.fenced(ctx, "complete", p.Tenant, p.Key, p.Token, now, completeScript, func(f fence) paramList {
		return completeArgs{fence: f, storeExp: exp.arg(), storeTTLMs: ttl, outcome: p.Outcome}.params()
	})
}

// Release implements [store.Store.Release].
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return s.fenced(ctx, "release", p.Tenant, p.Key, p.Token, s.now(ctx), releaseScript, func(f fence) paramList {
		return releaseArgs{fence: f, member: p.Key}.params()
	})
}

// MarkIndeterminate implements [store.Store.MarkIndeterminate].
func (s *Store) MarkIndeterminate(ctx context.Context, p store.MarkIndeterminateParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	now := s.now(ctx)
	// An indeterminate record keeps until a person decides: its expiry, and
	// its indexes', reach store.NeverExpires.
	exp, ttl := s.expiry(now, stamp(store.NeverExpires.UnixMicro()))
	return s.fenced(ctx, "mark indeterminate", p.Tenant, p.Key, p.Token, now, markScript, func(f fence) paramList {
		return markArgs{fence: f, exp: exp.arg(), ttlMs: ttl, reason: p.Reason, member: p.Key}.params()
	})
}

// Resolve implements [store.Store.Resolve].
func (s *Store) Resolve(ctx context.Context, p store.ResolveParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return translate(ctx, "resolve", err)
	}
	now := s.now(ctx)
	// The store's window for a record that stands (the script applies the
	// record's own), the params' for a record made for RecordIfGone.
	exp, ttl := s.expiry(now, now)
	goneExp, goneTTL := s.expiryWithin(now, now, store.RetentionOr(keptRetention(p.Retention), s.ttl))
	if p.Decision == store.ActionFree || !p.RecordIfGone {
		goneExp, goneTTL = exp, ttl
	}
	decision := "complete"
	if p.Decision == store.ActionFree {
		decision = "free"
	}
	recordIfGone, stale := "0", "0"
	if p.RecordIfGone {
		recordIfGone = "1"
	}
	if p.Stale {
		stale = "1"
	}
	trail, err := json.Marshal(p.Resolution(now.time()))
	if err != nil {
		return fmt.Errorf("redisstore: resolve: encoding the resolution: %w", err)
	}
	pub, channel := s.publisher(ctx, p.Tenant)
	a := resolveArgs{
		announce:     announce{pubcmd: pub, channel: channel},
		now:          now.arg(),
		decision:     decision,
		outcome:      p.Outcome,
		storeExp:     exp.arg(),
		storeTTLMs:   ttl,
		member:       p.Key,
		token:        strconv.FormatInt(p.Token, 10),
		resolution:   trail,
		recordIfGone: recordIfGone,
		goneHolder:   store.ResolveHolder,
		goneToken:    strconv.FormatInt(store.NewToken(), 10),
		stale:        stale,
		goneCheck:    p.Check,
		goneRet:      retentionArg(p.Retention),
		goneExp:      goneExp.arg(),
		goneTTLMs:    goneTTL,
	}
	v, err := s.run(ctx, resolveScript, []string{s.recordKey(p.Tenant, p.Key), s.ageKey(p.Tenant)}, a.params().argv()...)
	if err != nil {
		return translate(ctx, "resolve", err)
	}
	switch n, _ := v.(int64); n {
	case resolveApplied:
		return nil
	case resolveNotFound:
		return fmt.Errorf("redisstore: resolve tenant %q key %q: %w", p.Tenant, p.Key, store.ErrNotFound)
	case resolveNotIndeterminate:
		return fmt.Errorf("redisstore: resolve tenant %q key %q: %w", p.Tenant, p.Key, store.ErrNotIndeterminate)
	case resolveOtherToken:
		return fmt.Errorf("redisstore: resolve tenant %q key %q decided on token %d, but another claim's record stands: %w",
			p.Tenant, p.Key, p.Token, store.ErrNotHolder)
	case resolveLeaseLive:
		return fmt.Errorf("redisstore: resolve tenant %q key %q: the claim pending under token %d holds a live lease: %w",
			p.Tenant, p.Key, p.Token, store.ErrLeaseLive)
	default:
		return fmt.Errorf("redisstore: resolve: unexpected reply %v", v)
	}
}

// Lookup implements [store.Store.Lookup].
func (s *Store) Lookup(ctx context.Context, p store.LookupParams) (store.Record, error) {
	if err := p.Validate(); err != nil {
		return store.Record{}, err
	}
	r, ok, err := s.read(ctx, "lookup", p.Tenant, p.Key, s.now(ctx))
	if err != nil {
		return store.Record{}, err
	}
	if !ok {
		return store.Record{}, fmt.Errorf("redisstore: lookup tenant %q key %q: %w", p.Tenant, p.Key, store.ErrNotFound)
	}
	return r, nil
}

// read returns the live record of key at now, with ok false when there is
// none.
func (s *Store) read(ctx context.Context, op, tenant, key string, now stamp) (store.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, false, translate(ctx, op, err)
	}
	m, err := s.readFields(ctx, s.client, s.recordKey(tenant, key))
	if err != nil {
		return store.Record{}, false, translate(ctx, op, err)
	}
	if m == nil {
		return store.Record{}, false, nil
	}
	r, err := parseRecord(tenant, key, m)
	if err != nil {
		return store.Record{}, false, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	if !now.time().Before(r.ExpiresAt) {
		return store.Record{}, false, nil
	}
	return r, true, nil
}

// Forget implements [store.Store.Forget]: it takes the tenant's keys from
// its age index (and from the index set of the previous layout, until
// Migrate has removed it) in batches and deletes each batch, with its
// index entries, in one script, then deletes the records no index names
// (forgetUnindexed), which scans the tenant's record keys.
func (s *Store) Forget(ctx context.Context, p store.ForgetParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	const batch = 256
	age, idx := s.ageKey(p.Tenant), s.indexKey(p.Tenant)
	pub, channel := s.publisher(ctx, p.Tenant)
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, translate(ctx, "forget", err)
		}
		members, err := s.client.ZRange(ctx, age, 0, batch-1).Result()
		if err != nil {
			return total, translate(ctx, "forget", err)
		}
		if len(members) == 0 {
			if members, err = s.client.SRandMemberN(ctx, idx, batch).Result(); err != nil {
				return total, translate(ctx, "forget", err)
			}
		}
		if len(members) == 0 {
			n, err := s.forgetUnindexed(ctx, p.Tenant)
			return total + n, err
		}
		keys := make([]string, 2, len(members)+2)
		keys[0], keys[1] = age, idx
		for _, m := range members {
			keys = append(keys, recordKeyOfAge(age, m))
		}
		a := membersArgs{head: announce{pubcmd: pub, channel: channel}.params(), members: members}
		v, err := s.run(ctx, forgetScript, keys, a.argv()...)
		if err != nil {
			return total, translate(ctx, "forget", err)
		}
		n, _ := v.(int64)
		total += int(n)
	}
}

// Sweep implements [store.Store.Sweep]: it finds the age indexes with SCAN
// (on every master of a Cluster), walks each with ZSCAN in batches, and
// deletes records expired by the store's clock, up to the limit. Index
// entries whose record Redis already expired are dropped on the way. Once
// a Store with Options.IndexOnlyWhatWaits has claimed on the prefix
// (P:unindexed exists), it then walks the record keys too, for the
// expired records no index lists (walk.go).
func (s *Store) Sweep(ctx context.Context, p store.SweepParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	limit := p.EffectiveLimit()
	now := s.now(ctx)
	deleted := 0
	err := s.eachAge(ctx, func(age string) (bool, error) {
		n, err := s.sweepIndex(ctx, age, now, limit-deleted)
		deleted += n
		return deleted < limit, err
	})
	if err != nil {
		return deleted, translate(ctx, "sweep", err)
	}
	if deleted >= limit {
		return deleted, nil
	}
	walk, err := s.walking(ctx)
	if err != nil || !walk {
		return deleted, translate(ctx, "sweep", err)
	}
	n, err := s.sweepWalk(ctx, now, limit-deleted)
	return deleted + n, translate(ctx, "sweep", err)
}

// forgetUnindexed deletes the tenant's records that no index names (an
// index entry lost, a record written around the indexes): a SCAN of the
// tenant's record keys on every master, once the indexes are empty, so
// that Forget leaves nothing of the tenant whatever state its keys are in.
func (s *Store) forgetUnindexed(ctx context.Context, tenant string) (int, error) {
	nodes, err := s.masters(ctx)
	if err != nil {
		return 0, translate(ctx, "forget", err)
	}
	base := s.tenantBase(tenant)
	pattern := globEscaper.Replace(base+recordInfix) + "*"
	age := s.ageKey(tenant)
	pub, channel := s.publisher(ctx, tenant)
	total := 0
	for _, node := range nodes {
		var cursor uint64
		for {
			found, next, err := node.Scan(ctx, cursor, pattern, 256).Result()
			if err != nil {
				return total, translate(ctx, "forget", err)
			}
			if len(found) > 0 {
				keys := []string{age, s.indexKey(tenant)}
				a := membersArgs{head: announce{pubcmd: pub, channel: channel}.params()}
				for _, k := range found {
					keys = append(keys, k)
					a.members = append(a.members, strings.TrimPrefix(k, base+recordInfix))
				}
				v, err := s.run(ctx, forgetScript, keys, a.argv()...)
				if err != nil {
					return total, translate(ctx, "forget", err)
				}
				n, _ := v.(int64)
				total += int(n)
			}
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	return total, nil
}

// globEscaper escapes what SCAN's MATCH reads as a pattern.
var globEscaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)

// eachAge calls f with every age index of the store, found with SCAN on
// every master, until f returns false or an error.
func (s *Store) eachAge(ctx context.Context, f func(age string) (bool, error)) error {
	nodes, err := s.masters(ctx)
	if err != nil {
		return err
	}
	for _, node := range nodes {
		var cursor uint64
		for {
			ages, next, err := node.Scan(ctx, cursor, s.agePattern(), 256).Result()
			if err != nil {
				return err
			}
			for _, age := range ages {
				if !s.isTenantKey(age, ageSuffix) {
					continue
				}
				more, err := f(age)
				if err != nil || !more {
					return err
				}
			}
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	return nil
}

func (s *Store) sweepIndex(ctx context.Context, age string, now stamp, limit int) (int, error) {
	deleted := 0
	var cursor uint64
	for {
		flat, next, err := s.client.ZScan(ctx, age, cursor, "", 256).Result()
		if err != nil {
			return deleted, err
		}
		if len(flat) > 0 {
			members := make([]string, 0, len(flat)/2)
			for i := 0; i < len(flat); i += 2 { // member, score, ...
				members = append(members, flat[i])
			}
			n, err := s.sweepMembers(ctx, age, members, now, limit-deleted)
			deleted += n
			if err != nil {
				return deleted, err
			}
			if deleted >= limit {
				return deleted, nil
			}
		}
		if next == 0 {
			return deleted, nil
		}
		cursor = next
	}
}

// sweepMembers runs sweepScript on members of the tenant whose age index
// is age: it deletes up to limit of their records expired at now, drops
// the index entries of those gone, and returns how many it deleted.
func (s *Store) sweepMembers(ctx context.Context, age string, members []string, now stamp, limit int) (int, error) {
	keys := make([]string, 2, len(members)+2)
	keys[0], keys[1] = age, indexKeyOfAge(age)
	for _, m := range members {
		keys = append(keys, recordKeyOfAge(age, m))
	}
	a := membersArgs{head: sweepHead{now: now.arg(), limit: strconv.Itoa(limit)}.params(), members: members}
	v, err := s.run(ctx, sweepScript, keys, a.argv()...)
	if err != nil {
		return 0, err
	}
	n, _ := v.(int64)
	return int(n), nil
}

// masters returns the nodes whose keyspaces together hold every key: each
// master of a Cluster, each shard of a Ring, or the client itself.
func (s *Store) masters(ctx context.Context) ([]redis.Cmdable, error) {
	var (
		mu    sync.Mutex
		nodes []redis.Cmdable
	)
	collect := func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		nodes = append(nodes, c)
		return nil
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		if err := c.ForEachMaster(ctx, collect); err != nil {
			return nil, err
		}
	case *redis.Ring:
		if err := c.ForEachShard(ctx, collect); err != nil {
			return nil, err
		}
	default:
		nodes = append(nodes, s.client)
	}
	return nodes, nil
}
