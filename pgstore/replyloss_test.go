package pgstore_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/netfault"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// The sizes of the faults below. They are not timing assertions: a reply
// held for replyHold cannot reach a claim whose context ends after
// claimBudget, whatever the machine's speed, and the budget is ample for
// a statement on loopback to reach the server and commit.
const (
	claimBudget = 500 * time.Millisecond
	replyHold   = 2 * time.Second
)

// replyLoss is a store whose pool reaches PostgreSQL through a netfault
// proxy (via), and a store on the same table that reaches it directly
// (direct), to set up what the first one acts on and to read what it left.
// Both follow one fake clock.
type replyLoss struct {
	proxy  *netfault.Proxy
	via    *pgstore.Store
	pool   *pgxpool.Pool // via's
	direct *pgstore.Store
	clock  *storetest.Clock
	ttl    time.Duration
}

func newReplyLoss(t *testing.T) *replyLoss {
	t.Helper()
	return newReplyLossWith(t, false)
}

// newReplyLossWith is newReplyLoss whose via store batches (batch), or not.
func newReplyLossWith(t *testing.T, batch bool) *replyLoss {
	t.Helper()
	pool, schema := pgenv.Postgres(t)
	r := &replyLoss{clock: storetest.NewClock(time.Now().UTC().Truncate(time.Millisecond)), ttl: time.Hour}
	opts := pgstore.Options{Schema: schema, Table: testenv.UniqueName("r"), Clock: r.clock, TTL: r.ttl,
		PollInterval: 5 * time.Millisecond, MaxPollInterval: 20 * time.Millisecond}
	r.direct = newStore(t, pool, schema, opts)

	cfg, err := pgxpool.ParseConfig(pgenv.PostgresURL())
	require.NoError(t, err)
	proxy, err := netfault.Start(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() }) // Registered first: runs after the pool is closed.
	r.proxy = proxy
	host, port, err := net.SplitHostPort(proxy.Addr())
	require.NoError(t, err)
	p, err := strconv.ParseUint(port, 10, 16)
	require.NoError(t, err)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	// One round trip per statement, so the only reply in flight is the
	// statement's own (no prepare before it).
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.MaxConns = 2
	cfg.MinConns = 0
	r.pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(r.pool.Close)
	opts.Batch = batch
	r.via, err = pgstore.New(r.pool, opts)
	require.NoError(t, err)
	t.Cleanup(r.via.Close)
	return r
}

// warm opens both of via's connections before any fault is set, so the
// claim runs on one and its undo finds the other open: no connection is
// made while replies are held.
func (r *replyLoss) warm(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	a, err := r.pool.Acquire(ctx)
	require.NoError(t, err)
	b, err := r.pool.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, a.Ping(ctx))
	require.NoError(t, b.Ping(ctx))
	a.Release()
	b.Release()
}

// lostHolder leaves key pending under a holder whose lease has run out and
// returns its record.
func (r *replyLoss) lostHolder(t *testing.T, key string) store.Record {
	t.Helper()
	res, err := r.direct.Claim(t.Context(), store.ClaimParams{Tenant: "acme", Key: key, Holder: "lost-holder", Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status)
	r.clock.Advance(2 * time.Minute)
	return res.Record
}

// claimVia claims key through the proxy within claimBudget.
func (r *replyLoss) claimVia(t *testing.T, key string, supersede int64) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), claimBudget)
	defer cancel()
	_, err := r.via.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: key, Holder: "successor", Lease: time.Minute, Supersede: supersede})
	return err
}

// requireHeldLeaseRunOut requires what the next attempt must find after a
// takeover was undone: the key held by a holder presumed gone, never free.
func (r *replyLoss) requireHeldLeaseRunOut(t *testing.T, key string, lost store.Record) store.Record {
	t.Helper()
	rec, err := r.direct.Lookup(t.Context(), store.LookupParams{Tenant: "acme", Key: key})
	require.NoError(t, err, "the key the takeover replaced must not be free: the lost holder's effect may have landed")
	require.Equal(t, store.StatePending, rec.State)
	next, err := r.direct.Claim(t.Context(), store.ClaimParams{Tenant: "acme", Key: key, Holder: "next-attempt", Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, store.StatusHeld, next.Status, "the next attempt finds the key held, as it would have found the lost holder's record")
	assert.True(t, next.LeaseExpired, "and its holder presumed gone")
	return rec
}

// A takeover commits on the server, but its answer is held until the
// claim's context has ended (the activity's deadline, a cancel, a stall):
// Claim must not delete what it may have written, because that row
// replaced the lost holder's record. The key stays held, lease run out.
func TestTakeoverReplyLostKeepsTheKey(t *testing.T) {
	t.Parallel()
	r := newReplyLoss(t)
	r.warm(t)
	lost := r.lostHolder(t, "k")
	r.via.SetOnReplace(func() { r.proxy.SetDelay(netfault.Down, replyHold) })
	err := r.claimVia(t, "k", lost.Token)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	r.proxy.Heal()

	rec := r.requireHeldLeaseRunOut(t, "k", lost)
	assert.Equal(t, "successor", rec.Holder, "the takeover landed (else this test proves nothing) and was left standing")
	assert.NotEqual(t, lost.Token, rec.Token)
	assert.False(t, rec.LeaseUntil.After(r.clock.Now()), "its lease ended by the store's clock")
}

// The same takeover's answer is cut in the middle (the connection breaks)
// while the caller's context is still live: the statement may have
// committed, so the undo runs all the same, and ends the takeover's lease
// rather than leaving it live for a minute nobody holds it.
func TestTakeoverReplyCutEndsItsLease(t *testing.T) {
	t.Parallel()
	r := newReplyLoss(t)
	r.warm(t)
	lost := r.lostHolder(t, "k")
	r.via.SetOnReplace(func() { r.proxy.CutNext(netfault.Down, 1) })
	err := r.claimVia(t, "k", lost.Token)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Equal(t, 1, r.proxy.Stats().Cut, "the reply was cut")

	rec := r.requireHeldLeaseRunOut(t, "k", lost)
	assert.Equal(t, "successor", rec.Holder, "the takeover landed and was left standing")
}

// A claim of a free key whose answer is lost or cut leaves no claim
// behind: it created the row, so deleting it removes nothing else. The
// same holds for a claim that replaced an expired record (the key was
// free), through the statement that replaces rows.
func TestFreshClaimReplyLostLeavesNoClaim(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		expired bool
		fault   func(p *netfault.Proxy)
		want    error
	}{
		{"HeldFreeKey", false, func(p *netfault.Proxy) { p.SetDelay(netfault.Down, replyHold) }, context.DeadlineExceeded},
		{"CutFreeKey", false, func(p *netfault.Proxy) { p.CutNext(netfault.Down, 1) }, store.ErrUnavailable},
		{"HeldExpiredRecord", true, func(p *netfault.Proxy) { p.SetDelay(netfault.Down, replyHold) }, context.DeadlineExceeded},
		{"CutExpiredRecord", true, func(p *netfault.Proxy) { p.CutNext(netfault.Down, 1) }, store.ErrUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newReplyLoss(t)
			r.warm(t)
			if c.expired {
				r.lostHolder(t, "k")
				r.clock.Advance(r.ttl)
				replaced := false
				r.via.SetOnReplace(func() { replaced = true; c.fault(r.proxy) })
				t.Cleanup(func() { assert.True(t, replaced, "the claim went through the statement that replaces rows") })
			} else {
				c.fault(r.proxy)
			}
			err := r.claimVia(t, "k", 0)
			require.ErrorIs(t, err, c.want)
			r.proxy.Heal()
			_, err = r.direct.Lookup(t.Context(), store.LookupParams{Tenant: "acme", Key: "k"})
			require.ErrorIs(t, err, store.ErrNotFound, "the claim whose answer was lost was taken back")
			res, err := r.direct.Claim(t.Context(), store.ClaimParams{Tenant: "acme", Key: "k", Holder: "next-attempt", Lease: time.Minute})
			require.NoError(t, err)
			assert.Equal(t, store.StatusAcquired, res.Status)
		})
	}
}

// A batch of claims whose answer is lost (cut, or held past every
// caller's deadline) takes back every claim it may have made, by the
// tokens only it knows: the free key it claimed is free again, and the
// key a batch-mate found held keeps its holder's record, which the undo,
// fenced by token, cannot reach.
func TestBatchReplyLostLeavesNoClaim(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		fault func(p *netfault.Proxy)
		want  error
	}{
		{"Cut", func(p *netfault.Proxy) { p.CutNext(netfault.Down, 1) }, store.ErrUnavailable},
		{"Held", func(p *netfault.Proxy) { p.SetDelay(netfault.Down, replyHold) }, context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newReplyLossWith(t, true)
			r.warm(t)
			held, err := r.direct.Claim(t.Context(), store.ClaimParams{Tenant: "acme", Key: "held", Holder: "other", Lease: time.Minute})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, held.Status)
			c.fault(r.proxy)
			ctx, cancel := context.WithTimeout(t.Context(), claimBudget)
			defer cancel()
			_, alone, errs := r.via.ClaimTogether(ctx, []store.ClaimParams{
				{Tenant: "acme", Key: "free", Holder: "batch", Lease: time.Minute},
				{Tenant: "acme", Key: "held", Holder: "batch", Lease: time.Minute},
			})
			r.proxy.Heal()
			for i := range errs {
				require.ErrorIs(t, errs[i], c.want, "claim %d", i)
				require.False(t, alone[i], "a lost answer is not sent back to be claimed again")
			}
			_, err = r.direct.Lookup(t.Context(), store.LookupParams{Tenant: "acme", Key: "free"})
			require.ErrorIs(t, err, store.ErrNotFound, "the claim whose answer was lost was taken back")
			rec, err := r.direct.Lookup(t.Context(), store.LookupParams{Tenant: "acme", Key: "held"})
			require.NoError(t, err, "the undo removed a record the batch did not write")
			assert.Equal(t, held.Record.Token, rec.Token)
			assert.Equal(t, "other", rec.Holder)
		})
	}
}
