package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/store"
)

// Store is a [store.Store] kept in Redis. It is safe for concurrent use, and
// any number of Stores in any number of processes may share one Redis (or
// Sentinel group, or Cluster) under the same prefix.
//
// Create one with [New] and stop it with [Store.Close]. The Store does not
// own the client: closing the client is the caller's business.
type Store struct {
	client redis.UniversalClient
	keys   layout       // the names of the prefix's keys
	ages   ageIndexes   // the tenants' age indexes (index.go)
	walker recordWalker // the walk of the record keys (walk.go)
	ttl    time.Duration
	clock  store.Clock
	server *store.ServerClock // follows Redis's clock, unless Options.Clock was given
	poll   time.Duration
	noPoll bool // tests only: wake on notifications alone
	// listBudget bounds the age index entries one List call walks.
	listBudget int

	replicaAcks       int           // Options.ReplicaAcks
	replicaAckTimeout time.Duration // Options.ReplicaAckTimeout
	sparse            bool          // Options.IndexOnlyWhatWaits

	notes notifier // how a change is announced and heard (wait.go)

	mu     sync.Mutex
	closed bool

	// ageExtended is until when this Store last made each age index live.
	ageExtended ageExtensions

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
	keys := layout{prefix: opts.Prefix}
	return &Store{
		client: client,
		keys:   keys,
		ages:   ageIndexes{client: client, keys: keys},
		walker: recordWalker{client: client, keys: keys},
		ttl:    opts.TTL,
		clock:  opts.Clock,
		server: server,
		poll:   opts.PollInterval,
		notes: notifier{
			client:  client,
			keys:    keys,
			channel: opts.Prefix + ":events",
			life:    life,
			cancel:  cancel,
			waiters: make(map[string]map[chan struct{}]struct{}),
			subs:    make(map[string]*subscription),
		},

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
	s.notes.close()
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
	return expiryWithin(now, leaseUntil, s.ttl)
}

// expiryWithin is expiry under the retention window window.
func expiryWithin(now, leaseUntil stamp, window time.Duration) (exp stamp, ttlMillis string) {
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
	return indexTTLWithin(ttlMillis, s.ttl)
}

// indexTTLWithin is indexTTL for a record whose retention window is
// retention.
func indexTTLWithin(ttlMillis string, retention time.Duration) string {
	ms, _ := strconv.ParseInt(ttlMillis, 10, 64) // Formatted by expiry.
	window := (retention.Microseconds()+999)/1000 + physicalMargin.Milliseconds()
	return strconv.FormatInt(ms+window, 10)
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
	pub, channel := s.notes.publisher(ctx, tenant)
	f := fence{announce: announce{pubcmd: pub, channel: channel}, now: now.arg(), token: strconv.FormatInt(token, 10)}
	v, err := run(ctx, s.client, script, s.keys.recordAndAgeKeys(tenant, key), args(f).argv()...)
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
	m, err := readFields(ctx, s.client, s.keys.recordKey(tenant, key))
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
