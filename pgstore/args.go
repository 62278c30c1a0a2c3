package pgstore

import (
	"time"

	"github.com/tesserix/idempotency/store"
)

// The statements' parameters. Every statement in sql.go names its bind
// parameters (@tenant, @now, …); the struct below that goes with it lists
// them, in its params method, in the order bind numbers them ($1, $2, …)
// and a call binds their values. A call fills the struct, so each value it
// passes is named, and the statement and the call cannot disagree on an
// order: both come from the same list. bind refuses, when the store is
// built, a statement that uses a name its list lacks, or that leaves a
// listed name unused.

// param is one bind parameter: the name the statement's text uses for it
// (@name) and the value a call binds.
type param struct {
	name  string
	value any
}

// paramList is a statement's parameters in their positional order.
type paramList []param

// names returns the parameters' names, in order, for bind.
func (l paramList) names() []string {
	n := make([]string, len(l))
	for i, p := range l {
		n[i] = p.name
	}
	return n
}

// values returns the parameters' values, in order, as pgx takes them.
func (l paramList) values() []any {
	v := make([]any, len(l))
	for i, p := range l {
		v[i] = p.value
	}
	return v
}

// notice is where a statement that settles a record announces it: the
// notification channel and the key's payload (payloadFor). A silent notice
// (a store without Capabilities.Notify) binds neither: its statements
// announce nothing.
type notice struct {
	channel, payload string
	silent           bool
}

func (n notice) params() paramList {
	if n.silent {
		return nil
	}
	return paramList{{"channel", n.channel}, {"payload", n.payload}}
}

// cat joins parameter lists, in order.
func cat(lists ...paramList) paramList {
	var n int
	for _, l := range lists {
		n += len(l)
	}
	out := make(paramList, 0, n)
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// fence names the record a fenced statement changes and the claim that
// must hold it: tenant and key, the claim's token, and now, by which the
// record must still be live.
type fence struct {
	tenant, key string
	token       int64
	now         time.Time
}

func (f fence) params() paramList {
	return paramList{{"tenant", f.tenant}, {"key", f.key}, {"token", f.token}, {"now", f.now}}
}

// newClaim is the record a claim writes when it takes the key.
type newClaim struct {
	tenant, key, holder string
	token               int64
	leaseUntil          time.Time
	expiresAt           time.Time
	now                 time.Time
	origin              store.Origin
	check               *string // the check digest; nil: none (NULL)
	retention           *int64  // the record's own retention in µs; nil: none (NULL)
}

// record is the record c is: the claim a fast or batched claim acquired,
// as a read of its row returns it (kept reverses: no check digest for
// NULL, the retention in µs).
func (c newClaim) record() store.Record {
	rec := store.Record{
		Tenant: c.tenant, Key: c.key, State: store.StatePending, Holder: c.holder, Token: c.token,
		LeaseUntil: c.leaseUntil, ExpiresAt: c.expiresAt, CreatedAt: c.now, UpdatedAt: c.now, Origin: c.origin,
	}
	if c.check != nil {
		rec.Check = *c.check
	}
	if c.retention != nil {
		rec.Retention = time.Duration(*c.retention) * time.Microsecond
	}
	return rec
}

// claimInsertArgs are claimInsert's parameters.
type claimInsertArgs struct{ newClaim }

func (a claimInsertArgs) params() paramList {
	o := a.origin
	return paramList{
		{"tenant", a.tenant}, {"key", a.key}, {"holder", a.holder}, {"token", a.token},
		{"lease_until", a.leaseUntil}, {"expires_at", a.expiresAt}, {"now", a.now},
		{"origin_workflow_id", o.WorkflowID}, {"origin_run_id", o.RunID},
		{"origin_activity_type", o.ActivityType}, {"origin_activity_id", o.ActivityID}, {"origin_attempt", o.Attempt},
		{"check_digest", a.check}, {"retention_us", a.retention},
	}
}

// claimArgs are claim's parameters: the record it writes, the token it
// supersedes (0, never a token, for none) and where it announces a
// replaced row.
type claimArgs struct {
	newClaim
	supersede int64
	notice
}

func (a claimArgs) params() paramList {
	o := a.origin
	return cat(paramList{
		{"tenant", a.tenant}, {"key", a.key}, {"holder", a.holder}, {"token", a.token},
		{"lease_until", a.leaseUntil}, {"expires_at", a.expiresAt}, {"now", a.now},
		{"supersede", a.supersede},
	}, a.notice.params(), paramList{
		{"origin_workflow_id", o.WorkflowID}, {"origin_run_id", o.RunID},
		{"origin_activity_type", o.ActivityType}, {"origin_activity_id", o.ActivityID}, {"origin_attempt", o.Attempt},
		{"check_digest", a.check}, {"retention_us", a.retention},
	})
}

// claimReadArgs are claimRead's parameters: the key, and the claim's own
// token, whose row (when it inserted one) is not read back.
type claimReadArgs struct {
	tenant, key string
	ownToken    int64
}

func (a claimReadArgs) params() paramList {
	return paramList{{"tenant", a.tenant}, {"key", a.key}, {"own_token", a.ownToken}}
}

// keyAt are the parameters of lookup and watch: the key, and now, by which
// its record must be live.
type keyAt struct {
	tenant, key string
	now         time.Time
}

func (a keyAt) params() paramList {
	return paramList{{"tenant", a.tenant}, {"key", a.key}, {"now", a.now}}
}

// renewArgs are renew's parameters: the new lease, and the end of the
// store's retention window restarted at now (now + TTL).
type renewArgs struct {
	fence
	leaseUntil, expiresAt time.Time
}

func (a renewArgs) params() paramList {
	return append(a.fence.params(), param{"lease_until", a.leaseUntil}, param{"expires_at", a.expiresAt})
}

// completeArgs are complete's parameters: the end of the store's
// retention window restarted at now (now + TTL), and the outcome.
type completeArgs struct {
	fence
	expiresAt time.Time
	outcome   []byte
	notice
}

func (a completeArgs) params() paramList {
	return cat(a.fence.params(), paramList{{"expires_at", a.expiresAt}, {"outcome", a.outcome}}, a.notice.params())
}

// completeTxArgs are the parameters of completeTx and completeTxGuarded:
// complete's, and the transaction's mark (txguard.go).
type completeTxArgs struct {
	completeArgs
	mark string
}

func (a completeTxArgs) params() paramList {
	return append(a.completeArgs.params(), param{"mark", a.mark})
}

// approveArgs are the parameters of approve and approveGuarded: the
// transaction's mark.
type approveArgs struct{ mark string }

func (a approveArgs) params() paramList { return paramList{{"mark", a.mark}} }

// settleArgs are the parameters of release and endLease.
type settleArgs struct {
	fence
	notice
}

func (a settleArgs) params() paramList {
	return cat(a.fence.params(), a.notice.params())
}

// markArgs are markIndeterminate's parameters: the record's new expiry,
// and the reason.
type markArgs struct {
	fence
	expiresAt time.Time
	reason    string
	notice
}

func (a markArgs) params() paramList {
	return cat(a.fence.params(), paramList{{"expires_at", a.expiresAt}, {"reason", a.reason}}, a.notice.params())
}

// resolution is the trail a person's decision leaves on a record.
type resolution struct {
	action                int16 // store.Action
	by, reason, reference string
}

// resolveCompleteArgs are resolveComplete's parameters: the key; now and
// the end of the store's retention window restarted at now (now + TTL);
// the outcome; the fence token (0: unfenced); the trail; and stale, which
// lets it settle a pending record whose lease ran out at now.
type resolveCompleteArgs struct {
	tenant, key    string
	now, expiresAt time.Time
	outcome        []byte
	notice
	token int64
	resolution
	stale bool
}

func (a resolveCompleteArgs) params() paramList {
	return cat(paramList{
		{"tenant", a.tenant}, {"key", a.key}, {"now", a.now}, {"expires_at", a.expiresAt}, {"outcome", a.outcome},
	}, a.notice.params(), paramList{
		{"token", a.token},
		{"action", a.action}, {"by", a.by}, {"reason", a.reason}, {"reference", a.reference}, {"stale", a.stale},
	})
}

// resolveFreeArgs are resolveFree's parameters, as resolveComplete's.
type resolveFreeArgs struct {
	tenant, key string
	now         time.Time
	notice
	token int64
	stale bool
}

func (a resolveFreeArgs) params() paramList {
	return cat(paramList{{"tenant", a.tenant}, {"key", a.key}, {"now", a.now}}, a.notice.params(),
		paramList{{"token", a.token}, {"stale", a.stale}})
}

// resolveGoneArgs are resolveGone's parameters: the completed record it
// writes (its holder and token, made up: see store.ResolveHolder), now,
// its expiry, outcome and trail, and what it keeps: the check digest and
// its own retention (µs), nil for none.
type resolveGoneArgs struct {
	tenant, key, holder string
	token               int64
	now, expiresAt      time.Time
	outcome             []byte
	resolution
	notice
	check     *string
	retention *int64
}

func (a resolveGoneArgs) params() paramList {
	return cat(paramList{
		{"tenant", a.tenant}, {"key", a.key}, {"holder", a.holder}, {"token", a.token},
		{"now", a.now}, {"expires_at", a.expiresAt}, {"outcome", a.outcome},
		{"action", a.action}, {"by", a.by}, {"reason", a.reason}, {"reference", a.reference},
	}, a.notice.params(), paramList{{"check_digest", a.check}, {"retention_us", a.retention}})
}

// forgetArgs are forget's parameters: the tenant, and the channel it
// announces every erased key on (none when silent: see notice).
type forgetArgs struct {
	tenant, channel string
	silent          bool
}

func (a forgetArgs) params() paramList {
	if a.silent {
		return paramList{{"tenant", a.tenant}}
	}
	return paramList{{"tenant", a.tenant}, {"channel", a.channel}}
}

// sweepArgs are sweep's parameters: now, and how many rows at most.
type sweepArgs struct {
	now   time.Time
	limit int
}

func (a sweepArgs) params() paramList {
	return paramList{{"now", a.now}, {"limit", a.limit}}
}

// cancelClaimArgs are cancelClaim's parameters: the key and the token of
// the claim to undo (no clock: the claim is gone whether live or not).
type cancelClaimArgs struct {
	tenant, key string
	token       int64
	notice
}

func (a cancelClaimArgs) params() paramList {
	return cat(paramList{{"tenant", a.tenant}, {"key", a.key}, {"token", a.token}}, a.notice.params())
}

// backlogArgs are countBacklog's parameters.
type backlogArgs struct {
	now time.Time
}

func (a backlogArgs) params() paramList {
	return paramList{{"now", a.now}}
}

// kept returns the check digest and the retention (microseconds) a record
// keeps as bind parameters: NULL for none.
func kept(check string, retention time.Duration) (*string, *int64) {
	var c *string
	var r *int64
	if check != "" {
		c = &check
	}
	if us := retention.Microseconds(); us > 0 {
		r = &us
	}
	return c, r
}

// keptRetention is retention as the table keeps it: to the microsecond.
func keptRetention(retention time.Duration) time.Duration {
	return retention.Truncate(time.Microsecond)
}
