package store

import (
	"context"
	"time"
)

// DefaultTTL is the retention window a store applies when its options leave
// the TTL unset: a record expires this long after it was last written, and an
// expired key is free again.
const DefaultTTL = 24 * time.Hour

// MaxKeyLength bounds [ClaimParams.Key] and every other key a store is given.
// Keys produced by the keyspace package are 67 bytes.
const MaxKeyLength = 256

// MaxTenantLength bounds the tenant, in bytes, that a store accepts.
const MaxTenantLength = 256

// MaxHolderLength bounds [ClaimParams.Holder], in bytes.
const MaxHolderLength = 512

// MaxCheckLength bounds [ClaimParams.Check], in bytes. Digests made by
// keyspace.DeriveCheck are 84 bytes.
const MaxCheckLength = 256

// MaxRetention bounds [ClaimParams.Retention]: a hundred years, far short of
// [NeverExpires] however long the store runs.
const MaxRetention = 100 * 365 * 24 * time.Hour

// Store keeps the record of what already happened under each idempotency key.
//
// Every method is safe for concurrent use by many goroutines and, for the
// durable stores, by many processes. Records are scoped by tenant: nothing a
// method does through one tenant reads or changes a record of another.
//
// Errors: a store that cannot be reached returns an error matching
// [ErrUnavailable]; a call with malformed parameters one matching [ErrInvalid];
// a fenced call whose token no longer holds the claim one matching
// [ErrNotHolder]. A cancelled context returns the context's error; a Claim
// it interrupts is undone as [Store.Claim] describes.
type Store interface {
	// Claim tries to take the key in one atomic operation. It returns
	// StatusAcquired with the new record (and its fencing token) when the key
	// was free or its record had expired; StatusCompleted with the recorded
	// outcome; StatusIndeterminate when the key's effect is unknown; or
	// StatusHeld with the current holder's record when another caller holds
	// it. A held claim is not taken over because its lease ran out: the
	// result says so ([Result.LeaseExpired]) and the caller decides, taking
	// it over explicitly with [ClaimParams.Supersede].
	//
	// A claim whose fate is uncertain when Claim returns an error — the
	// caller's context ended, or the connection broke, while it was in
	// flight, so it may have taken effect without the caller learning its
	// token; or, for a store that checks its writes reached replicas, it
	// took effect but not durably enough — is undone before Claim returns,
	// and undoing it removes only what that claim created:
	//
	//   - a claim on a key that had no live record (or an expired one) may
	//     be deleted: it leaves no claim behind;
	//   - a takeover (Supersede set) never leaves the key free. It replaced
	//     a record that said "someone may have done this"; deleting it would
	//     let the next attempt run the body again. The store leaves the
	//     takeover standing, pending, with its lease ended by the store's
	//     clock, so the next claimer finds the key held with
	//     [Result.LeaseExpired], exactly as it would have found the
	//     superseded record, and decides the same way (an EFFECTFUL caller
	//     declares the holder lost: indeterminate).
	//
	// A store that cannot reach its server to undo a claim leaves it as it
	// landed, which frees nothing either: its lease runs out. Stores with
	// no in-flight window (the memory store) answer or refuse before they
	// change anything, and never undo.
	Claim(ctx context.Context, params ClaimParams) (Result, error)

	// Renew extends the lease of a pending claim held under params.Token and
	// returns the new lease deadline. Like every write it starts the record's
	// retention window again (and never lets it end before the new lease), so
	// a holder that keeps renewing never loses its record. It returns
	// ErrNotHolder when the token no longer holds a pending claim on the key.
	Renew(ctx context.Context, params RenewParams) (time.Time, error)

	// Complete records the outcome of a pending claim held under
	// params.Token; the record becomes StatusCompleted and its retention
	// window starts again. It returns ErrNotHolder when the token no longer
	// holds a pending claim on the key.
	Complete(ctx context.Context, params CompleteParams) error

	// Release frees a pending claim held under params.Token, as if it had
	// never been made. It returns ErrNotHolder when the token no longer holds
	// a pending claim on the key.
	Release(ctx context.Context, params ReleaseParams) error

	// MarkIndeterminate keeps a pending claim held under params.Token and
	// records that its outcome is unknown; every later claim on the key sees
	// StatusIndeterminate until a person resolves it. The record does not
	// expire meanwhile (its ExpiresAt is NeverExpires) and Sweep leaves it:
	// only Resolve and Forget remove it. It returns ErrNotHolder when the
	// token no longer holds a pending claim on the key.
	MarkIndeterminate(ctx context.Context, params MarkIndeterminateParams) error

	// Lookup returns the live record of a key, or ErrNotFound when there is
	// none (never claimed, released, resolved free, forgotten or expired).
	Lookup(ctx context.Context, params LookupParams) (Record, error)

	// Wait blocks until the key is no longer pending under params.Token, or
	// the pending claim's lease has run out by the store's clock, or ctx is
	// done. It returns the key's state as it then stands: StatusCompleted,
	// StatusIndeterminate, StatusFree (released, resolved free or expired),
	// or StatusHeld (taken over by another token, or with LeaseExpired set).
	// Stores wake waiters promptly when they can and poll otherwise.
	Wait(ctx context.Context, params WaitParams) (Result, error)

	// Resolve applies a person's decision to an indeterminate record: record
	// an outcome (the key becomes StatusCompleted, and the record keeps the
	// decision as its [Resolution]) or free the key. It returns ErrNotFound
	// when there is no live record, ErrNotIndeterminate when the record is
	// in another state, and, when params.Token is set, ErrNotHolder when the
	// indeterminate record standing is not the one under that token: a
	// decision made on one record never settles a newer one. With
	// params.RecordIfGone, a complete decision on a key with no live record
	// records the outcome instead of returning ErrNotFound.
	//
	// With params.Stale, the decision also settles a stale pending record
	// in the same single step: one pending under exactly params.Token whose
	// lease has run out by the store's clock (its holder is presumed gone).
	// It is settled as an indeterminate record is, trail included, and
	// keeps its holder, token and origin; its waiters are woken. A pending
	// record within its lease returns ErrLeaseLive, and one pending under
	// another token ErrNotHolder; neither is changed. No duplicate ever sees
	// the record between a takeover and the decision: there is none.
	Resolve(ctx context.Context, params ResolveParams) error

	// List returns a page of the tenant's live records that pass
	// params' filters, in params.Order, and a cursor to the next page. It
	// pages by position (keyset), never by offset: a record that stays live
	// while a listing pages is listed once, whatever is claimed or settled
	// meanwhile; a record claimed meanwhile may or may not be listed.
	List(ctx context.Context, params ListParams) (Page, error)

	// ListAcrossTenants is List over every tenant of the store, ordered by
	// CreatedAt, then tenant, then key. It is for operators only: it reads
	// across the tenant boundary every other method keeps, so a service
	// acting for one tenant must never call it. params.Tenant must be empty.
	ListAcrossTenants(ctx context.Context, params ListParams) (Page, error)

	// CountBacklog counts, across every tenant, the live records that
	// wait for a person: indeterminate ones, and pending ones whose lease
	// has run out by the store's clock (stale). It answers per activity
	// type (Origin.ActivityType), sorted by it, never per tenant or key, so
	// a worker may export it as a gauge. Activity types with nothing
	// waiting are left out.
	CountBacklog(ctx context.Context) ([]BacklogCount, error)

	// Forget erases every record of the tenant outright, in every state and
	// layout, and returns how many it erased. It does not ask what the
	// records are for: a held record's duplicates, an indeterminate
	// record's decision rerun, and any later call of a completed one find
	// the key free and run their effect again. idempotencyctl forget
	// refuses while the tenant has held or indeterminate records (unless
	// -force); a program of its own lists them first
	// (ListParams.States) and stops the tenant's workers for a strict
	// guarantee.
	Forget(ctx context.Context, params ForgetParams) (int, error)

	// Sweep deletes up to params.Limit records whose retention window has
	// passed and returns how many it deleted. Expired records already read as
	// free; sweeping only reclaims their space.
	Sweep(ctx context.Context, params SweepParams) (int, error)
}

// Clock tells a store the time. Stores take one in their options so tests can
// move time by hand.
type Clock interface {
	Now() time.Time
}

// SystemClock is the [Clock] that reads the system's time.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// State is where a record stands.
type State uint8

// The states a live record can be in.
const (
	// StatePending: a caller holds the claim and its body may be running.
	StatePending State = iota + 1
	// StateCompleted: an outcome is recorded.
	StateCompleted
	// StateIndeterminate: the effect may or may not have happened and nobody
	// can say which; a person decides.
	StateIndeterminate
)

// String returns the state's lower-case name.
func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateCompleted:
		return "completed"
	case StateIndeterminate:
		return "indeterminate"
	default:
		return "unknown"
	}
}

// ParseState is the inverse of [State.String].
func ParseState(s string) (State, error) {
	switch s {
	case "pending":
		return StatePending, nil
	case "completed":
		return StateCompleted, nil
	case "indeterminate":
		return StateIndeterminate, nil
	default:
		return 0, &InvalidError{Field: "State", Reason: "unknown state " + quote(s)}
	}
}

// Record is what a store keeps under one key. It holds a digest of the
// arguments, never the arguments themselves.
type Record struct {
	// Tenant scopes the record.
	Tenant string
	// Key is the idempotency key's digest.
	Key string
	// State is where the record stands.
	State State
	// Holder names the caller that claimed the key.
	Holder string
	// Token fences the claim: only calls carrying it may complete, release,
	// renew or mark it. A token is never reused for the same key.
	Token int64
	// LeaseUntil is when the holder's lease runs out unless renewed.
	LeaseUntil time.Time
	// ExpiresAt is when the record's retention window ends.
	ExpiresAt time.Time
	// CreatedAt is when the key was claimed.
	CreatedAt time.Time
	// UpdatedAt is when the record last changed.
	UpdatedAt time.Time
	// Outcome is the recorded result of a completed record, as opaque bytes.
	Outcome []byte
	// Reason says why a record is indeterminate.
	Reason string
	// Origin names the execution that made the claim standing in the
	// record, so an operator can find its workflow. The zero Origin when
	// the claimer gave none (and for records written before stores kept
	// it).
	Origin Origin
	// Resolution is the person's decision that completed an indeterminate
	// record: what, by whom, why and when. The zero Resolution for a record
	// no person decided (and for records written before stores kept it). A
	// decision that frees the key leaves no record to keep it in.
	Resolution Resolution
	// Check is the digest of the arguments the claimer declared to be
	// checked ([ClaimParams.Check]), opaque to the store: never the
	// arguments themselves. Empty when the claimer gave none (and for
	// records written before stores kept it).
	Check string
	// Retention is the record's own retention window ([ClaimParams.Retention]),
	// which every write of the record restarts in place of the store's TTL.
	// Zero when the store's TTL applies (and for records written before
	// stores kept it).
	Retention time.Duration
}

// MaxResolutionTextLength bounds ResolveParams.By, Reason and Reference, in
// bytes.
const MaxResolutionTextLength = 1024

// Resolution is the trail of a person's decision on an indeterminate record.
// It holds identifiers and prose, never the activity's arguments.
type Resolution struct {
	// Action is the decision applied; zero when there was none.
	Action Action `json:"action,omitempty"`
	// By names the person or system that decided.
	By string `json:"by,omitempty"`
	// Reason says why, for the next person who reads the record.
	Reason string `json:"reason,omitempty"`
	// Reference points at the evidence: a ticket, the downstream's
	// confirmation.
	Reference string `json:"reference,omitempty"`
	// At is when the store applied the decision, by its clock.
	At time.Time `json:"at,omitzero"`
}

// NeverExpires is the ExpiresAt of an indeterminate record: it keeps until a
// person resolves it (or Forget erases its tenant), so a key whose effect
// may have landed never reads as free while someone decides, however long
// that takes. (The year 2200: within the range of microseconds the Redis
// store keeps exactly.)
var NeverExpires = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)

// MaxOriginLength bounds each identifier of an [Origin], in bytes.
const MaxOriginLength = 1024

// Origin names the Temporal execution that claimed a key: identifiers only,
// never the activity's arguments or result.
type Origin struct {
	// WorkflowID and RunID name the workflow execution.
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	// ActivityType is the activity's registered name.
	ActivityType string `json:"activity_type,omitempty"`
	// ActivityID and Attempt name the activity execution and its attempt.
	ActivityID string `json:"activity_id,omitempty"`
	Attempt    int32  `json:"attempt,omitempty"`
}

// Status is the answer to a [Store.Claim] or [Store.Wait].
type Status uint8

// The statuses a claim or a wait can answer with.
const (
	// StatusAcquired: the caller now holds the key (Claim only).
	StatusAcquired Status = iota + 1
	// StatusCompleted: an outcome is recorded; Result.Record.Outcome holds it.
	StatusCompleted
	// StatusHeld: another claim is pending on the key.
	StatusHeld
	// StatusIndeterminate: the key's effect is unknown.
	StatusIndeterminate
	// StatusFree: the key has no live record (Wait only).
	StatusFree
)

// String returns the status's lower-case name.
func (s Status) String() string {
	switch s {
	case StatusAcquired:
		return "acquired"
	case StatusCompleted:
		return "completed"
	case StatusHeld:
		return "held"
	case StatusIndeterminate:
		return "indeterminate"
	case StatusFree:
		return "free"
	default:
		return "unknown"
	}
}

// Result is what [Store.Claim] and [Store.Wait] report.
type Result struct {
	// Status is the answer.
	Status Status
	// Record is the key's record as it stood; the zero Record for StatusFree.
	Record Record
	// LeaseExpired is set with StatusHeld when the holder's lease has run
	// out by the store's clock: the holder is presumed dead, not slow.
	LeaseExpired bool
}

// ClaimParams are the parameters of [Store.Claim].
type ClaimParams struct {
	// Tenant scopes the key. Required.
	Tenant string
	// Key is the idempotency key. Required.
	Key string
	// Holder names the caller, for the record and for operators. Required.
	Holder string
	// Lease is how long the claim holds before waiters may presume the holder
	// dead, unless renewed. Required, positive. The record's retention
	// window never ends before the lease does, however long it is.
	Lease time.Duration
	// Origin names the claiming execution, kept with the record for
	// operators. Optional.
	Origin Origin
	// Check is a digest of the arguments the call must share with every
	// call the record answers (see keyspace.DeriveCheck), kept with the
	// record as [Record.Check]. The store never reads it. Optional; at most
	// MaxCheckLength bytes.
	Check string
	// Retention, when positive, is the record's own retention window in
	// place of the store's TTL: every write of the record (this claim, a
	// renewal, a completion, a person's decision) makes it expire this long
	// after, never before its lease ends, and Sweep reclaims it then. It is
	// kept with the record as [Record.Retention]. Zero: the store's TTL.
	// Must not be negative nor longer than MaxRetention.
	Retention time.Duration
	// Supersede, when non-zero, takes the key over if it is pending under
	// exactly this token: the caller has decided that holder is gone. A
	// claim pending under any other token is reported as StatusHeld.
	Supersede int64
}

// RenewParams are the parameters of [Store.Renew].
type RenewParams struct {
	Tenant string
	Key    string
	Token  int64
	// Lease is the new lease, counted from now. Required, positive.
	Lease time.Duration
}

// CompleteParams are the parameters of [Store.Complete].
type CompleteParams struct {
	Tenant string
	Key    string
	Token  int64
	// Outcome is the result to record; nil and empty are the same.
	Outcome []byte
}

// ReleaseParams are the parameters of [Store.Release].
type ReleaseParams struct {
	Tenant string
	Key    string
	Token  int64
}

// MarkIndeterminateParams are the parameters of [Store.MarkIndeterminate].
type MarkIndeterminateParams struct {
	Tenant string
	Key    string
	Token  int64
	// Reason says why the outcome is unknown, for the person who decides.
	Reason string
}

// LookupParams are the parameters of [Store.Lookup].
type LookupParams struct {
	Tenant string
	Key    string
}

// WaitParams are the parameters of [Store.Wait].
type WaitParams struct {
	Tenant string
	Key    string
	// Token is the pending claim the caller saw and waits on.
	Token int64
}

// Action is what a person's decision on an indeterminate record does to
// it: the store's half of [decision.Action], which also retries and fails
// calls without touching the record.
//
// [decision.Action]: https://pkg.go.dev/github.com/tesserix/idempotency/decision#Action
type Action uint8

// The actions [Store.Resolve] applies.
const (
	// ActionComplete records ResolveParams.Outcome: the effect happened.
	ActionComplete Action = iota + 1
	// ActionFree frees the key: the effect did not happen and may be tried
	// again.
	ActionFree
)

// Decision is the former name of [Action].
//
// Deprecated: use [Action]; this name goes in the next release.
type Decision = Action

// The former names of [ActionComplete] and [ActionFree].
//
// Deprecated: use [ActionComplete] and [ActionFree]; these names go in the
// next release.
const (
	DecisionComplete = ActionComplete
	DecisionFree     = ActionFree
)

// String returns the action's lower-case name.
func (d Action) String() string {
	switch d {
	case ActionComplete:
		return "complete"
	case ActionFree:
		return "free"
	default:
		return "unknown"
	}
}

// MarshalText returns the decision's name, so a [Resolution] reads as
// "complete" or "free" in JSON.
func (d Action) MarshalText() ([]byte, error) {
	if d == 0 {
		return []byte{}, nil
	}
	return []byte(d.String()), nil
}

// UnmarshalText is the inverse of [Action.MarshalText].
func (d *Action) UnmarshalText(b []byte) error {
	switch string(b) {
	case "":
		*d = 0
	case "complete":
		*d = ActionComplete
	case "free":
		*d = ActionFree
	default:
		return &InvalidError{Field: "Decision", Reason: "unknown decision " + quote(string(b))}
	}
	return nil
}

// ResolveParams are the parameters of [Store.Resolve].
type ResolveParams struct {
	Tenant   string
	Key      string
	Decision Action
	// Outcome is recorded with DecisionComplete.
	Outcome []byte
	// Token, when non-zero, fences the decision: it applies only while the
	// indeterminate record standing is the one claimed under this token
	// (the Token of the record the person looked at). Zero applies it to
	// whatever indeterminate record stands, for an operator who has just
	// read it.
	Token int64
	// By names the person or system that decided. Optional; at most
	// MaxResolutionTextLength bytes.
	By string
	// Reason says why. Optional; at most MaxResolutionTextLength bytes.
	Reason string
	// Reference points at the evidence (a ticket, a confirmation number).
	// Optional; at most MaxResolutionTextLength bytes.
	Reference string
	// RecordIfGone, with DecisionComplete, records the outcome when the
	// key has no live record (the indeterminate record decided on expired
	// or was swept meanwhile): a completed record, held by ResolveHolder
	// and keeping the Resolution, instead of ErrNotFound, so the effect the
	// person confirmed is not run again. A key claimed again meanwhile is
	// left alone, with the errors above.
	RecordIfGone bool
	// Check and Retention are kept with the record RecordIfGone creates,
	// as ClaimParams' are with a claim's: the digest of the checked
	// arguments of the call decided on, and its own retention window
	// (zero: the store's TTL). A decision on a record that stands keeps
	// the record's own, whatever these say.
	Check     string
	Retention time.Duration
	// Stale, with Token set (required), also applies the decision to the
	// record under Token while it is pending and its lease has run out by
	// the store's clock: a holder that died after its effect may have
	// landed, whose record a person settles in one fenced step (see
	// [Store.Resolve]). An indeterminate record under Token is decided as
	// without Stale.
	Stale bool
}

// ForgetParams are the parameters of [Store.Forget].
type ForgetParams struct {
	// Tenant whose records are erased. Required.
	Tenant string
}

// DefaultSweepLimit is the batch [Store.Sweep] uses when SweepParams.Limit is
// zero.
const DefaultSweepLimit = 1000

// SweepParams are the parameters of [Store.Sweep].
type SweepParams struct {
	// Limit bounds how many records one call deletes. Defaults to
	// DefaultSweepLimit.
	Limit int
}

// Pinger is implemented by a store that can tell whether its backend
// answers: the PostgreSQL and Redis stores. The worker package pings the
// store when a worker starts, and refuses to start one whose store does
// not answer, with one error naming where it looked, rather than start and
// fail every declared call while it stays away.
type Pinger interface {
	// Ping returns nil once the backend answered, or an error matching
	// [ErrUnavailable] that names the address it tried.
	Ping(ctx context.Context) error
}
