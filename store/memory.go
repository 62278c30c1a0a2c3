package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// DefaultPollInterval is how often [Memory.Wait] re-reads its clock when
// MemoryOptions.PollInterval is unset.
const DefaultPollInterval = 10 * time.Millisecond

// MemoryOptions configure [NewMemory].
type MemoryOptions struct {
	// TTL is the retention window: a record expires this long after it was
	// last written. Must not be negative. Defaults to 24 hours ([DefaultTTL]).
	TTL time.Duration
	// Clock tells the store the time. Defaults to SystemClock{}.
	Clock Clock
	// PollInterval is how often Wait re-reads the clock to notice a lease
	// running out; changes to the key itself wake waiters at once. Must not
	// be negative. Defaults to 10 milliseconds ([DefaultPollInterval]).
	PollInterval time.Duration
}

// Memory is a [Store] that keeps its records in the process's memory. It is
// enough for one worker and for tests: its records die with the process and
// other processes cannot see them. It is safe for concurrent use.
type Memory struct {
	ttl   time.Duration
	clock Clock
	poll  time.Duration

	mu sync.Mutex
	// records holds every record, live or expired, by tenant then key.
	records map[string]map[string]*Record
	// changed holds, for each key somebody waits on, a channel that is
	// closed (and removed) the next time the key's record changes.
	changed map[scope]chan struct{}
}

var _ Store = (*Memory)(nil)

type scope struct{ tenant, key string }

// NewMemory returns an empty memory store. It returns an [*OptionsError]
// naming the field when opts hold a negative duration.
func NewMemory(opts MemoryOptions) (*Memory, error) {
	if opts.TTL < 0 {
		return nil, &OptionsError{Field: "store.MemoryOptions.TTL", Reason: "must not be negative"}
	}
	if opts.PollInterval < 0 {
		return nil, &OptionsError{Field: "store.MemoryOptions.PollInterval", Reason: "must not be negative"}
	}
	return &Memory{
		ttl:     cmp.Or(opts.TTL, DefaultTTL),
		clock:   cmp.Or[Clock](opts.Clock, SystemClock{}),
		poll:    cmp.Or(opts.PollInterval, DefaultPollInterval),
		records: make(map[string]map[string]*Record),
		changed: make(map[scope]chan struct{}),
	}, nil
}

// Len returns how many records the store holds, counting expired records
// that [Memory.Sweep] has not yet reclaimed.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, keys := range m.records {
		n += len(keys)
	}
	return n
}

// Claim implements [Store.Claim].
func (m *Memory) Claim(ctx context.Context, params ClaimParams) (Result, error) {
	if err := begin(ctx, "claim", params); err != nil {
		return Result{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	rec := m.live(params.Tenant, params.Key, now)
	// A record pending under exactly the superseded token is taken over
	// below; any other live record answers.
	if rec != nil && (rec.State != StatePending || params.Supersede == 0 || params.Supersede != rec.Token) {
		return ResultOf(copyRecord(rec), now), nil
	}
	fresh := &Record{
		Tenant:     params.Tenant,
		Key:        params.Key,
		State:      StatePending,
		Holder:     params.Holder,
		Token:      m.newToken(rec),
		LeaseUntil: now.Add(params.Lease),
		// Never before the lease ends (a lease longer than the TTL), so the
		// key is not free while its holder may still be running.
		ExpiresAt: later(now.Add(RetentionOr(params.Retention, m.ttl)), now.Add(params.Lease)),
		CreatedAt: now,
		UpdatedAt: now,
		Origin:    params.Origin,
		Check:     params.Check,
		Retention: params.Retention,
	}
	m.put(fresh)
	return Result{Status: StatusAcquired, Record: copyRecord(fresh)}, nil
}

// Renew implements [Store.Renew].
func (m *Memory) Renew(ctx context.Context, params RenewParams) (time.Time, error) {
	if err := begin(ctx, "renew", params); err != nil {
		return time.Time{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	rec, err := m.held("renew", params.Tenant, params.Key, params.Token, now)
	if err != nil {
		return time.Time{}, err
	}
	rec.LeaseUntil = now.Add(params.Lease)
	rec.UpdatedAt = now
	// A renewal is a write: the retention window restarts, so a holder that
	// keeps renewing never loses its record (and a lease longer than the TTL
	// is still covered).
	rec.ExpiresAt = later(now.Add(RetentionOr(rec.Retention, m.ttl)), rec.LeaseUntil)
	m.notify(params.Tenant, params.Key)
	return rec.LeaseUntil, nil
}

// Complete implements [Store.Complete].
func (m *Memory) Complete(ctx context.Context, params CompleteParams) error {
	if err := begin(ctx, "complete", params); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	rec, err := m.held("complete", params.Tenant, params.Key, params.Token, now)
	if err != nil {
		return err
	}
	rec.State = StateCompleted
	rec.Outcome = slices.Clone(params.Outcome)
	rec.UpdatedAt = now
	rec.ExpiresAt = now.Add(RetentionOr(rec.Retention, m.ttl))
	m.notify(params.Tenant, params.Key)
	return nil
}

// Release implements [Store.Release].
func (m *Memory) Release(ctx context.Context, params ReleaseParams) error {
	if err := begin(ctx, "release", params); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.held("release", params.Tenant, params.Key, params.Token, m.clock.Now()); err != nil {
		return err
	}
	m.remove(params.Tenant, params.Key)
	return nil
}

// MarkIndeterminate implements [Store.MarkIndeterminate].
func (m *Memory) MarkIndeterminate(ctx context.Context, params MarkIndeterminateParams) error {
	if err := begin(ctx, "mark indeterminate", params); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	rec, err := m.held("mark indeterminate", params.Tenant, params.Key, params.Token, now)
	if err != nil {
		return err
	}
	rec.State = StateIndeterminate
	rec.Reason = params.Reason
	rec.UpdatedAt = now
	rec.ExpiresAt = NeverExpires // until a person decides
	m.notify(params.Tenant, params.Key)
	return nil
}

// Lookup implements [Store.Lookup].
func (m *Memory) Lookup(ctx context.Context, params LookupParams) (Record, error) {
	if err := begin(ctx, "lookup", params); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.live(params.Tenant, params.Key, m.clock.Now())
	if rec == nil {
		return Record{}, fmt.Errorf("memory store: lookup %q in tenant %q: %w", params.Key, params.Tenant, ErrNotFound)
	}
	return copyRecord(rec), nil
}

// Wait implements [Store.Wait]. A change to the key wakes it at once; a
// lease running out by the store's clock is noticed within PollInterval.
func (m *Memory) Wait(ctx context.Context, params WaitParams) (Result, error) {
	if err := begin(ctx, "wait", params); err != nil {
		return Result{}, err
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		res, changed, done := m.check(params)
		if done {
			return res, nil
		}
		if timer == nil {
			timer = time.NewTimer(m.poll)
		} else {
			timer.Reset(m.poll)
		}
		select {
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
			return Result{}, fmt.Errorf("memory store: wait on %q in tenant %q: %w", params.Key, params.Tenant, ctx.Err())
		}
	}
}

// check reports the key's state for Wait, or, while it is still pending
// under params.Token within its lease, a channel closed on its next change.
func (m *Memory) check(params WaitParams) (res Result, changed <-chan struct{}, done bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	rec := m.live(params.Tenant, params.Key, now)
	if rec == nil {
		return Result{Status: StatusFree}, nil, true
	}
	if res := ResultOf(copyRecord(rec), now); res.Status != StatusHeld || rec.Token != params.Token || res.LeaseExpired {
		return res, nil, true
	}
	s := scope{params.Tenant, params.Key}
	ch, ok := m.changed[s]
	if !ok {
		ch = make(chan struct{})
		m.changed[s] = ch
	}
	return Result{}, ch, false
}

// Resolve implements [Store.Resolve].
func (m *Memory) Resolve(ctx context.Context, params ResolveParams) error {
	if err := begin(ctx, "resolve", params); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	rec := m.live(params.Tenant, params.Key, now)
	if rec == nil && params.RecordIfGone {
		m.put(&Record{
			Tenant:     params.Tenant,
			Key:        params.Key,
			State:      StateCompleted,
			Holder:     ResolveHolder,
			Token:      m.newToken(m.records[params.Tenant][params.Key]),
			LeaseUntil: now,
			ExpiresAt:  now.Add(RetentionOr(params.Retention, m.ttl)),
			CreatedAt:  now,
			UpdatedAt:  now,
			Outcome:    slices.Clone(params.Outcome),
			Resolution: params.Resolution(now),
			Check:      params.Check,
			Retention:  params.Retention,
		})
		return nil
	}
	if rec == nil {
		return fmt.Errorf("memory store: resolve %q in tenant %q: %w", params.Key, params.Tenant, ErrNotFound)
	}
	if rec.State == StatePending && params.Stale {
		// A stale pending record, settled in this one step: the claim the
		// person looked at, with its holder's lease run out.
		if params.Token != rec.Token {
			return fmt.Errorf("memory store: resolve %q in tenant %q decided on token %d, but the claim pending stands under %d: %w",
				params.Key, params.Tenant, params.Token, rec.Token, ErrNotHolder)
		}
		if now.Before(rec.LeaseUntil) {
			return fmt.Errorf("memory store: resolve %q in tenant %q: its holder %q holds a lease until %v: %w",
				params.Key, params.Tenant, rec.Holder, rec.LeaseUntil, ErrLeaseLive)
		}
	} else if rec.State != StateIndeterminate {
		return fmt.Errorf("memory store: resolve %q in tenant %q, which is %s: %w", params.Key, params.Tenant, rec.State, ErrNotIndeterminate)
	}
	if params.Token != 0 && params.Token != rec.Token {
		return fmt.Errorf("memory store: resolve %q in tenant %q decided on token %d, but the indeterminate record stands under %d: %w",
			params.Key, params.Tenant, params.Token, rec.Token, ErrNotHolder)
	}
	switch params.Decision {
	case ActionComplete:
		rec.State = StateCompleted
		rec.Resolution = params.Resolution(now)
		rec.Outcome = slices.Clone(params.Outcome)
		rec.UpdatedAt = now
		rec.ExpiresAt = now.Add(RetentionOr(rec.Retention, m.ttl))
		m.notify(params.Tenant, params.Key)
	case ActionFree:
		m.remove(params.Tenant, params.Key)
	}
	return nil
}

// Forget implements [Store.Forget]. It counts expired records it erases too.
func (m *Memory) Forget(ctx context.Context, params ForgetParams) (int, error) {
	if err := begin(ctx, "forget", params); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := m.records[params.Tenant]
	for key := range keys {
		m.notify(params.Tenant, key)
	}
	delete(m.records, params.Tenant)
	return len(keys), nil
}

// Sweep implements [Store.Sweep].
func (m *Memory) Sweep(ctx context.Context, params SweepParams) (int, error) {
	if err := begin(ctx, "sweep", params); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	limit := params.EffectiveLimit()
	n := 0
	for tenant, keys := range m.records {
		for key, rec := range keys {
			if n == limit {
				return n, nil
			}
			if !now.Before(rec.ExpiresAt) {
				m.remove(tenant, key)
				n++
			}
		}
	}
	return n, nil
}

// validator is every params struct.
type validator interface{ Validate() error }

// begin refuses a done context and malformed parameters.
func begin(ctx context.Context, op string, params validator) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory store: %s: %w", op, ctx.Err())
	}
	if err := params.Validate(); err != nil {
		return fmt.Errorf("memory store: %s: %w", op, err)
	}
	return nil
}

// live returns the key's record unless there is none or it has expired.
// Callers hold m.mu.
func (m *Memory) live(tenant, key string, now time.Time) *Record {
	rec := m.records[tenant][key]
	if rec == nil || !now.Before(rec.ExpiresAt) {
		return nil
	}
	return rec
}

// held returns the key's record if it is live and pending under token, and
// an error matching ErrNotHolder otherwise. Callers hold m.mu.
func (m *Memory) held(op, tenant, key string, token int64, now time.Time) (*Record, error) {
	rec := m.live(tenant, key, now)
	if rec == nil || rec.State != StatePending || rec.Token != token {
		return nil, fmt.Errorf("memory store: %s %q in tenant %q with token %d: %w", op, key, tenant, token, ErrNotHolder)
	}
	return rec, nil
}

// newToken returns a token that differs from the one prev (if any) held.
func (m *Memory) newToken(prev *Record) int64 {
	for {
		t := NewToken()
		if prev == nil || t != prev.Token {
			return t
		}
	}
}

// put stores rec, replacing whatever the key held. Callers hold m.mu.
func (m *Memory) put(rec *Record) {
	keys := m.records[rec.Tenant]
	if keys == nil {
		keys = make(map[string]*Record)
		m.records[rec.Tenant] = keys
	}
	keys[rec.Key] = rec
	m.notify(rec.Tenant, rec.Key)
}

// remove deletes the key's record. Callers hold m.mu.
func (m *Memory) remove(tenant, key string) {
	keys := m.records[tenant]
	delete(keys, key)
	if len(keys) == 0 {
		delete(m.records, tenant)
	}
	m.notify(tenant, key)
}

// notify wakes everybody waiting on the key. Callers hold m.mu.
func (m *Memory) notify(tenant, key string) {
	s := scope{tenant, key}
	if ch, ok := m.changed[s]; ok {
		close(ch)
		delete(m.changed, s)
	}
}

// copyRecord returns a copy of rec that shares no memory with the store.
func copyRecord(rec *Record) Record {
	out := *rec
	out.Outcome = slices.Clone(rec.Outcome)
	return out
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// List implements [Store.List].
func (m *Memory) List(ctx context.Context, params ListParams) (Page, error) {
	if err := begin(ctx, "list", params); err != nil {
		return Page{}, err
	}
	return m.list(params, false)
}

// ListAcrossTenants implements [Store.ListAcrossTenants].
func (m *Memory) ListAcrossTenants(ctx context.Context, params ListParams) (Page, error) {
	if err := ctx.Err(); err != nil {
		return Page{}, fmt.Errorf("memory store: list across tenants: %w", err)
	}
	if err := params.ValidateAcrossTenants(); err != nil {
		return Page{}, fmt.Errorf("memory store: list across tenants: %w", err)
	}
	return m.list(params, true)
}

// list reads the whole tenant (or store) under the lock, which is what a
// memory store can do; the durable stores read one page from an index.
func (m *Memory) list(params ListParams, across bool) (Page, error) {
	after, err := params.After(across)
	if err != nil {
		return Page{}, fmt.Errorf("memory store: list: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	var recs []*Record
	collect := func(keys map[string]*Record) {
		for _, rec := range keys {
			if !now.Before(rec.ExpiresAt) || !params.Keeps(*rec, now) {
				continue
			}
			if params.Cursor != "" && !params.Order.Beyond(PositionOf(*rec, across), after) {
				continue
			}
			recs = append(recs, rec)
		}
	}
	if across {
		for _, keys := range m.records {
			collect(keys)
		}
	} else {
		collect(m.records[params.Tenant])
	}
	slices.SortFunc(recs, func(a, b *Record) int {
		c := ComparePosition(PositionOf(*a, across), PositionOf(*b, across))
		if params.Order == NewestFirst {
			return -c
		}
		return c
	})
	limit := params.EffectiveLimit()
	var page Page
	for i, rec := range recs {
		if i == limit {
			page.Next = PositionOf(*recs[i-1], across).Cursor(params, across)
			break
		}
		page.Records = append(page.Records, copyRecord(rec))
	}
	return page, nil
}

// CountBacklog implements [Store.CountBacklog].
func (m *Memory) CountBacklog(ctx context.Context) ([]BacklogCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memory store: count backlog: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	counts := map[string]*BacklogCount{}
	for _, keys := range m.records {
		for _, rec := range keys {
			if now.Before(rec.ExpiresAt) {
				Tally(counts, *rec, now)
			}
		}
	}
	return SortBacklog(counts), nil
}
