package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// faultMode is how the numbered store call a fault point names fails.
type faultMode uint8

const (
	// errBefore: the call returns store.ErrUnavailable without reaching
	// the store: nothing was done.
	errBefore faultMode = iota + 1
	// lostReply: the store did what it was asked, and the answer never
	// arrived: the call returns store.ErrUnavailable. A claim that landed
	// is left as it landed (the store could not reach its server to undo
	// it, which the contract allows); a transaction that was begun is
	// rolled back (its connection broke).
	lostReply
	// hang: the call does nothing and returns only when its context ends,
	// with the context's error: a call that hangs past its deadline. A
	// call whose context never ends is reported as a call left without an
	// end (hangLimit).
	hang
	// hangAfter: the store did what it was asked, and the answer never
	// came: the call returns only when its context ends, with the
	// context's error (what was done is left as lostReply leaves it).
	hangAfter
)

var faultModes = []faultMode{errBefore, lostReply, hang, hangAfter}

func (m faultMode) String() string {
	switch m {
	case errBefore:
		return "errBefore"
	case lostReply:
		return "lostReply"
	case hang:
		return "hang"
	case hangAfter:
		return "hangAfter"
	}
	return "none"
}

// hangLimit is how long a hanging call waits for its context before the
// test reports it as a call without a deadline: every store call the
// dispatcher makes must have one (its own or the activity's).
const hangLimit = 30 * time.Second

var (
	errFaultBefore = errors.New("fault point: the store was not reached")
	errFaultLost   = errors.New("fault point: the store acted, its answer was lost")
)

// numberedStore numbers every call made to the store it wraps (each method
// of store.Store, store.Transactor and store.Transaction) and fails the
// call numbered failAt in mode. With failAt 0 it only counts, so a
// scenario run once tells how many fault points it has.
//
// It also stands in for time: a Wait on a pending claim whose lease is
// live moves the fake clock to the end of that lease first. In the
// scenarios no two executions run at once, so a claim a wait meets is
// always one whose execution has ended (a lost claim, an orphaned one):
// its lease running out is what a real wait would see, later.
type numberedStore struct {
	inner store.Store
	clock *storetest.Clock

	mu       sync.Mutex
	n        int
	failAt   int
	mode     faultMode
	failedOp string
	ops      []string
	noEnd    []string // calls that hung with no deadline to end them
	renewed  chan struct{}
	claimed  map[[2]string]bool // the tenants and keys claimed
}

func newNumberedStore(inner store.Store, clock *storetest.Clock, failAt int, mode faultMode) store.Store {
	s := &numberedStore{inner: inner, clock: clock, failAt: failAt, mode: mode, renewed: make(chan struct{})}
	if tx, ok := inner.(store.Transactor); ok {
		return &numberedTxStore{numberedStore: s, tx: tx}
	}
	return s
}

// numberedOf returns the numberedStore behind s.
func numberedOf(s store.Store) *numberedStore {
	if t, ok := s.(*numberedTxStore); ok {
		return t.numberedStore
	}
	return s.(*numberedStore)
}

// enter numbers a call of op and returns how it fails (0: it does not).
func (s *numberedStore) enter(op string) faultMode {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	s.ops = append(s.ops, op)
	if op == "Renew" {
		close(s.renewed)
		s.renewed = make(chan struct{})
	}
	if s.n == s.failAt {
		s.failedOp = op
		return s.mode
	}
	return 0
}

// renewal returns a channel closed when the next Renew is called.
func (s *numberedStore) renewal() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewed
}

func (s *numberedStore) calls() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, append([]string(nil), s.ops...)
}

// leftPending returns the claimed keys whose record is still pending.
func (s *numberedStore) leftPending(ctx context.Context) []string {
	s.mu.Lock()
	keys := make([][2]string, 0, len(s.claimed))
	for k := range s.claimed {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	var out []string
	for _, k := range keys {
		rec, err := s.inner.Lookup(ctx, store.LookupParams{Tenant: k[0], Key: k[1]})
		if err == nil && rec.State == store.StatePending {
			out = append(out, fmt.Sprintf("%s (holder %s)", k[1], rec.Holder))
		}
	}
	return out
}

func (s *numberedStore) hungWithoutEnd() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.noEnd...)
}

// do runs one call of op through the fault point.
func do[T any](s *numberedStore, ctx context.Context, op string, f func(context.Context) (T, error), undo func(T)) (T, error) {
	var zero T
	switch s.enter(op) {
	case errBefore:
		return zero, store.Unavailable("fault point "+op, errFaultBefore)
	case lostReply:
		v, err := f(ctx)
		if err == nil && undo != nil {
			undo(v)
		}
		return zero, store.Unavailable("fault point "+op, errFaultLost)
	case hang:
		return zero, s.hang(ctx, op)
	case hangAfter:
		v, err := f(ctx)
		if err == nil && undo != nil {
			undo(v)
		}
		return zero, s.hang(ctx, op)
	}
	return f(ctx)
}

// hang blocks until ctx ends and returns its error, or reports a call
// that no deadline ends.
func (s *numberedStore) hang(ctx context.Context, op string) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(hangLimit):
		s.mu.Lock()
		s.noEnd = append(s.noEnd, op)
		s.mu.Unlock()
		return store.Unavailable("fault point "+op, fmt.Errorf("hung %s without a deadline", hangLimit))
	}
}

func (s *numberedStore) Claim(ctx context.Context, p store.ClaimParams) (store.Result, error) {
	s.mu.Lock()
	if s.claimed == nil {
		s.claimed = make(map[[2]string]bool)
	}
	s.claimed[[2]string{p.Tenant, p.Key}] = true
	s.mu.Unlock()
	return do(s, ctx, "Claim", func(ctx context.Context) (store.Result, error) { return s.inner.Claim(ctx, p) }, nil)
}

func (s *numberedStore) Renew(ctx context.Context, p store.RenewParams) (time.Time, error) {
	return do(s, ctx, "Renew", func(ctx context.Context) (time.Time, error) { return s.inner.Renew(ctx, p) }, nil)
}

func (s *numberedStore) Complete(ctx context.Context, p store.CompleteParams) error {
	_, err := do(s, ctx, "Complete", func(ctx context.Context) (struct{}, error) { return struct{}{}, s.inner.Complete(ctx, p) }, nil)
	return err
}

func (s *numberedStore) Release(ctx context.Context, p store.ReleaseParams) error {
	_, err := do(s, ctx, "Release", func(ctx context.Context) (struct{}, error) { return struct{}{}, s.inner.Release(ctx, p) }, nil)
	return err
}

func (s *numberedStore) MarkIndeterminate(ctx context.Context, p store.MarkIndeterminateParams) error {
	_, err := do(s, ctx, "MarkIndeterminate", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.inner.MarkIndeterminate(ctx, p)
	}, nil)
	return err
}

func (s *numberedStore) Lookup(ctx context.Context, p store.LookupParams) (store.Record, error) {
	return do(s, ctx, "Lookup", func(ctx context.Context) (store.Record, error) { return s.inner.Lookup(ctx, p) }, nil)
}

func (s *numberedStore) Wait(ctx context.Context, p store.WaitParams) (store.Result, error) {
	return do(s, ctx, "Wait", func(ctx context.Context) (store.Result, error) {
		// Time passes while nobody renews the claim waited on (see the
		// type's comment).
		if rec, err := s.inner.Lookup(ctx, store.LookupParams{Tenant: p.Tenant, Key: p.Key}); err == nil &&
			rec.State == store.StatePending && rec.Token == p.Token && s.clock.Now().Before(rec.LeaseUntil) {
			s.clock.Set(rec.LeaseUntil)
		}
		return s.inner.Wait(ctx, p)
	}, nil)
}

func (s *numberedStore) Resolve(ctx context.Context, p store.ResolveParams) error {
	_, err := do(s, ctx, "Resolve", func(ctx context.Context) (struct{}, error) { return struct{}{}, s.inner.Resolve(ctx, p) }, nil)
	return err
}

func (s *numberedStore) List(ctx context.Context, p store.ListParams) (store.Page, error) {
	return do(s, ctx, "List", func(ctx context.Context) (store.Page, error) { return s.inner.List(ctx, p) }, nil)
}

func (s *numberedStore) ListAcrossTenants(ctx context.Context, p store.ListParams) (store.Page, error) {
	return do(s, ctx, "ListAcrossTenants", func(ctx context.Context) (store.Page, error) { return s.inner.ListAcrossTenants(ctx, p) }, nil)
}

func (s *numberedStore) CountBacklog(ctx context.Context) ([]store.BacklogCount, error) {
	return do(s, ctx, "CountBacklog", func(ctx context.Context) ([]store.BacklogCount, error) { return s.inner.CountBacklog(ctx) }, nil)
}

func (s *numberedStore) Forget(ctx context.Context, p store.ForgetParams) (int, error) {
	return do(s, ctx, "Forget", func(ctx context.Context) (int, error) { return s.inner.Forget(ctx, p) }, nil)
}

func (s *numberedStore) Sweep(ctx context.Context, p store.SweepParams) (int, error) {
	return do(s, ctx, "Sweep", func(ctx context.Context) (int, error) { return s.inner.Sweep(ctx, p) }, nil)
}

// numberedTxStore is a numberedStore over a store.Transactor; it numbers
// the transactions' calls too.
type numberedTxStore struct {
	*numberedStore
	tx store.Transactor
}

func (s *numberedTxStore) CheckTransactional(db any) error { return s.tx.CheckTransactional(db) }

func (s *numberedTxStore) BeginTransaction(ctx context.Context, p store.TransactionParams) (store.Transaction, error) {
	t, err := do(s.numberedStore, ctx, "BeginTransaction", func(ctx context.Context) (store.Transaction, error) {
		return s.tx.BeginTransaction(ctx, p)
	}, func(t store.Transaction) {
		// The connection that carried the answer broke: the server ends
		// the transaction.
		_ = t.Rollback(context.WithoutCancel(ctx))
	})
	if err != nil {
		return nil, err
	}
	return &numberedTx{s: s.numberedStore, inner: t}, nil
}

type numberedTx struct {
	s     *numberedStore
	inner store.Transaction
}

func (t *numberedTx) Context(ctx context.Context) context.Context { return t.inner.Context(ctx) }

func (t *numberedTx) Commit(ctx context.Context, outcome []byte) error {
	_, err := do(t.s, ctx, "Commit", func(ctx context.Context) (struct{}, error) { return struct{}{}, t.inner.Commit(ctx, outcome) }, nil)
	if err != nil {
		// Whatever the fault, the transaction is over or abandoned: end it
		// as a broken connection would, so it holds nothing.
		_ = t.inner.Rollback(context.WithoutCancel(ctx))
	}
	return err
}

func (t *numberedTx) Rollback(ctx context.Context) error {
	_, err := do(t.s, ctx, "Rollback", func(ctx context.Context) (struct{}, error) { return struct{}{}, t.inner.Rollback(ctx) }, nil)
	if err != nil {
		_ = t.inner.Rollback(context.WithoutCancel(ctx))
	}
	return err
}
